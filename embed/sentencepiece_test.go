package embed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeUnigram writes a tokenizer.json with only a Unigram model.
func writeUnigram(t *testing.T, vocab [][2]any, unk int) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"model": map[string]any{"type": "Unigram", "unk_id": unk, "vocab": vocab}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSentencePieceViterbi: the best segmentation by the pieces' scores
// alone (no length bonus), pieces longer than 20 bytes found, and one unk
// per run of unknown characters.
func TestSentencePieceViterbi(t *testing.T) {
	long := "▁বৃষ্টি" // 21 bytes: the tokenizer library never tried it
	sp, err := readSentencePiece(writeUnigram(t, [][2]any{
		{"<unk>", 0.0}, {"▁", -2.0}, {"a", -3.0}, {"b", -3.0}, {"ab", -7.0}, {"▁ab", -5.5},
		{long, -14.0}, {"▁বৃ", -9.0}, {"ষ্ট", -5.0}, {"ি", -4.0},
	}, 0))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in   string
		want []int
	}{
		// "ab" (-7) loses to "a"+"b" (-6); a length bonus of 0.1 a byte
		// would not change that, but "▁ab" (-5.5) beats "▁"+"a"+"b" (-8).
		{"ab", []int{2, 3}},
		{"▁ab", []int{5}},
		{long, []int{6}}, // -14 beats -9-5-4 = -18
		{"▁ax", []int{1, 2, 0}},
		{"xy", []int{0}}, // fused, as SentencePiece does
		{"xay", []int{0, 2, 0}},
		{"", nil},
	}
	for _, tc := range cases {
		toks, err := sp.Tokenize(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		var text string
		for _, tk := range toks {
			got = append(got, tk.Id)
			text += tc.in[tk.Offsets[0]:tk.Offsets[1]]
		}
		if !slices.Equal(got, tc.want) || text != tc.in {
			t.Errorf("Tokenize(%q) = %v covering %q, want %v", tc.in, got, text, tc.want)
		}
	}
	if _, err := readSentencePiece(writeUnigram(t, [][2]any{{"a", 0.0}}, 3)); err == nil {
		t.Error("an unk_id past the vocabulary should fail")
	}
}

// readSentencePiece reads the Unigram model of the tokenizer.json at path,
// as Open does.
func readSentencePiece(path string) (*sentencePiece, error) {
	f, err := readTokenizerFile(path)
	if err != nil {
		return nil, err
	}
	return parseSentencePiece(f.Model)
}
