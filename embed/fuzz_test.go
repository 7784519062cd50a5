package embed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzEmbed feeds arbitrary request text to both model shapes: the engine
// must never panic or crash inside ONNX Runtime, blank text must fail with
// ErrEmptyText, and anything else must give a finite unit vector from at
// most max_tokens tokens.
func FuzzEmbed(f *testing.F) {
	for _, s := range []string{
		"", " ", "\t\n", "hello", "Check my GitHub notifications", "\x00", "\u200b", "\ufeff",
		"\xff\xfe\xfd", "ǆ", "jvkpǆ", "e\u0301", "😀", "[CLS] [SEP] [PAD]", "##ing", "▁", "\u2028",
		strings.Repeat("a ", 300), strings.Repeat("ǆ", 200), strings.Repeat("\x00 ", 50),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		engines := []*Engine{realEngine(t), sharedBert(t)}
		for _, e := range engines {
			name := e.Manifest().Name
			v, err := e.Embed(context.Background(), []string{s})
			if IsBlank(s) {
				if !errors.Is(err, ErrEmptyText) {
					t.Fatalf("%s: blank %q: got %v, want ErrEmptyText", name, s, err)
				}
				continue
			}
			if errors.Is(err, ErrEmptyText) {
				continue // e.g. text the tokenizer drops entirely
			}
			if err != nil {
				t.Fatalf("%s: Embed(%q): %v", name, s, err)
			}
			checkUnit(t, fmt.Sprintf("%s: %q", name, s), v[0], e.Dims())
			ids, err := e.Tokens(s)
			if err != nil || len(ids) == 0 || len(ids) > e.Manifest().MaxTokens {
				t.Fatalf("%s: Tokens(%q): got %d ids, %v; want 1..%d", name, s, len(ids), err, e.Manifest().MaxTokens)
			}
		}
	})
}
