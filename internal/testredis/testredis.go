// Package testredis runs a real redis-server for a test: its own process on
// a free loopback port, with no persistence, in the test's temporary
// directory, killed when the test ends. The project installs redis-server
// (`make redis`, part of `make deps`); a test that needs it fails, never
// skips, when it is missing.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/testproc"
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
	sock string // unix socket: PING there reaches this process, never another one on the port
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
	// A short directory for the socket (sun_path holds 108 bytes).
	sockDir, err := os.MkdirTemp("", "testredis")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	s := &Server{t: t, bin: bin, dir: t.TempDir(), sock: filepath.Join(sockDir, "redis.sock"), args: args}
	t.Cleanup(s.Stop)
	// The free port is found by listening and closing, so another test
	// process may take it first: try a few.
	for try := 1; ; try++ {
		addr, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = addr
		out, err := s.start()
		if err == nil {
			return s
		}
		if try == 5 || !strings.Contains(out, "in use") {
			t.Fatalf("testredis: %v\n%s", err, out)
		}
	}
}

// freePort finds a free loopback port below the kernel's ephemeral range
// (ip_local_port_range), where neither another process's ":0" listener
// nor an outgoing connection's local port lands: a test that stops the
// server and starts it again on the same port (Stop, Start) found it taken
// in CI once ("bind: Address already in use"). Without the range it falls
// back to a port the kernel picks.
func freePort() (string, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				lo = n
			}
		}
	}
	const base = 10000
	if lo-base >= 1000 {
		for range 50 {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(base+rand.IntN(lo-base)))
			if l, err := net.Listen("tcp", addr); err == nil {
				return addr, l.Close()
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	return l.Addr().String(), l.Close()
}

// URL is the --state URL of database db on this server.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// Start (re)starts the server on Addr and waits until it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	if out, err := s.start(); err != nil {
		s.t.Fatalf("testredis: %v\n%s", err, out)
	}
}

// start runs redis-server on Addr and waits until it answers PING; on
// failure it returns the server's output.
func (s *Server) start() (string, error) {
	if s.cmd != nil {
		return "", errors.New("already running")
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--unixsocket", s.sock, "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
	cmd.Args = append(cmd.Args, s.args...)
	out := &testproc.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	s.cmd, s.done = cmd, make(chan error, 1)
	go func(done chan error) { done <- cmd.Wait() }(s.done)
	deadline := time.Now().Add(10 * time.Second)
	for !ping(s.sock) {
		select {
		case err := <-s.done:
			s.cmd = nil
			return out.String(), fmt.Errorf("redis-server on %s exited: %v", s.Addr, err)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return out.String(), fmt.Errorf("redis-server on %s not answering after 10s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", nil
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

// ping reports whether the server on the unix socket answers; it binds
// its TCP port first, so it is then listening there too.
func ping(sock string) bool {
	c, err := net.DialTimeout("unix", sock, time.Second)
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
