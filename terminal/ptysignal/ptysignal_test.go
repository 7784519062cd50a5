//go:build linux

package ptysignal_test

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/testpty"
	"github.com/classifierd/classifierd/terminal/ptysignal"
)

// start runs command on a new pty and returns its master once the
// program has printed marker.
func start(t *testing.T, command, marker string) *os.File {
	t.Helper()
	ptmx, _ := testpty.Run(t, command, marker)
	return ptmx
}

// settle polls Read until want holds or five seconds pass: a program is
// asleep in its read only some moments after its last output.
func settle(t *testing.T, ptmx *os.File, want func(ptysignal.Signals) bool) ptysignal.Signals {
	t.Helper()
	var s ptysignal.Signals
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		s, err = ptysignal.Read(ptmx)
		if err != nil {
			t.Fatal(err)
		}
		if want(s) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestQuietProgramsReadTheTerminal(t *testing.T) {
	for _, c := range []struct{ name, command, marker string }{
		{"cat", "echo ready; exec cat", "ready"},
		{"dc", "echo ready; exec dc", "ready"},
		{"ed", "echo ready; exec ed", "ready"},
		{"shell read", "read -p 'Name: ' x", "Name: "},
		{"select on the terminal", `exec python3 -c 'import select, sys; print("ready", flush=True); select.select([sys.stdin], [], [])'`, "ready"},
		{"poll on the terminal", `exec python3 -c 'import select, sys; p = select.poll(); p.register(sys.stdin, select.POLLIN); print("ready", flush=True); p.poll()'`, "ready"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ptmx := start(t, c.command, c.marker)
			s := settle(t, ptmx, func(s ptysignal.Signals) bool { return s.ReadingInput })
			if !s.ReadingInput {
				t.Errorf("%s waits for input but ReadingInput is false (%+v)", c.name, s)
			}
			if s.EchoOff || !s.Canonical {
				t.Errorf("%s leaves the terminal cooked, got echo off %v, canonical %v", c.name, s.EchoOff, s.Canonical)
			}
		})
	}
}

func TestBusyAndSleepingProgramsDoNotReadTheTerminal(t *testing.T) {
	for _, c := range []struct{ name, command string }{
		{"sleep", "echo ready; exec sleep 30"},
		{"busy loop", "echo ready; while :; do :; done"},
		// Servers wait in poll/select/epoll holding the terminal as
		// stdin; only what their wait set reads counts.
		{"server in select", `exec python3 -c 'import socket, select; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("ready", flush=True); select.select([s], [], [])'`},
		{"server in poll", `exec python3 -c 'import socket, select; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); p = select.poll(); p.register(s, select.POLLIN); print("ready", flush=True); p.poll()'`},
		{"server in epoll", `exec python3 -c 'import socket, select; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); e = select.epoll(); e.register(s, select.EPOLLIN); print("ready", flush=True); e.poll()'`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ptmx := start(t, c.command, "ready")
			time.Sleep(200 * time.Millisecond)
			for i := 0; i < 10; i++ {
				s, err := ptysignal.Read(ptmx)
				if err != nil {
					t.Fatal(err)
				}
				if s.ReadingInput {
					t.Fatalf("%s does not read the terminal but ReadingInput is true (%+v)", c.name, s)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// A line editor (readline in an interactive bash) reads keys with echo
// and line mode off and echoes them itself: reading, but not a secret.
func TestLineEditorIsRawNotSecret(t *testing.T) {
	ptmx := start(t, "PS1='box$ ' exec bash --norc --noprofile -i", "box$ ")
	s := settle(t, ptmx, func(s ptysignal.Signals) bool { return s.ReadingInput && !s.Canonical })
	if !s.ReadingInput || !s.EchoOff || s.Canonical {
		t.Errorf("readline: want reading, echo off, not canonical; got %+v", s)
	}
}

func TestSecretPromptTurnsEchoOff(t *testing.T) {
	for _, c := range []struct{ name, command, marker string }{
		{"read -s", "read -s -p 'API token: ' x", "API token: "},
		// getpass reads /dev/tty, not its standard input.
		{"getpass on /dev/tty", `exec python3 -c 'import getpass; getpass.getpass("Token: ")' < /dev/null`, "Token: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			ptmx := start(t, c.command, c.marker)
			s := settle(t, ptmx, func(s ptysignal.Signals) bool { return s.ReadingInput && s.EchoOff })
			if !s.ReadingInput || !s.EchoOff || !s.Canonical {
				t.Errorf("%s: want reading, echo off, canonical; got %+v", c.name, s)
			}
		})
	}
}

func TestNotAPtyMaster(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := ptysignal.Read(r); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a pipe is not a pty master, got err %v", err)
	}
}
