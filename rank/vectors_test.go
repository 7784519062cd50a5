package rank

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/classifierd/classifierd/internal/testindex"
)

// TestClausesSpans: every clause of a short prompt carries the byte span
// it was cut from, so its vector can be pooled from the prompt's run; a
// long prompt's clauses (cut from its tail) carry none.
func TestClausesSpans(t *testing.T) {
	for _, prompt := range []string{
		"Check my GitHub notifications and save the list as Markdown to /root/notes/report.md",
		"Find the weather in Paris for next Wednesday. Then email the forecast to anna@example.com and add it to my calendar",
		"Steps:\n1. fetch https://example.com/page and read it\n2. compute the average of the numbers you find there\n- finally write the result to out.txt",
		"After that, open the settings page and click the save button. Finally, tell me her BMI",
	} {
		ts := Clauses(prompt)
		parts := 0
		for _, tc := range ts[1:] {
			if !tc.Part {
				continue
			}
			parts++
			if tc.Span == ([2]int{}) {
				t.Errorf("%q: clause %q has no span", prompt, tc.Text)
				continue
			}
			if got := prompt[tc.Span[0]:tc.Span[1]]; got != tc.Text {
				t.Errorf("%q: span %v is %q, clause is %q", prompt, tc.Span, got, tc.Text)
			}
		}
		if parts < 2 {
			t.Errorf("%q: %d clauses, want at least 2", prompt, parts)
		}
	}
	long := strings.Repeat("Some background about the project that goes on. ", 100) + "Now list my open issues and then save them to issues.md in the repo"
	for _, tc := range Clauses(long) {
		if tc.Span != ([2]int{}) {
			t.Errorf("long prompt: clause %q has span %v; want none (its tail is embedded alone)", tc.Text, tc.Span)
		}
	}
}

// countingEmbedder is testindex.Embedder that counts the texts it embeds
// and, as a SpanEmbedder, pools each span as the span's own text would
// embed, except spans it is told to leave unpooled.
type countingEmbedder struct {
	testindex.Embedder
	mu       sync.Mutex
	texts    []string
	spanRuns int
	unpooled map[string]bool
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	c.texts = append(c.texts, texts...)
	c.mu.Unlock()
	return c.Embedder.Embed(ctx, texts)
}

func (c *countingEmbedder) EmbedSpans(ctx context.Context, text string, spans [][2]int) ([]float32, [][]float32, error) {
	c.mu.Lock()
	c.spanRuns++
	c.mu.Unlock()
	all := []string{text}
	for _, sp := range spans {
		all = append(all, text[sp[0]:sp[1]])
	}
	vs, err := c.Embedder.Embed(ctx, all)
	if err != nil {
		return nil, nil, err
	}
	parts := vs[1:]
	for i, sp := range spans {
		if c.unpooled[text[sp[0]:sp[1]]] {
			parts[i] = nil
		}
	}
	return vs[0], parts, nil
}

func (c *countingEmbedder) embedded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.texts...)
}

// TestVectorsPoolsClauses: with a SpanEmbedder, a request and its clauses
// cost one span run; only texts that are not spans (cues) and spans the
// embedder could not pool are embedded alone, and every turn gets the
// vector its own text has.
func TestVectorsPoolsClauses(t *testing.T) {
	prompt := "Check my GitHub notifications and save the list as Markdown to /root/notes/report.md"
	ts := append(Clauses(prompt), Cues(prompt)...)
	if len(ts) < 4 {
		t.Fatalf("%d turns, want the prompt, two clauses and a cue", len(ts))
	}
	var spanTexts []string
	for _, tc := range ts {
		if tc.Span != ([2]int{}) {
			spanTexts = append(spanTexts, tc.Text)
		}
	}
	emb := &countingEmbedder{Embedder: testindex.Embedder{Dims: 64}, unpooled: map[string]bool{spanTexts[1]: true}}
	r, err := New(testindex.Build(t, testindex.Parse(t, testindex.Catalog), 64), emb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	emb.texts = nil // the index build's
	vecs, err := r.Vectors(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	if emb.spanRuns != 1 {
		t.Errorf("%d span runs, want 1", emb.spanRuns)
	}
	alone := map[string]bool{}
	for _, s := range emb.embedded() {
		alone[s] = true
	}
	for i, tc := range ts {
		want, _ := testindex.Embedder{Dims: 64}.Embed(context.Background(), []string{tc.Text})
		if fmt.Sprint(vecs[i]) != fmt.Sprint(want[0]) {
			t.Errorf("turn %d %q: not its text's vector", i, tc.Text)
		}
		pooled := i == 0 || (tc.Span != ([2]int{}) && !emb.unpooled[tc.Text])
		if alone[tc.Text] == pooled {
			t.Errorf("turn %d %q: embedded alone %v, want %v", i, tc.Text, alone[tc.Text], !pooled)
		}
	}
}

// TestVectorCache: a text is embedded once per scope; a cue's capability
// once for every scope; the least recently used vector goes first.
func TestVectorCache(t *testing.T) {
	emb := &countingEmbedder{Embedder: testindex.Embedder{Dims: 16}}
	c := NewVectorCache(emb, 3)
	alice := WithCacheScope(context.Background(), "alice")
	bob := WithCacheScope(context.Background(), "bob")
	cue := CueText(CueFileWrite)
	if cue == "" {
		t.Fatal("no file-write cue")
	}
	steps := []struct {
		ctx   context.Context
		texts []string
		fresh int // texts the wrapped embedder sees
	}{
		{alice, []string{"hello there", cue}, 2},
		{alice, []string{"hello there", cue}, 0},
		{bob, []string{"hello there", cue}, 1}, // bob's own "hello there"; the cue is shared
		{alice, []string{"second turn"}, 1},    // evicts the least recent: alice's "hello there"
		{bob, []string{"hello there"}, 0},
		{alice, []string{"hello there"}, 1},
	}
	for i, s := range steps {
		before := len(emb.embedded())
		got, err := c.Embed(s.ctx, s.texts)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(emb.embedded()) - before; n != s.fresh {
			t.Errorf("step %d: %d texts embedded, want %d", i, n, s.fresh)
		}
		want, _ := emb.Embedder.Embed(context.Background(), s.texts)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("step %d: cached vectors differ from the embedder's", i)
		}
	}
	if _, _, size := c.Stats(); size != 3 {
		t.Errorf("cache holds %d vectors, want its capacity 3", size)
	}
}
