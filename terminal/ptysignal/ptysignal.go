// Package ptysignal reads what a hub can know about a pseudo-terminal
// beyond its output: whether the program in the foreground is blocked
// reading the terminal, and whether the terminal echoes and is in
// canonical (line) mode. These are the signals DetectInputPrompt takes as
// reading_input, echo_off and canonical_mode.
//
// A program that waits in silence (dc, cat, ed after a count) shows
// nothing on the screen to detect; the kernel still knows it is blocked in
// a read of the terminal. A getpass-style prompt turns echo off and keeps
// canonical mode, whatever its wording; a line editor (readline) turns
// both off and echoes by itself, so echo off alone is not a secret.
//
// The package works on Linux: it asks the pty master for the foreground
// process group (TIOCGPGRP) and the terminal's modes (TCGETS on a master
// answers for its slave), and reads /proc/<pid>/syscall and
// /proc/<pid>/fd of the group's processes, which needs the same user as
// the program (or root) and a ptrace scope that lets a parent inspect
// its descendants (the default).
package ptysignal

import "errors"

// Signals is what the kernel says about a terminal at one moment.
type Signals struct {
	// ReadingInput: a process of the foreground group is blocked in a
	// read of this terminal, or waiting in poll/select with the terminal
	// among its inputs (see Read for what can be told apart).
	ReadingInput bool
	// EchoOff: the terminal does not echo what is typed (ECHO clear).
	EchoOff bool
	// Canonical: the terminal delivers whole lines (ICANON set).
	Canonical bool
	// Foreground is the foreground process group's id.
	Foreground int
}

// ErrUnsupported is returned where the signals cannot be read (not Linux).
var ErrUnsupported = errors.New("ptysignal: not supported on this system")
