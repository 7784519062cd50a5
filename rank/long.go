package rank

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Long texts (a pasted log or file with a question) are bounded in what
// each signal costs:
//   - the model embeds at most the head of a text: about its first
//     PieceBytes bytes, cut between words, when the text is over
//     LongTextBytes. Pieces are bounded in bytes, not words: a log line's
//     timestamps and ids take several tokens a word, and a model run costs
//     by tokens (with all-MiniLM-L6-v2, 200 words of log reach its 256-token
//     cap and Route on a 20 KB prompt took 86 ms; 48 words, 38 ms);
//   - Needs adds the tail, about the last PieceBytes bytes, as a turn of its
//     own (where the question after a paste usually is), scored with the
//     head by max pooling, and splits only the tail into needs;
//   - keywords, names and BM25 see the whole text: each is linear in its
//     length (strings.Index per needle; BM25 stems each distinct word once);
//   - patterns (RE2, linear but slow per byte: tens of MB/s for patterns
//     without a literal prefix) see PatternWindow bytes of the head and of
//     the tail, each pattern once per turn.
//
// So a message costs at most 2 + maxNeeds model runs, whatever its length.
const (
	LongTextBytes = 4096
	PieceBytes    = 256
	PatternWindow = 1 << 10
)

// isLong reports whether s is embedded as pieces.
func isLong(s string) bool { return len(s) > LongTextBytes }

// embedText is what of s the model reads.
func embedText(s string) string {
	if !isLong(s) {
		return s
	}
	return head(s, PieceBytes)
}

// head returns at most n bytes from the start of s, cut after its last
// whole word (or on a rune boundary when the first word is longer). White
// space before the first word is not counted: a piece of a text that has
// words is never blank (a Route whose query was padded with 5,000 spaces
// before its words was refused "empty text": its head piece was spaces).
func head(s string, n int) string {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if i := strings.LastIndexFunc(s[:cut], unicode.IsSpace); i > 0 {
		cut = i
	}
	return strings.TrimRightFunc(s[:cut], unicode.IsSpace)
}

// tail returns at most n bytes from the end of s, starting at its first
// whole word (or on a rune boundary when the last word is longer); white
// space after the last word is not counted (head).
func tail(s string, n int) string {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	if i := strings.IndexFunc(s[start:], unicode.IsSpace); i >= 0 && start+i < len(s)-1 {
		start += i
	}
	return strings.TrimLeftFunc(s[start:], unicode.IsSpace)
}

// patternText is what of s patterns are matched against: all of it, or
// for a long text PatternWindow bytes from each end, cut on rune
// boundaries.
func patternText(s string) string {
	if !isLong(s) {
		return s
	}
	head := s[:PatternWindow]
	for len(head) > 0 && !utf8.RuneStart(s[len(head)]) {
		head = head[:len(head)-1]
	}
	start := len(s) - PatternWindow
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return head + "\n" + s[start:]
}
