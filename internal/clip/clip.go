// Package clip shortens text for messages on a rune boundary, so a clipped
// string is valid UTF-8 whenever its input was: a cut inside a multi-byte
// character would make the string unsendable in a protobuf string field.
package clip

import "unicode/utf8"

// Ellipsis marks a clipped string.
const Ellipsis = "…"

// String returns s if it has at most n bytes; otherwise its longest prefix
// of at most n bytes that ends on a rune boundary, followed by Ellipsis.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Ellipsis
}

// Tail returns s if it has at most n bytes; otherwise its longest suffix of
// at most n bytes that starts on a rune boundary (no ellipsis: callers
// judge the end of a line, where a prompt is).
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - max(n, 0)
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return s[cut:]
}
