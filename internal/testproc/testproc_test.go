package testproc

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestProc runs real processes: a ready one, one that exits with output,
// and reads their exits without taking them from others.
func TestProc(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ready, then killed at cleanup", func(t *testing.T) {
		p := Start(t, exec.Command(sh, "-c", "echo up >&2; exec sleep 60"))
		p.WaitReady(t, "sh", 10*time.Second, time.Millisecond, func() error {
			if !strings.Contains(p.Output.String(), "up") {
				return errors.New("no output yet")
			}
			return nil
		})
		if exited, _ := p.Exited(); exited {
			t.Fatal("sleeping process reported exited")
		}
		if exited, _ := p.WaitExit(10 * time.Millisecond); exited {
			t.Fatal("sleeping process exited within 10ms")
		}
	})
	t.Run("an exit stays readable", func(t *testing.T) {
		p := Start(t, exec.Command(sh, "-c", "echo bye >&2; exit 3"))
		exited, err := p.WaitExit(10 * time.Second)
		var ee *exec.ExitError
		if !exited || !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("WaitExit: exited=%v err=%v, want exit status 3", exited, err)
		}
		for range 2 {
			if exited, again := p.Exited(); !exited || fmt.Sprint(again) != fmt.Sprint(err) {
				t.Fatalf("Exited: %v %v, want true %v", exited, again, err)
			}
		}
		if got := p.Output.String(); got != "bye\n" {
			t.Fatalf("output %q, want %q", got, "bye\n")
		}
	})
}
