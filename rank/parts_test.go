package rank

import (
	"context"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/testindex"
)

// Parts says by kind what Evidence says in one sentence.
func TestPartsMatchEvidence(t *testing.T) {
	r := testRanker(t, testindex.Parse(t, testindex.Catalog), 256)
	for _, tc := range []struct {
		text, id  string
		wantKind  string // "pattern", "lexical" or "" (dense only)
		wantMatch string
	}{
		{"move PROJ-42 to done", "jira", "pattern", "PROJ-42"},
		{"check my github notifications", "github", "lexical", `keyword "github"`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			ts, err := r.Embed(context.Background(), Needs(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, s := range r.CategoryScores(ts) {
				if r.idx.Labels[s.Label].ID != tc.id {
					continue
				}
				found = true
				p, ev := r.Parts(s), r.Evidence(s)
				if p.Nearest == "" || !strings.Contains(ev, p.Nearest) || p.Dense <= 0 || p.Dense > 1.0001 {
					t.Fatalf("parts %+v, evidence %q: want the nearest text and its cosine", p, ev)
				}
				got := map[string]string{"pattern": p.Pattern, "lexical": p.Lexical}[tc.wantKind]
				if !strings.Contains(got, tc.wantMatch) || !strings.Contains(ev, got) {
					t.Fatalf("parts %+v, evidence %q: want %s evidence containing %q", p, ev, tc.wantKind, tc.wantMatch)
				}
			}
			if !found {
				t.Fatalf("no score for %s", tc.id)
			}
		})
	}
}
