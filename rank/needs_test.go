package rank

import (
	"slices"
	"testing"
)

func TestNeedParts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"read config.json and push it to my repo", []string{"read config.json", "push it to my repo"}},
		{"I need the PDF guide. Can you also email it?", []string{"I need the PDF guide", "Can you", "email it?"}},
		{"how many users signed up last week? query the database", []string{"how many users signed up last week? query the database"}},
		{"news as well as stock prices", []string{"news", "stock prices"}},
		{"open v1.2 notes", []string{"open v1.2 notes"}},
	} {
		if got := needParts(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("needParts(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}
