package embed

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/classifierd/classifierd/embed/embederr"
)

// ErrEmptyText reports a text with no content after normalisation. Models
// such as use-lite-en crash inside ONNX Runtime on zero tokens, so empty text
// never reaches the model.
var ErrEmptyText = embederr.ErrEmptyText

// IsBlank reports whether s has no non-space character.
func IsBlank(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}

// bertCleanText does what BERT's clean_text normalisation does: it drops
// NUL, U+FFFD and control or format characters (keeping tab, newline and
// carriage return) and turns every other whitespace character into a space.
func bertCleanText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case r == 0 || r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf):
			return -1
		case unicode.IsSpace(r):
			return ' '
		}
		return r
	}, s)
}

// stripAccents does what BERT's strip_accents normalisation does: it
// decomposes the text (NFD) and drops the combining marks (Mn), so "café"
// becomes "cafe".
func stripAccents(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range norm.NFD.String(s) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// firstWords returns the prefix of s that holds its first n
// white-space-separated words. Every word gives the tokenizer at least one
// token, so the first n tokens of s are those of this prefix; and the
// tokenizer library's cost grows faster than linearly with the words it
// is given (about 2 s for 1,000 non-ASCII words against 20 ms for 128), so
// the engine never hands it more than the model will see.
func firstWords(s string, n int) string {
	if n <= 0 {
		return s
	}
	words, inWord := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			if words == n {
				return strings.TrimRightFunc(s[:i], unicode.IsSpace)
			}
			words++
		}
		inWord = !space
	}
	return s
}
