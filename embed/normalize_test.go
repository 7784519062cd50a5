package embed

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSequenceNormalizer: the normaliser tools/modelconv writes for
// multilingual-e5-small (replacements, NFKC, runs of spaces collapsed) as
// the engine applies it, and the forms it leaves to the library.
func TestSequenceNormalizer(t *testing.T) {
	write := func(t *testing.T, js string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(p, []byte(js), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seq := write(t, `{"normalizer": {"type": "Sequence", "normalizers": [
		{"type": "Replace", "pattern": {"String": "\u0001"}, "content": ""},
		{"type": "Replace", "pattern": {"String": "\u200c"}, "content": " "},
		{"type": "Replace", "pattern": {"String": "\t"}, "content": " "},
		{"type": "NFKC"},
		{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}}`)
	n, err := readSequenceNormalizer(seq)
	if err != nil || n == nil {
		t.Fatalf("readSequenceNormalizer: %v, %v", n, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"می\u200cخواهم", "می خواهم"},  // zero-width non-joiner: a space
		{"a\u0001b", "ab"},             // control character dropped
		{"ＡＢＣ１２３ ｶﾀｶﾅ", "ABC123 カタカナ"}, // NFKC
		{"a\t \tb", "a b"},             // spaces collapsed after the replacements
		{"cafe\u0301", "café"},         // NFKC composes
	} {
		if got := n.apply(tc.in); got != tc.want {
			t.Errorf("apply(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for name, js := range map[string]string{
		"plain NFKC":    `{"normalizer": {"type": "NFKC"}}`,
		"other step":    `{"normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"}]}}`,
		"no normaliser": `{"normalizer": null}`,
	} {
		if n, err := readSequenceNormalizer(write(t, js)); err != nil || n != nil {
			t.Errorf("%s: got %v, %v; want the library's normaliser (nil, nil)", name, n, err)
		}
	}
	if _, err := readSequenceNormalizer(write(t, `{"normalizer": {"type": "Sequence", "normalizers": [
		{"type": "Replace", "pattern": {"Regex": "("}, "content": ""}]}}`)); err == nil {
		t.Error("a bad regex should fail to load")
	}
}

// readSequenceNormalizer reads the normaliser of the tokenizer.json at
// path, as Open does.
func readSequenceNormalizer(path string) (*textNormalizer, error) {
	f, err := readTokenizerFile(path)
	if err != nil {
		return nil, err
	}
	return parseSequenceNormalizer(f.Normalizer)
}
