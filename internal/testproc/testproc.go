// Package testproc runs a process for a test: what it writes kept in a
// Buffer that is safe to read while it runs, killed and reaped when the
// test ends, and waited on until it is ready, failing at once with its
// output when it exits first. testdaemon runs classifierd with it;
// testredis keeps redis-server's output in its Buffer.
package testproc

import (
	"bytes"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that a process writes to while the test reads
// it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a process started by Start.
type Proc struct {
	Cmd *exec.Cmd
	// Output has what the process wrote to stderr (when Start set
	// Cmd.Stderr).
	Output *Buffer
	// Done receives the process's exit (Cmd.Wait's error) once. A reader
	// that takes it puts it back, so that the cleanup and later readers
	// see it too.
	Done chan error
}

// Start starts cmd, its stderr into Output unless cmd.Stderr is set, and
// kills and reaps it when t ends.
func Start(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Output: &Buffer{}, Done: make(chan error, 1)}
	if cmd.Stderr == nil {
		cmd.Stderr = p.Output
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.Done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.Done
	})
	return p
}

// Exited reports, without waiting, whether the process has exited, and
// its exit error; the exit stays in Done.
func (p *Proc) Exited() (exited bool, err error) {
	select {
	case err := <-p.Done:
		p.Done <- err
		return true, err
	default:
		return false, nil
	}
}

// WaitExit waits up to timeout for the process to exit and returns its
// exit error; exited is false when it still runs. The exit stays in Done.
func (p *Proc) WaitExit(timeout time.Duration) (exited bool, err error) {
	select {
	case err := <-p.Done:
		p.Done <- err
		return true, err
	case <-time.After(timeout):
		return false, nil
	}
}

// WaitReady calls ready every interval until it returns nil. It fails t,
// with the process's output, when the process exits first or ready has
// not succeeded within timeout (with ready's last error).
func (p *Proc) WaitReady(t testing.TB, what string, timeout, every time.Duration, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return
		}
		if exited, exit := p.Exited(); exited {
			t.Fatalf("%s exited early: %v\n%s", what, exit, p.Output.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v: %v\n%s", what, timeout, err, p.Output.String())
		}
		time.Sleep(every)
	}
}
