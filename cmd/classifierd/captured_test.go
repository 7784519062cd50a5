package main

import (
	"context"
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
func TestCapturedPrompts(t *testing.T) {
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
	ctx := context.Background()
	d, err := terminal.NewDetector(ctx, eng)
	if err != nil {
		t.Fatal(err)
	}
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
