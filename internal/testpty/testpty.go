// Package testpty runs real programs on real pseudo-terminals for tests:
// the terminal signal reader's own tests and the daemon's end-to-end ones
// start programs the same way.
package testpty

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Run starts command under bash on a new pty with a small fixed
// environment, waits until its output contains marker (at once for an
// empty marker), and returns the master and a function giving the output
// so far. The output is read in the background, so the program never
// blocks on a full pty; the program is killed when the test ends.
func Run(t testing.TB, command, marker string) (*os.File, func() string) {
	t.Helper()
	// A program that is not installed would look like one that never
	// reads the terminal: say so instead (make test-programs).
	if m := execRE.FindStringSubmatch(command); m != nil && !installed(m[1]) {
		t.Fatalf("%s is not installed (in /usr/bin or /bin): run make test-programs", m[1])
	}
	cmd := exec.Command("bash", "-c", command)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TERM=dumb", "HOME=" + t.TempDir()}
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = ptmx.Close() })
	out := make(chan string, 1)
	out <- ""
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			s := <-out
			out <- s + string(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	screen := func() string { s := <-out; out <- s; return s }
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(screen(), marker); {
		if time.Now().After(deadline) {
			t.Fatalf("%q never printed %q (got %q)", command, marker, screen())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ptmx, screen
}

// execRE finds the program a test command hands the pty to.
var execRE = regexp.MustCompile(`\bexec ([a-z0-9]+)\b`)

// installed says whether name is an executable in Run's PATH.
func installed(name string) bool {
	for _, dir := range []string{"/usr/bin", "/bin"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
