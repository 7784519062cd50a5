package indexbuild

import (
	"context"
	"slices"
	"testing"
)

// countingEmbedder embeds a text as its length and records what it was asked.
type countingEmbedder struct{ asked []string }

func (e *countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.asked = append(e.asked, texts...)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{float32(len(t))}
	}
	return out, nil
}

func TestCacheEmbedsOnlyNewTexts(t *testing.T) {
	emb := &countingEmbedder{}
	c := NewCache(emb, "model-a")
	ctx := context.Background()
	if _, err := c.Embed(ctx, []string{"alpha", "beta"}); err != nil {
		t.Fatal(err)
	}
	if h, m := c.Prune(); h != 0 || m != 2 {
		t.Errorf("first build: hits %d misses %d, want 0 and 2", h, m)
	}
	got, err := c.Embed(ctx, []string{"beta", "gamma!", "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha", "beta", "gamma!"}; !slices.Equal(emb.asked, want) {
		t.Errorf("embedder asked %v, want %v", emb.asked, want)
	}
	if got[0][0] != 4 || got[1][0] != 6 || got[2][0] != 4 {
		t.Errorf("vectors %v, want lengths 4, 6, 4", got)
	}
	// alpha was not used by the second build: pruned.
	c.Prune()
	if c.Len() != 2 {
		t.Errorf("after prune %d vectors, want 2 (beta, gamma!)", c.Len())
	}
	// Another model never shares vectors.
	other := NewCache(emb, "model-b")
	other.vecs = c.vecs
	if _, err := other.Embed(ctx, []string{"beta"}); err != nil {
		t.Fatal(err)
	}
	if emb.asked[len(emb.asked)-1] != "beta" {
		t.Errorf("a vector of model-a was reused for model-b")
	}
}
