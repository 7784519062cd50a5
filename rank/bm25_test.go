package rank

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/viterin/vek/vek32"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testindex"
)

func TestLexWords(t *testing.T) {
	got := lexWords("Please list the open Pull-Requests, and the files I edited!")
	want := []string{"list", "open", "pull", "request", "file", "edit"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lexWords: got %q, want %q", got, want)
	}
}

func TestBM25(t *testing.T) {
	c := testRanker(t, testindex.Parse(t, testindex.Catalog), 256)
	// A word only one tool's description has picks that tool, above tools
	// that share only common words; examples are not indexed.
	s := c.bm.score("show the jira ticket comments")
	li, ok := c.idx.Lookup(index.KindTool, "jira/get_issue")
	if !ok {
		t.Fatal("no jira/get_issue tool in the test catalog")
	}
	best, bestScore := -1, 0.0
	for l, x := range s {
		if c.idx.Labels[l].Kind != index.KindTool {
			t.Fatalf("BM25 scored non-tool label %q", c.idx.Labels[l].ID)
		}
		if x > bestScore {
			best, bestScore = l, x
		}
	}
	if best != li {
		t.Fatalf("best BM25 tool: got %v, want jira/get_issue (scores %v)", best, s)
	}
	if got := c.bm.score("zzz qqq"); len(got) != 0 {
		t.Errorf("words in no document: got scores %v, want none", got)
	}
}

// TestPooledHeldOut checks the calibration-time centroid: leaving a vector
// out by arithmetic must equal recomputing the centroid without it.
func TestPooledHeldOut(t *testing.T) {
	c := testRanker(t, testindex.Parse(t, `{"servers": [{"id": "fs", "description": "files",
		"tools": [{"name": "read_file", "description": "read a file", "examples": ["show me notes.txt", "print config.yaml", "cat the readme"]}]}]}`), 64)
	f := c.Fusion()
	f.ToolCentroid, f.ToolDescription, f.ToolExactGap = 1, 0, 0
	c = c.WithFusion(f)
	for _, li := range c.tools {
		l := &c.idx.Labels[li]
		if l.Count < 3 {
			continue
		}
		q := c.idx.Vector(l.First + 1)
		held := l.First + 2
		tr := Turn{vec: q, held: true, heldVec: held}
		got := c.pooled(li, l, &tr, 0, 0)
		sum := make([]float32, c.idx.Dims)
		for v := l.First; v < l.First+l.Count; v++ {
			if v != held {
				vek32.Add_Inplace(sum, c.idx.Vector(v))
			}
		}
		want := float64(vek32.Dot(q, sum)) / math.Sqrt(float64(vek32.Dot(sum, sum)))
		if math.Abs(got-want) > 1e-4 {
			t.Fatalf("%s: held-out centroid cosine: got %v, want %v", l.ID, got, want)
		}
		return
	}
	t.Fatal("no tool with three or more vectors in the test catalog")
}

// TestScoreDenseMatchesMaps checks the per-turn slices against the maps
// they replaced: the same value for every label, 0 where the map had none.
func TestScoreDenseMatchesMaps(t *testing.T) {
	c := testRanker(t, testindex.Parse(t, testindex.Catalog), 256)
	n := len(c.idx.Labels)
	matched := 0
	for _, text := range []string{"show the jira ticket comments", "list my open pull requests on github", "zzz qqq", "read the file notes.txt"} {
		words := distinctLexWords(text)
		for name, pair := range map[string][2]any{
			"bm25":         {c.bm.score(text), c.bm.scoreDense(words, n, nil)},
			"example bm25": {c.exBM.score(text, -1), c.exBM.scoreDense(words, -1, n, nil)},
		} {
			m, d := pair[0].(map[int]float64), pair[1].([]float64)
			if (len(m) == 0) != (d == nil) {
				t.Fatalf("%s %q: map of %d, slice nil %v", name, text, len(m), d == nil)
			}
			for li := 0; li < n && d != nil; li++ {
				if d[li] != m[li] {
					t.Errorf("%s %q label %d: slice %v, map %v", name, text, li, d[li], m[li])
				}
			}
			matched += len(m)
		}
	}
	if matched == 0 {
		t.Fatal("no text matched any document; the test compares nothing")
	}
}

// FuzzEachLowerField: eachLowerField yields exactly the fields of
// strings.FieldsFunc(strings.ToLower(s), notLetterOrDigit), the split
// distinctLexWords made before it stopped copying the text.
func FuzzEachLowerField(f *testing.F) {
	for _, s := range []string{"", "Hello, World", "ÄÖÜ straße İstanbul K", "a\xffb", "Ⅻ ⓐⒶ x_y-z 42", "日本語のテキスト", "ǅemal ǈ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got []string
		eachLowerField(s, func(w string) { got = append(got, w) })
		want := strings.FieldsFunc(strings.ToLower(s), notLetterOrDigit)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: %q, want %q", s, got, want)
		}
	})
}
