// Package testredis runs a real redis-server for a test: its own process on
// a free loopback port, with no persistence, in the test's temporary
// directory, killed when the test ends. The project installs redis-server
// (`make redis`, part of `make deps`); a test that needs it fails, never
// skips, when it is missing.
package testredis

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Hint tells the reader of a failed test how to get redis-server.
const Hint = "redis-server not found: run `make redis` (installs the Debian package redis-server), or put it on PATH"

// Server is one redis-server process.
type Server struct {
	// Addr is HOST:PORT; it stays the same across Stop and Start.
	Addr string
	t    testing.TB
	bin  string
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan error
}

// Start runs a redis-server for t and stops it when t ends; args are more
// redis-server options ("--requirepass", "secret").
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(Hint)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: addr, t: t, bin: bin, dir: t.TempDir(), args: args}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the --state URL of database db on this server.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// Start (re)starts the server on Addr and waits until it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("testredis: already running")
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
	s.cmd.Args = append(s.cmd.Args, s.args...)
	out := &strings.Builder{}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("testredis: %v", err)
	}
	s.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(s.cmd, s.done)
	deadline := time.Now().Add(10 * time.Second)
	for !ping(s.Addr) {
		select {
		case err := <-s.done:
			s.cmd = nil
			s.t.Fatalf("testredis: redis-server exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("testredis: redis-server on %s not answering after 10s\n%s", s.Addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: no goodbye to clients, like a crash) and
// waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	// -NOAUTH: up, with a password.
	return err == nil && (strings.TrimSpace(line) == "+PONG" || strings.HasPrefix(line, "-NOAUTH"))
}
