package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/terminal"
)

// TestCapturedPrompts runs prompt detection, wired to the real model as the
// daemon wires it, over every labelled capture of a real program. It lives
// here, not in terminal/, because its verdicts are the model's numbers;
// terminal's own tests use a fake Embedder.
// realDetector is the prompt detector on the real model, as the daemon
// wires it.
func realDetector(t testing.TB) *terminal.Detector {
	t.Helper()
	d, err := terminal.NewDetector(context.Background(), realEngine(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// realEngine is the default model as the daemon loads it, closed when t
// ends.
func realEngine(t testing.TB) *embed.Engine {
	t.Helper()
	dir := testenv.ModelDir()
	man, err := models.Resolve(dir, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, testenv.Hint)
	}
	rt, err := embed.InitRuntime(testenv.ORTLib())
	if err != nil {
		t.Fatalf("%v\n%s", err, testenv.Hint)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	eng, err := embed.Open(rt, embed.Config{ModelDir: dir, Manifest: man})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	})
	return eng
}

func TestCapturedPrompts(t *testing.T) {
	ctx := context.Background()
	d := realDetector(t)
	rep, cases, err := terminal.Evaluate(ctx, d, filepath.Join(testenv.RepoRoot(), "terminal", "testdata", "captured"), 0.70)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cases < 30 {
		t.Fatalf("only %d labelled captures", rep.Cases)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Got.Detected != c.Waiting {
				t.Fatalf("detected %v (%.2f, %s %q), want %v", c.Got.Detected, c.Got.Confidence, c.Got.MatchedPattern, c.Got.PromptText, c.Waiting)
			}
			if c.Waiting && (c.Got.Type != c.Label.Type || c.Got.Dangerous != c.Label.Dangerous) {
				t.Fatalf("type %s dangerous %v (%s), want %s %v", c.Got.Type, c.Got.Dangerous, c.Got.DangerReason, c.Label.Type, c.Label.Dangerous)
			}
		})
	}
	t.Logf("%+v", rep)
}

// TestHeldOutCorpus is the corpus evaluation of docs/terminal.md: each
// family is detected by a detector whose examples and danger model were
// learned only from the other families' captures. (Leave-program-out,
// 283 folds each choosing its danger model's prior, is terminal-eval's:
// under the race detector it would not fit the suite's time.)
// The floors are today's figures, rounded down: the test fails when
// detection gets worse on kinds of programs it has not seen.
func TestHeldOutCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("real-model corpus evaluation")
	}
	ctx := context.Background()
	d := realDetector(t)
	caps, err := terminal.LoadCaptures(filepath.Join(testenv.RepoRoot(), "terminal", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		run      func(context.Context, *terminal.Detector, []terminal.Capture, float64, terminal.Evidence) ([]terminal.CaseResult, error)
		evidence terminal.Evidence
		// floors: waiting F1, type accuracy, dangerous recall, and the
		// ceiling on the dangerous false-positive rate, over all captures.
		// Rounds four and five (135 captures of programs of the weak
		// families, labelled before any detector saw them) took type
		// accuracy from 0.891 to 0.875; typing prompts by the answer
		// they show took it to 0.947 (0.915 with the pty signals). The
		// floors follow the corpus, just under what it measures
		// (docs/terminal.md); the false-positive ceiling with the
		// command line is issue 24's 3% (2.6% measured, from 2.4%).
		f1, typeAcc, dangerRecall, dangerFP float64
	}{
		{"families held out, command line", terminal.LeaveFamilyOut, terminal.WithCommand, 0.95, 0.94, 0.95, 0.03},
		{"families held out, screen only", terminal.LeaveFamilyOut, terminal.ScreenOnly, 0.95, 0.94, 0.85, 0.015},
		{"families held out, pty signals", terminal.LeaveFamilyOut, terminal.WithPty, 0.99, 0.91, 0.95, 0.03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.run(ctx, d, caps, 0.70, tc.evidence)
			if err != nil {
				t.Fatal(err)
			}
			rep := terminal.Summarise(res)
			t.Logf("%+v", rep)
			if rep.F1 < tc.f1 || rep.TypeAccuracy < tc.typeAcc || rep.DangerousRecall < tc.dangerRecall || rep.DangerousFPRate > tc.dangerFP {
				t.Errorf("waiting F1 %.3f, type accuracy %.3f, dangerous recall %.3f, dangerous FP rate %.3f; want at least %.2f, %.2f, %.2f and at most %.3f",
					rep.F1, rep.TypeAccuracy, rep.DangerousRecall, rep.DangerousFPRate, tc.f1, tc.typeAcc, tc.dangerRecall, tc.dangerFP)
			}
		})
	}
}

// BenchmarkDetectRealModel10kLineLog is DetectInputPrompt's work on a
// 10,000-line log with the real model: read the tail, clean it, embed and
// classify the last line, judge danger (issue 14 item 7: at most 5 ms).
func BenchmarkDetectRealModel10kLineLog(b *testing.B) {
	d := realDetector(b)
	var buf bytes.Buffer
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&buf, "2026-01-01T10:00:%02d INFO step %d: processed 128 records in 3ms\n", i%60, i)
	}
	buf.WriteString("Do you want to continue? [Y/n] ")
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.log"), buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	logs := terminal.Logs{Dir: dir}
	h := terminal.Hints{CommandLine: "apt-get remove nano", Program: "apt-get"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tail, err := logs.ReadTail("s")
		if err != nil {
			b.Fatal(err)
		}
		if r, err := d.DetectWithHints(ctx, tail.Data, h, 0.7); err != nil || !r.Detected {
			b.Fatalf("%v %v", r, err)
		}
	}
}
