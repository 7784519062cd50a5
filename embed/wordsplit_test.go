package embed

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWordCacheMatchesWholeText checks the word-by-word tokenisation fast
// path gives exactly the ids of tokenising the whole text, on thousands of
// real utterances (the Banking77 and MetaTool development sets).
func TestWordCacheMatchesWholeText(t *testing.T) {
	rt, err := InitRuntime(wsORTLib())
	if err != nil {
		t.Fatalf("%v (run `make deps`)", err)
	}
	defer rt.Close()
	data, err := os.ReadFile("../models/use-lite-en.json")
	if err != nil {
		t.Fatal(err)
	}
	man, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(rt, Config{ModelDir: wsModelDir(), Manifest: man})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.wordSplit {
		t.Fatal("use-lite-en should be word-separable: the fast path is off")
	}
	var texts []string
	for _, f := range []string{"banking77.json", "metatool.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "shared", "datasets", f))
		if err != nil {
			t.Fatal(err)
		}
		var ds struct {
			Test    []struct{ Text string } `json:"test"`
			Queries []struct{ Text string } `json:"queries"`
		}
		if err := json.Unmarshal(raw, &ds); err != nil {
			t.Fatal(err)
		}
		for _, q := range ds.Test {
			texts = append(texts, q.Text)
		}
		for i, q := range ds.Queries {
			if i%5 == 0 {
				texts = append(texts, q.Text)
			}
		}
	}
	checked := 0
	for _, text := range texts {
		norm := man.NormalizeText(text)
		if IsBlank(norm) || !isASCII(norm) {
			continue
		}
		want, err := e.tokenize(norm)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) > man.MaxTokens {
			want = want[:man.MaxTokens]
		}
		got, err := e.Tokens(text)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("text %q: word path %v, whole text %v", text, got, want)
		}
		checked++
	}
	if checked < 5000 {
		t.Fatalf("checked only %d texts", checked)
	}
	// And the embedding is the one the whole-text path gives.
	v1, err := e.Embed(context.Background(), []string{texts[0]})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := e.tokenize(man.NormalizeText(texts[0]))
	v2, err := e.Infer(context.Background(), [][]int64{ids})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v1[0] {
		if d := v1[0][i] - v2[0][i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("dim %d: %v vs %v", i, v1[0][i], v2[0][i])
		}
	}
}

func wsORTLib() string {
	if p := os.Getenv("ORT_LIB"); p != "" {
		return p
	}
	return "../.cache/onnxruntime-1.24.3/libonnxruntime.so.1"
}

func wsModelDir() string {
	if d := os.Getenv("MODEL_DIR"); d != "" {
		return d
	}
	return "../../shared/models/use-lite-en"
}
