package labels

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
)

func TestRequestVectorOnlyForLoneTools(t *testing.T) {
	cat, err := catalog.Parse([]byte(`{"servers": [
	 {"id": "weather", "description": "forecasts", "tools": [{"name": "forecast", "description": "Weather forecasts for any city."}]},
	 {"id": "github", "description": "code hosting", "tools": [
	   {"name": "list_pull_requests", "description": "List open pull requests"},
	   {"name": "get_pull_request_diff", "description": "Get a pull request's diff"}]}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]index.Source{}
	for _, l := range Labels(cat) {
		if l.Kind == index.KindTool {
			got[l.ID] = l.Sources
			if l.Sources[0] != index.SourceDescription {
				t.Errorf("%s: first vector is %q, want the description", l.ID, l.Sources[0])
			}
		}
	}
	if s := got["weather/forecast"]; len(s) != 2 || s[1] != index.SourceRequest {
		t.Errorf("lone tool: sources %v, want description then request", s)
	}
	for _, id := range []string{"github/list_pull_requests", "github/get_pull_request_diff"} {
		if s := got[id]; len(s) != 1 {
			t.Errorf("%s has siblings: sources %v, want the description only", id, s)
		}
	}
	if r := RequestText("  "); r != "" {
		t.Errorf("empty description: got request %q, want none", r)
	}
}

// countingEmbedder gives each text a unit vector derived from its hash
// and records the texts it was asked to embed.
type countingEmbedder struct {
	dims int
	seen []string
}

func (c *countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	c.seen = append(c.seen, texts...)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = hashVec(t, c.dims)
	}
	return out, nil
}

func hashVec(text string, dims int) []float32 {
	v := make([]float32, dims)
	var n float64
	for i := range v {
		h := fnv.New32a()
		h.Write([]byte{byte(i)})
		h.Write([]byte(text))
		v[i] = float32(h.Sum32()%1000) - 500
		n += float64(v[i]) * float64(v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

func TestEmbedEmbedsRepeatedTextsOnce(t *testing.T) {
	cat, err := catalog.Parse([]byte(`{"servers": [
	 {"id": "a", "description": "files", "tools": [{"name": "read_file", "description": "Read a file.", "examples": ["open notes.txt", "show notes"]}]},
	 {"id": "b", "description": "files", "tools": [{"name": "read_file", "description": "Read a file.", "examples": ["open notes.txt"]},
	   {"name": "write_file", "description": "Write a file, creating it if it does not exist yet."}]}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	emb := &countingEmbedder{dims: 64}
	idx, st, err := EmbedStats(context.Background(), cat, emb, Model{Name: "bow", Fingerprint: "f", Dims: 64}, Options{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Texts != idx.NumVectors() || st.Distinct != len(emb.seen) || st.Distinct >= st.Texts {
		t.Fatalf("stats %+v, %d vectors, %d texts embedded; want repeats embedded once", st, idx.NumVectors(), len(emb.seen))
	}
	seen := map[string]bool{}
	for _, s := range emb.seen {
		if seen[s] {
			t.Errorf("%q embedded twice", s)
		}
		seen[s] = true
	}
	// Every vector is the embedding of its own text, wherever it repeats.
	for _, l := range idx.Labels {
		for k, text := range l.Texts {
			if got := idx.Vector(l.First + k); !slices.Equal(got, hashVec(text, 64)) {
				t.Errorf("%s vector %d (%q) is not its text's embedding", l.ID, k, text)
			}
		}
	}
}

// TestToolTextShared runs the cases tools/train checks its copy of
// ToolText against (toolret/data.py index_text): the encoder is trained on
// the texts this package embeds, so the two must not drift apart.
func TestToolTextShared(t *testing.T) {
	b, err := os.ReadFile("testdata/tooltext.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct{ Name, Description, Want string }
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		if got := ToolText(c.Name, c.Description); got != c.Want {
			t.Errorf("ToolText(%q, %q) = %q, want %q", c.Name, c.Description, got, c.Want)
		}
	}
}
