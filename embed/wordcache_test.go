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
