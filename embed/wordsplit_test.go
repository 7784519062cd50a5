package embed

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wholeTextTokens is what the tokenizer gives for the whole normalised
// text, truncated to the cap: the reference for the word-cache fast path.
func wholeTextTokens(t testing.TB, e *Engine, text string) []int64 {
	t.Helper()
	// The engine hands the tokenizer valid UTF-8 only (each run of
	// invalid bytes one U+FFFD), on both of its paths.
	want, err := e.tokenize(e.man.NormalizeText(strings.ToValidUTF8(text, "\uFFFD")))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) > e.man.MaxTokens {
		if e.man.AddSpecialTokens {
			// encode keeps the closing special token ([SEP]) last.
			return append(want[:e.man.MaxTokens-1], want[len(want)-1])
		}
		want = want[:e.man.MaxTokens]
	}
	return want
}

// TestWordCacheMatchesWholeText checks the word-by-word tokenisation fast
// path gives exactly the ids of tokenising the whole text, on thousands of
// real utterances (the Banking77 and MetaTool development sets, and texts
// of 60 to 400 words joined from them, past the token cap), with
// use-lite-en (SentencePiece, no special tokens) and the default model
// (BERT word pieces between [CLS] and [SEP]).
func TestWordCacheMatchesWholeText(t *testing.T) {
	var texts []string
	for _, f := range []string{"banking77.json", "metatool.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "shared", "datasets", f))
		if err != nil {
			t.Fatal(err)
		}
		var ds struct {
			Test    []struct{ Text string } `json:"test"`
			Queries []struct{ Text string } `json:"queries"`
		}
		if err := json.Unmarshal(raw, &ds); err != nil {
			t.Fatal(err)
		}
		for _, q := range ds.Test {
			texts = append(texts, q.Text)
		}
		for i, q := range ds.Queries {
			if i%5 == 0 {
				texts = append(texts, q.Text)
			}
		}
	}
	var joined []string
	for i, n := 0, 5; i+n <= len(texts) && n <= 40; i, n = i+n, n+5 {
		joined = append(joined, strings.Join(texts[i:i+n], " "))
	}
	direct, _ := defaultEngines(t)
	for name, e := range map[string]*Engine{"use-lite-en": realEngine(t), "default": direct} {
		t.Run(name, func(t *testing.T) {
			if !e.wordSplit {
				t.Fatal("the model should be word-separable: the fast path is off")
			}
			step, minChecked := 1, 5000
			if raceEnabled {
				step, minChecked = 10, 500
			}
			var sample []string
			for i := 0; i < len(texts); i += step {
				sample = append(sample, texts[i])
			}
			checked, long := 0, 0
			for _, text := range slices.Concat(sample, joined, trickyASCII) {
				norm := e.man.NormalizeText(text)
				if IsBlank(norm) || !isASCII(norm) {
					continue
				}
				got, err := e.Tokens(text)
				if err != nil {
					t.Fatal(err)
				}
				want := wholeTextTokens(t, e, text)
				if !slices.Equal(got, want) {
					t.Fatalf("text %q: word path %v, whole text %v", text, got, want)
				}
				if len(got) == e.man.MaxTokens {
					long++
				}
				checked++
			}
			if checked < minChecked || long == 0 {
				t.Fatalf("checked %d texts (%d at the token cap), want at least %d and one at the cap", checked, long, minChecked)
			}
			// And the embedding is the one the whole-text path gives.
			v1, err := e.Embed(context.Background(), []string{texts[0]})
			if err != nil {
				t.Fatal(err)
			}
			v2, err := e.Infer(context.Background(), [][]int64{wholeTextTokens(t, e, texts[0])})
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(v1[0], v2[0]); d > 1e-6 {
				t.Fatalf("word path embedding: got max diff %g from the whole-text one", d)
			}
		})
	}
}

// trickyASCII are texts where a word path could part from the tokenizer:
// special tokens written in the text, a word past WordPiece's 100
// characters, runs of punctuation, control characters, digits.
var trickyASCII = []string{
	"[CLS] hello [SEP] world [MASK] [PAD] [UNK]", "x[SEP]y and[CLS]", strings.Repeat("a", 120) + " b " + strings.Repeat("xy", 60),
	"!!!??? ... --- *** ((a)) [b] {c} <d> @#$%^&", "a\x1cb c", "x\x00y\ty", "1,250.00 + 3.5e-7 = 0x1F", "  leading and trailing  ",
	"read config.json and push it, then open PR #42!", "e-mail@host.tld 'quoted' \"words\" snake_case_names C:\\Users\\bob",
	strings.Repeat("word ", 300),
}

// FuzzWordCache: for any text, the ids the engine uses (word cache for
// ASCII, whole text otherwise) are the tokenizer's ids for the whole text.
func FuzzWordCache(f *testing.F) {
	for _, s := range []string{
		"Check my GitHub notifications", "read config.json and push it, then open PR #42!",
		"a\x1cb c", "x\x00y", "C:\\Users\\bob", "snake_case_names", "'quoted' \"words\"", "e-mail@host.tld",
		"café ½", "ǆ", "[CLS] x [sep]", "<s>a</s>", "\xff\xfe", strings.Repeat("word ", 200),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := realEngine(t)
		got, err := e.Tokens(s)
		if IsBlank(e.man.NormalizeText(s)) {
			return
		}
		if err != nil {
			t.Fatalf("Tokens(%q): %v", s, err)
		}
		if want := wholeTextTokens(t, e, s); !slices.Equal(got, want) {
			t.Fatalf("Tokens(%q): got %v, want the whole-text ids %v", s, got, want)
		}
	})
}
