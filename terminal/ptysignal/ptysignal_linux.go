//go:build linux

package ptysignal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// waitCalls are the system calls a program blocked on input sleeps in:
// read itself, and the multiplexers line editors and event loops wait in
// before they read.
var waitCalls = map[int]bool{
	unix.SYS_READ: true, unix.SYS_READV: true, unix.SYS_PSELECT6: true, unix.SYS_PPOLL: true,
	unix.SYS_EPOLL_PWAIT: true, unix.SYS_EPOLL_PWAIT2: true,
}

// Read returns the signals of the terminal whose master is ptmx. The
// foreground group counts as reading when one of its processes is asleep
// in read/readv on a descriptor that is this terminal, or in a poll or
// select call while one of its standard descriptors is this terminal (the
// call's descriptor set cannot be read from /proc, so a program that polls
// only the network while holding the terminal counts too).
func Read(ptmx *os.File) (Signals, error) {
	fd := int(ptmx.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return Signals{}, fmt.Errorf("ptysignal: terminal modes: %w", err)
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return Signals{}, fmt.Errorf("ptysignal: foreground group: %w", err)
	}
	slave, err := slaveName(fd)
	if err != nil {
		return Signals{}, err
	}
	s := Signals{EchoOff: tio.Lflag&unix.ECHO == 0, Canonical: tio.Lflag&unix.ICANON != 0, Foreground: pgrp}
	pids, err := groupMembers(pgrp)
	if err != nil {
		return s, err
	}
	for _, pid := range pids {
		if reading(pid, slave) {
			s.ReadingInput = true
			break
		}
	}
	return s, nil
}

// slaveName is the /dev/pts path of the master's slave.
func slaveName(fd int) (string, error) {
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		return "", fmt.Errorf("ptysignal: not a pty master: %w", err)
	}
	return "/dev/pts/" + strconv.FormatUint(uint64(n), 10), nil
}

// groupMembers lists the processes whose process group is pgrp.
func groupMembers(pgrp int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("ptysignal: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := unix.Getpgid(pid); err == nil && g == pgrp {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// reading reports whether pid sleeps in a wait call on the terminal slave.
// /proc/<pid>/syscall is "<nr> <arg0> ..." while the process is blocked in
// a system call, "running" or "-1 ..." otherwise.
func reading(pid int, slave string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "syscall"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil || !waitCalls[nr] {
		return false
	}
	if nr == unix.SYS_READ || nr == unix.SYS_READV {
		fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 31)
		return err == nil && isTerminal(pid, int(fd), slave)
	}
	for fd := 0; fd <= 2; fd++ {
		if isTerminal(pid, fd, slave) {
			return true
		}
	}
	return false
}

func isTerminal(pid, fd int, slave string) bool {
	target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", strconv.Itoa(fd)))
	return err == nil && target == slave
}
