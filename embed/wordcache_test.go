package embed

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestWordCacheBoundedInBytes: unique words (logs, hashes) must not grow
// the word cache past its byte bound, and very long words are not cached.
func TestWordCacheBoundedInBytes(t *testing.T) {
	e := useLiteEngine(t, Config{})
	if !e.wordSplit {
		t.Fatal("use-lite-en's tokenizer is not word-separable: the cache is not exercised")
	}
	const limit = 4096
	e.wordsMax = limit
	ctx := context.Background()
	peak := 0
	for i := range 200 {
		var words []string
		for j := range 8 {
			words = append(words, fmt.Sprintf("w%dx%d", i, j))
		}
		if _, err := e.Embed(ctx, []string{strings.Join(words, " ")}); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, e.wordCacheBytes())
	}
	if peak == 0 || peak > limit {
		t.Fatalf("word cache peaked at %d bytes, want 1..%d", peak, limit)
	}
	e.wordsMax = maxWordCacheBytes
	before := e.wordCacheBytes()
	long := strings.Repeat("z", maxCachedWordBytes+1)
	if _, err := e.Embed(ctx, []string{long}); err != nil {
		t.Fatal(err)
	}
	if got := e.wordCacheBytes(); got != before {
		t.Fatalf("a %d-byte word changed the cache from %d to %d bytes; long words are not cached", len(long), before, got)
	}
}

// TestUnigramCacheBounded: the Unigram tokenizer's own cache (kept by the
// library for 10 minutes) is dropped whole once the text tokenised passes
// the budget, and a fresh model tokenises exactly as the old one.
func TestUnigramCacheBounded(t *testing.T) {
	e := useLiteEngine(t, Config{})
	bm, ok := e.tok.GetModel().(*boundedModel)
	if !ok {
		t.Fatalf("use-lite-en's tokenizer model is %T, want the bounded Unigram wrapper", e.tok.GetModel())
	}
	bm.budget = 16 << 10
	ctx := context.Background()
	probe := []string{"Check my GitHub notifications, then list café menus"}
	before, err := e.Embed(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		var words []string
		for j := range 8 {
			words = append(words, fmt.Sprintf("uniq%dword%d", i, j))
		}
		if _, err := e.Embed(ctx, []string{strings.Join(words, " ")}); err != nil {
			t.Fatal(err)
		}
	}
	if bm.swaps.Load() == 0 {
		t.Fatalf("no model swap after 2,400 unique words with a %d-byte budget", bm.budget)
	}
	if used := bm.used.Load(); used > bm.budget+unigramCost(strings.Repeat("x", 256)) {
		t.Fatalf("%d bytes counted since the last swap, budget %d", used, bm.budget)
	}
	after, err := e.Embed(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(before[0], after[0]); d != 0 {
		t.Fatalf("embedding changed by %g after %d model swaps", d, bm.swaps.Load())
	}
}
