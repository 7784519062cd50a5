package models

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestNormalizeText(t *testing.T) {
	for _, tc := range []struct {
		name string
		man  Manifest
		in   string
		want string
	}{
		{"nothing set", Manifest{}, "  A\tB  ", "  A\tB  "},
		{"collapse", Manifest{CollapseWhitespace: true}, "  a  b\t\nc  ", "a b c"},
		{"collapse unicode spaces", Manifest{CollapseWhitespace: true}, "a\u00a0\u2003b\u3000\u2028c", "a b c"},
		{"collapse blank", Manifest{CollapseWhitespace: true}, " \t\n ", ""},
		{"lowercase", Manifest{Lowercase: true}, "Check GitHub", "check github"},
		{"prefix after collapse", Manifest{CollapseWhitespace: true, Prefix: "query: "}, "  find  it ", "query: find it"},
		{"all", Manifest{CollapseWhitespace: true, Lowercase: true, Prefix: "query: "}, " Find\tIT ", "query: find it"},
		{"keeps other runes", Manifest{CollapseWhitespace: true}, "a\x00b\u200bc", "a\x00b\u200bc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.man.NormalizeText(tc.in); got != tc.want {
				t.Fatalf("NormalizeText(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzNormalizeText(f *testing.F) {
	for _, s := range []string{"", " a  b ", "\t\n", "héllo\u00a0wörld", "a\x00b", "\xff\xfe a", "a\u2028\u2029b", " \u0085x"} {
		f.Add(s)
	}
	m := &Manifest{CollapseWhitespace: true}
	f.Fuzz(func(t *testing.T, s string) {
		out := m.NormalizeText(s)
		if out != strings.TrimFunc(out, unicode.IsSpace) {
			t.Fatalf("%q -> %q: leading or trailing space", s, out)
		}
		prevSpace := false
		for _, r := range out {
			space := unicode.IsSpace(r)
			if space && r != ' ' {
				t.Fatalf("%q -> %q: whitespace %U left uncollapsed", s, out, r)
			}
			if space && prevSpace {
				t.Fatalf("%q -> %q: double space", s, out)
			}
			prevSpace = space
		}
		if again := m.NormalizeText(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, out, again)
		}
		if blank := strings.TrimFunc(s, unicode.IsSpace) == ""; (out == "") != blank {
			t.Fatalf("%q -> %q, but blank is %v", s, out, blank)
		}
		// Invalid UTF-8 comes out as U+FFFD; valid text keeps its words.
		if !utf8.ValidString(out) {
			t.Fatalf("%q -> %q: invalid UTF-8", s, out)
		}
		if utf8.ValidString(s) && strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ") != out {
			t.Fatalf("%q -> %q: words changed", s, out)
		}
	})
}
