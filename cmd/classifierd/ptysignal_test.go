package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	pb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/terminal/ptysignal"
)

// TestPtySignalsThroughTheDaemon is the hub's side of issue 14's quiet
// waiters and wording-free secrets, with real parts: real programs on a
// real pty, their signals read from the kernel by ptysignal, and the
// screen and signals sent to the real daemon over gRPC.
func TestPtySignalsThroughTheDaemon(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	_, conn := startDaemon(t, idx, "--terminal")
	c := pb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cases := []struct {
		name, command, marker string
		typ                   string
	}{
		// dc prints nothing and waits: the screen alone says "not waiting".
		{"dc waits in silence", "exec dc", "", ""},
		// A secret prompt worded like nothing secret, read with echo off.
		{"getpass without the word", "read -s -p 'Enter the value: ' x", "Enter the value: ", "password"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ptmx, screen := runOnPty(t, tc.command, tc.marker)
			var sig ptysignal.Signals
			for deadline := time.Now().Add(5 * time.Second); ; {
				var err error
				if sig, err = ptysignal.Read(ptmx); err != nil {
					t.Fatal(err)
				}
				if sig.ReadingInput || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !sig.ReadingInput {
				t.Fatalf("%s should be blocked reading the terminal: %+v", tc.command, sig)
			}
			text := screen()
			without, err := c.DetectInputPrompt(ctx, &pb.DetectInputPromptRequest{Text: text})
			if err != nil {
				t.Fatal(err)
			}
			with, err := c.DetectInputPrompt(ctx, &pb.DetectInputPromptRequest{Text: text,
				ReadingInput: &sig.ReadingInput, EchoOff: &sig.EchoOff, CanonicalMode: &sig.Canonical})
			if err != nil {
				t.Fatal(err)
			}
			if !with.GetDetected() || with.GetPrompt().GetPromptType() != tc.typ && tc.typ != "" {
				t.Fatalf("with the pty's signals: got %v, want detected (type %q)", with, tc.typ)
			}
			if tc.typ == "" && without.GetDetected() {
				t.Errorf("the screen alone (%q) should not show a prompt, got %v", text, without)
			}
			t.Logf("screen %q: alone %v (%s), with signals %s at %.2f", text, without.GetDetected(),
				without.GetPrompt().GetPromptType(), with.GetPrompt().GetPromptType(), with.GetPrompt().GetConfidence())
		})
	}

	// Whether the program reads decides a doubtful last line: a count
	// printed by ed is waiting when ed reads, finished output when not.
	yes, no := true, false
	for _, tc := range []struct {
		reading *bool
		want    bool
	}{{&yes, true}, {&no, false}, {nil, false}} {
		r, err := c.DetectInputPrompt(ctx, &pb.DetectInputPromptRequest{Text: "6\n", ReadingInput: tc.reading})
		if err != nil || r.GetDetected() != tc.want {
			t.Errorf("reading_input %v: got %v, %v, want detected %v", tc.reading, r, err, tc.want)
		}
	}
}

// runOnPty starts command under bash on a new pty, waits for marker in its
// output, and returns the master and a function giving the output so far.
func runOnPty(t *testing.T, command, marker string) (*os.File, func() string) {
	t.Helper()
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
