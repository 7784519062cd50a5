package embed

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

// defaultEngines opens the default (BERT-family, mean-pooled) model twice:
// directly and behind the micro-batching queue, as the daemon runs it.
func defaultEngines(t *testing.T) (direct, queued *Engine) {
	t.Helper()
	dir := testenv.ModelDir()
	man, err := models.ReadManifest(dir)
	if err != nil {
		t.Fatalf("%v\nrun `make model` to build the default model", err)
	}
	rt := testRuntime(t)
	for _, cfg := range []Config{{ModelDir: dir, Manifest: man}, {ModelDir: dir, Manifest: man, MaxQueue: 64, BatchWindow: time.Millisecond, MaxConcurrent: 2}} {
		e, err := Open(rt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		if direct == nil {
			direct = e
		} else {
			queued = e
		}
	}
	return direct, queued
}

func spanOf(text, sub string) [2]int {
	i := strings.Index(text, sub)
	return [2]int{i, i + len(sub)}
}

// TestEmbedSpans: the text's vector is bit for bit the vector Embed gives
// it; each span's tokens are the span's own; a span's pooled vector is
// near the vector of the span embedded alone, and nearer it than the
// other span's; a span past max_tokens has none.
func TestEmbedSpans(t *testing.T) {
	direct, queued := defaultEngines(t)
	ctx := context.Background()
	text := "Check my GitHub notifications and save the list as Markdown to /root/notes/report.md"
	a, b := "Check my GitHub notifications", "save the list as Markdown to /root/notes/report.md"
	spans := [][2]int{spanOf(text, b), spanOf(text, a)} // out of order on purpose
	for name, e := range map[string]*Engine{"direct": direct, "queued": queued} {
		t.Run(name, func(t *testing.T) {
			whole, parts, err := e.EmbedSpans(ctx, text, spans)
			if err != nil {
				t.Fatal(err)
			}
			want, err := direct.Embed(ctx, []string{text})
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(whole, want[0]); d != 0 {
				t.Errorf("whole vector differs from Embed's by %g", d)
			}
			alone, err := direct.Embed(ctx, []string{b, a})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range parts {
				if p == nil {
					t.Fatalf("span %d: no vector", i)
				}
				if n := dot(p, p); math.Abs(n-1) > 1e-4 {
					t.Errorf("span %d: squared norm %v, want 1", i, n)
				}
				own, other := dot(p, alone[i]), dot(p, alone[1-i])
				t.Logf("span %d: cosine to its text alone %.3f, to the other span %.3f", i, own, other)
				if own < 0.6 || own <= other {
					t.Errorf("span %d: cosine to its text alone %.3f, to the other span's %.3f: want >= 0.6 and higher", i, own, other)
				}
			}
		})
	}
	t.Run("tokens of each span", func(t *testing.T) {
		ids, _, err := direct.encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		got := direct.tokenSpans(text, spans, ids)
		for i, s := range []string{b, a} {
			want, err := direct.rawTokens(s)
			if err != nil {
				t.Fatal(err)
			}
			if r := got[i]; !slices.Equal(ids[r[0]:r[1]], want) {
				t.Errorf("span %q: tokens %v, want %v", s, ids[r[0]:r[1]], want)
			}
		}
	})
	t.Run("a span past max_tokens has no vector", func(t *testing.T) {
		long := strings.Repeat("word ", 400) + "and finally send the summary by email"
		_, parts, err := direct.EmbedSpans(ctx, long, [][2]int{spanOf(long, "finally send the summary by email"), {0, 9}})
		if err != nil {
			t.Fatal(err)
		}
		if parts[0] != nil || parts[1] == nil {
			t.Errorf("got vectors %v, %v: want none past max_tokens, one for the first words", parts[0] != nil, parts[1] != nil)
		}
	})
	t.Run("overlapping spans are embedded alone", func(t *testing.T) {
		_, parts, err := direct.EmbedSpans(ctx, text, [][2]int{{0, 20}, {10, 30}})
		if err != nil {
			t.Fatal(err)
		}
		if parts[0] != nil || parts[1] != nil {
			t.Error("overlapping spans got pooled vectors")
		}
	})
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
