// Package testdaemon runs the real classifierd for a test: the commands
// built once per test binary (Binary; Main removes them), indexes made by
// gen-index on the real model (GenIndex), and the daemon started on a free
// loopback port with the real model, the ONNX Runtime library and private
// terminal state (Args, Start), waited on until its health check answers
// SERVING (WaitServing) or its port takes connections (WaitListening).
// Paths come from testenv; the processes are testproc's.
package testdaemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testproc"
)

// builds are the commands built by this test binary, by package.
var builds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// Binary builds the command in pkg, a directory relative to the module
// root ("./cmd/classifierd", "./tools/gen-index"), once per test binary
// and returns its path. A failed build fails every test that asks for it.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.bins == nil {
		builds.bins, builds.errs = map[string]string{}, map[string]error{}
	}
	if err := builds.errs[pkg]; err != nil {
		t.Fatal(err)
	}
	if bin, ok := builds.bins[pkg]; ok {
		return bin
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "classifierd-bin-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir = dir
	}
	cmd := exec.Command("go", "build", "-o", builds.dir+string(filepath.Separator), pkg)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		builds.errs[pkg] = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		t.Fatal(builds.errs[pkg])
	}
	builds.bins[pkg] = filepath.Join(builds.dir, filepath.Base(pkg))
	return builds.bins[pkg]
}

// Main runs the tests and removes the commands Binary built. A package
// whose tests call Binary calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	return code
}

// RequireORT fails t, saying how to get it, when the ONNX Runtime library
// is missing.
func RequireORT(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(testenv.ORTLib()); err != nil {
		t.Fatalf("ONNX Runtime library missing (%v)\n%s", err, testenv.Hint)
	}
}

// GenIndex builds an index of catalog with gen-index on the real model
// into a temporary directory and returns its path; extra are more
// gen-index flags.
func GenIndex(t testing.TB, catalog string, extra ...string) string {
	t.Helper()
	gi := Binary(t, "./tools/gen-index")
	RequireORT(t)
	out := filepath.Join(t.TempDir(), "test.idx")
	args := append([]string{"--catalog", catalog, "--model", testenv.ModelDir(), "--out", out, "--ort-lib", testenv.ORTLib()}, extra...)
	if b, err := exec.Command(gi, args...).CombinedOutput(); err != nil {
		t.Fatalf("gen-index: %v\n%s", err, b)
	}
	return out
}

// DefaultCatalog is the catalog the daemon ships with.
func DefaultCatalog() string {
	return filepath.Join(testenv.RepoRoot(), "data", "catalogs", "default.json")
}

// FreeAddr is a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		// The kernel may hand the same free port out twice in a row:
		// a test asking for two addresses got one, and its daemon's
		// second listener failed "address already in use" (CI, 2026-11-27).
		handedMu.Lock()
		seen := handed[addr]
		handed[addr] = true
		handedMu.Unlock()
		if !seen {
			return addr
		}
	}
}

// handed is every address FreeAddr returned in this process.
var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

// Args are the flags every test daemon takes: the real model and ONNX
// Runtime library, --listen addr, and terminal logs and database in a
// directory of the test's own.
func Args(t testing.TB, addr string) []string {
	t.Helper()
	state := t.TempDir()
	return []string{"--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(), "--listen", addr,
		"--terminal-logs", filepath.Join(state, "terminal"), "--terminal-db", filepath.Join(state, "terminal.db")}
}

// Start runs classifierd with args (Args and more, or a subcommand's) and
// returns at once; the process is killed when t ends.
func Start(t testing.TB, args ...string) *testproc.Proc {
	t.Helper()
	return testproc.Start(t, exec.Command(Binary(t, "./cmd/classifierd"), args...))
}

// WaitServing waits until a health check over conn answers SERVING,
// failing t when the daemon exits first or timeout passes.
func WaitServing(t testing.TB, p *testproc.Proc, conn *grpc.ClientConn, timeout time.Duration) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	p.WaitReady(t, "classifierd", timeout, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health %v", resp.GetStatus())
		}
		return err
	})
}

// WaitListening waits until addr takes TCP connections, failing t when
// the process exits first or timeout passes.
func WaitListening(t testing.TB, p *testproc.Proc, addr string, timeout time.Duration) {
	t.Helper()
	p.WaitReady(t, "classifierd", timeout, 100*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}
