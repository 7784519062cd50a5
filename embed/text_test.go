package embed

import (
	"testing"
)

func TestIsBlank(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", true}, {" ", true}, {"\t\n\r\v\f", true}, {"\u00a0\u2003\u2028\u3000\u0085", true},
		{"a", false}, {" a ", false}, {"\x00", false}, {"\u200b", false},
	} {
		if got := IsBlank(tc.in); got != tc.want {
			t.Errorf("IsBlank(%q): got %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestBertCleanText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a\x00b\x01c", "abc"},
		{"\ufffdǆǆ", "ǆǆ"},
		{"zero\u200bwidth\ufeff", "zerowidth"},
		{"tab\there\nnew\u00a0nb", "tab here new nb"},
		{"é ü 中", "é ü 中"},
	} {
		if got := bertCleanText(tc.in); got != tc.want {
			t.Errorf("bertCleanText(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFirstWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a b c d", 2, "a b"},
		{"a b", 2, "a b"},
		{"  a\t b \n c", 2, "  a\t b"},
		{"one", 1, "one"},
		{"", 3, ""},
		{"a b c", 0, "a b c"},
		{"é 中 😀 x", 3, "é 中 😀"},
	} {
		if got := firstWords(tc.in, tc.n); got != tc.want {
			t.Errorf("firstWords(%q, %d): got %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
