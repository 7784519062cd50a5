package classify

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/internal/testrank"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

func newTestClassifier(t testing.TB, emb rank.Embedder) *Classifier {
	t.Helper()
	rk := testrank.Ranker(t, testindex.Parse(t, testindex.Catalog), 256, emb)
	return New(rk, testindex.Calibration(), Config{})
}

func f32(v float32) *float32 { return &v }

func TestClassify(t *testing.T) {
	c := newTestClassifier(t, nil)
	ctx := context.Background()
	cases := []struct {
		text     string
		want     string // "" means abstain
		evidence string
	}{
		{"check my github notifications", "github", "nearest example"},
		{"read the config json file", "filesystem", "nearest"},
		{"move ticket PROJ-123 to done", "jira", "pattern matched \"PROJ-123\""},
		{"bake a chocolate cake", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			res, err := c.Classify(ctx, tc.text, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !res.Abstained || len(res.Categories) != 0 || !strings.HasPrefix(res.Reasoning, "abstained") {
					t.Fatalf("got %+v, want abstain", res)
				}
				return
			}
			if res.Abstained || res.Categories[0].ID != tc.want {
				t.Fatalf("got %+v, want %s first", res, tc.want)
			}
			if !strings.Contains(res.Categories[0].Evidence, tc.evidence) || !strings.HasPrefix(res.Reasoning, tc.want) {
				t.Fatalf("evidence %q / reasoning %q, want %q", res.Categories[0].Evidence, res.Reasoning, tc.evidence)
			}
			var sum float64
			for _, s := range res.Categories {
				sum += s.Confidence
			}
			if sum > 1+1e-9 {
				t.Fatalf("single-label confidences sum to %v > 1", sum)
			}
		})
	}
	t.Run("deterministic reasoning", func(t *testing.T) {
		a, _ := c.Classify(ctx, "list open pull requests", 3, nil)
		b, _ := c.Classify(ctx, "list open pull requests", 3, nil)
		if a.Reasoning != b.Reasoning {
			t.Fatalf("%q != %q", a.Reasoning, b.Reasoning)
		}
	})
	t.Run("min_confidence 0 returns top_k", func(t *testing.T) {
		res, err := c.Classify(ctx, "bake a chocolate cake", 2, f32(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Categories) != 2 || res.Abstained {
			t.Fatalf("got %+v, want 2 categories", res)
		}
	})
}

func TestClassifyBadInput(t *testing.T) {
	c := newTestClassifier(t, nil)
	ctx := context.Background()
	cases := []struct {
		name string
		text string
		k    int
		mc   *float32
		want error
	}{
		{"empty", "", 0, nil, request.ErrEmptyText},
		{"blank", " \t\n", 0, nil, request.ErrEmptyText},
		{"too long", strings.Repeat("x", request.DefaultMaxTextBytes+1), 0, nil, request.ErrTextTooLong},
		{"negative k", "hi", -1, nil, request.ErrBadArgument},
		{"huge k", "hi", 101, nil, request.ErrBadArgument},
		{"confidence above 1", "hi", 0, f32(1.5), request.ErrBadArgument},
		{"confidence NaN", "hi", 0, f32(float32(math.NaN())), request.ErrBadArgument},
		{"bad utf8", "\xff", 0, nil, request.ErrBadArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Classify(ctx, tc.text, tc.k, tc.mc)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
