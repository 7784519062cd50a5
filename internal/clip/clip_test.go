package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"héllo", 2, "h…"}, // byte 2 is inside é
		{"日本語", 4, "日…"},
		{"日本語", 6, "日本…"},
		{"😀x", 3, "…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
	} {
		if got := String(tc.in, tc.n); got != tc.want {
			t.Errorf("String(%q, %d): got %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "a", "héllo wörld", "日本語テキスト", "😀😀😀"} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := String(s, n)
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
		body := strings.TrimSuffix(got, Ellipsis)
		if len(body) > n || !strings.HasPrefix(s, body) {
			t.Fatalf("String(%q, %d) = %q: not a prefix of at most n bytes", s, n, got)
		}
	})
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "def"},
		{"héllo", 4, "llo"}, // the 4th byte from the end is inside é
		{"日本語", 4, "語"},
		{"abc", 0, ""},
		{"abc", -1, ""},
	} {
		if got := Tail(tc.in, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d): got %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
