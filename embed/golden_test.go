package embed

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

var update = flag.Bool("update", false, "rewrite testdata golden files from the current model output")

// golden pins what use-lite-en gives for a few texts: the token ids and the
// first components of each vector. An upgrade of the tokenizer library or
// ONNX Runtime that silently changes embeddings (and so invalidates every
// built index, whose fingerprint covers only the model and manifest) fails
// here. Refresh with `go test ./embed -run TestGolden -update`.
type golden struct {
	ModelSHA256 string        `json:"model_sha256"`
	Texts       []goldenEntry `json:"texts"`
}

type goldenEntry struct {
	Text   string    `json:"text"`
	Tokens []int64   `json:"tokens"`
	Head   []float64 `json:"head"`
}

const (
	goldenFile = "testdata/use-lite-en.golden.json"
	goldenHead = 8
	// goldenTol allows for floating-point differences between CPU kernels.
	goldenTol = 1e-4
)

var goldenTexts = []string{
	"Check my GitHub notifications",
	"What's the weather in Paris tomorrow?",
	"read config.json and push it to my repo, then open PR #42!",
	"Zürich café, naïve résumé",
	"cafe\u0301 ǆ ﬁle ½",
}

func TestGolden(t *testing.T) {
	e := realEngine(t)
	vs, err := e.Embed(context.Background(), goldenTexts)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := models.FileSHA256(filepath.Join(testenv.UseLiteDir(), models.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	got := golden{ModelSHA256: sum}
	for i, text := range goldenTexts {
		ids, err := e.Tokens(text)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]float64, goldenHead)
		for k := range head {
			head[k] = math.Round(float64(vs[i][k])*1e6) / 1e6
		}
		got.Texts = append(got.Texts, goldenEntry{Text: text, Tokens: ids, Head: head})
	}
	if *update {
		data, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	var want golden
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if want.ModelSHA256 != got.ModelSHA256 {
		t.Fatalf("model sha256: got %s, golden %s (another model; refresh with -update)", got.ModelSHA256, want.ModelSHA256)
	}
	if len(want.Texts) != len(got.Texts) {
		t.Fatalf("got %d texts, golden has %d (refresh with -update)", len(got.Texts), len(want.Texts))
	}
	for i, w := range want.Texts {
		g := got.Texts[i]
		if g.Text != w.Text {
			t.Fatalf("text %d: got %q, golden %q (refresh with -update)", i, g.Text, w.Text)
		}
		if !slices.Equal(g.Tokens, w.Tokens) {
			t.Errorf("%q tokens: got %v, want %v", w.Text, g.Tokens, w.Tokens)
		}
		for k := range w.Head {
			if d := math.Abs(g.Head[k] - w.Head[k]); d > goldenTol {
				t.Errorf("%q component %d: got %v, want %v (diff %g > %g)", w.Text, k, g.Head[k], w.Head[k], d, goldenTol)
			}
		}
	}
}
