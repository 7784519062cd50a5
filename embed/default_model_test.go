package embed

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

// verifyFile is what tools/modelconv writes beside a model it built: fixed
// sentences with the token ids the Hugging Face tokenizers library gives and
// the pooled, normalised vectors ONNX Runtime computes in Python.
type verifyFile struct {
	Sentences []string    `json:"sentences"`
	MaxTokens int         `json:"max_tokens"`
	IDs       [][]int64   `json:"ids"`
	Vectors   [][]float64 `json:"vectors"`
	MinCosine float64     `json:"min_cosine"`
}

// TestDefaultModelMatchesReference runs the project's default model (a
// BERT-family encoder converted by tools/modelconv) through the Go engine
// and checks it against what the Python reference tools computed when the
// model was built: the same token ids, and vectors at cosine >= 0.9999,
// alone and in one padded batch.
func TestDefaultModelMatchesReference(t *testing.T) {
	dir := testenv.ModelDir()
	data, err := os.ReadFile(filepath.Join(dir, "verify.json"))
	if err != nil {
		t.Fatalf("%v\nrun `make model` to build the default model", err)
	}
	var ref verifyFile
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Sentences) == 0 || len(ref.IDs) != len(ref.Sentences) || len(ref.Vectors) != len(ref.Sentences) {
		t.Fatalf("verify.json: %d sentences, %d id lists, %d vectors", len(ref.Sentences), len(ref.IDs), len(ref.Vectors))
	}
	man, err := models.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.Inputs.TokenTypeIDs == "" || man.Pooling != models.PoolMean || man.MaxTokens != ref.MaxTokens {
		t.Fatalf("manifest %+v: want a BERT-style mean-pooled model with max_tokens %d", man, ref.MaxTokens)
	}
	realEngine(t) // the shared runtime
	e, err := Open(shared.rt, Config{ModelDir: dir, Manifest: man})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })

	for i, s := range ref.Sentences {
		got, err := e.Tokens(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ref.IDs[i]) {
			t.Errorf("sentence %d tokens:\ngot  %v\nwant %v", i, got, ref.IDs[i])
		}
	}
	ctx := context.Background()
	batch, err := e.Embed(ctx, ref.Sentences)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ref.Sentences {
		alone, err := e.Embed(ctx, []string{s})
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string][]float32{"alone": alone[0], "batched": batch[i]} {
			var dot float64
			for j, x := range v {
				dot += float64(x) * ref.Vectors[i][j]
			}
			if dot < 0.9999 {
				t.Errorf("sentence %d %s: cosine to the Python reference %.6f, want >= 0.9999", i, name, dot)
			}
		}
	}
}
