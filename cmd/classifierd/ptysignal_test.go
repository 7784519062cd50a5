package main

import (
	"context"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/testpty"
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
			ptmx, screen := testpty.Run(t, tc.command, tc.marker)
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
