package rank

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPieces(t *testing.T) {
	cases := []struct {
		name, s    string
		n          int
		head, tail string
	}{
		{"short", "a b c", 5, "a b c", "a b c"},
		{"cut between words", "one two three four", 10, "one two", "four"},
		{"white space", "one  two\tthree\nfour", 12, "one  two", "three\nfour"},
		{"runes", "héllo wörld ☕ täil", 14, "héllo wörld", "☕ täil"},
		{"one long word", "ééééé", 5, "éé", "éé"},
		{"empty", "", 3, "", ""},
		{"padded", strings.Repeat(" ", 5000) + "list my pull requests" + strings.Repeat("\n ", 3000), 16, "list my pull", "pull requests"},
		{"blank", strings.Repeat(" \t", 3000), 16, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := head(tc.s, tc.n); got != tc.head {
				t.Errorf("head = %q, want %q", got, tc.head)
			}
			if got := tail(tc.s, tc.n); got != tc.tail {
				t.Errorf("tail = %q, want %q", got, tc.tail)
			}
		})
	}
}

func TestPatternTextKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", LongTextBytes) // 2 bytes each
	got := patternText(s)
	if !utf8.ValidString(got) || len(got) > 2*PatternWindow+1 || !strings.HasPrefix(s, got[:PatternWindow-1]) {
		t.Fatalf("patternText: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if short := "PROJ-12 x"; patternText(short) != short {
		t.Fatal("a short text must be matched whole")
	}
}

func TestNeedsOfLongPrompt(t *testing.T) {
	log := strings.Repeat("2026-11-23T10:00:01Z INFO worker processed batch 1234 in 35ms; queue depth 7, then idle.\n", 3000)
	q := "Post this summary in the #ops channel on Slack. Then open a ticket in Jira for it"
	ts := Needs(log + q)
	if len(ts) > 2+maxNeeds {
		t.Fatalf("%d turns, want at most %d", len(ts), 2+maxNeeds)
	}
	if ts[0].Text != log+q || embedText(ts[0].Text) != head(log, PieceBytes) {
		t.Fatal("first turn must be the whole prompt, embedded by its head")
	}
	if !strings.HasSuffix(ts[1].Text, q) || len(ts[1].Text) > PieceBytes || ts[1].Part {
		t.Fatalf("second turn %q is not the tail", ts[1].Text[:40])
	}
	var parts []string
	for _, tt := range ts[2:] {
		parts = append(parts, tt.Text)
	}
	if len(parts) < 2 || !strings.Contains(parts[len(parts)-1], "Jira") {
		t.Fatalf("needs %q, want the tail's requests among them", parts)
	}
	if short := Needs(q); len(short) != 3 || short[0].Text != q {
		t.Fatalf("a short prompt: %d turns, want the prompt and its two needs", len(short))
	}
}
