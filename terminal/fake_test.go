package terminal

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"testing"
	"unicode"
)

// fakeEmbedder stands in for the model where its numbers do not matter: a
// text becomes the normalised bag of its hashed words (or of itself when it
// has none, like "$"), so a text equal to an example is at cosine 1 from it
// and texts sharing words are close. Tests that judge detection quality run
// the real model in cmd/classifierd.
type fakeEmbedder struct {
	dims int
	err  error // returned by every call when set
	// reshape, when set, changes the vectors of each call after hashing.
	reshape func([][]float32) [][]float32
}

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if f.err != nil {
		return nil, f.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, f.dims)
		words := strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if len(words) == 0 {
			words = []string{strings.TrimSpace(t)}
		}
		for _, w := range words {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%uint32(f.dims)]++
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(n))
		}
		out[i] = v
	}
	if f.reshape != nil {
		out = f.reshape(out)
	}
	return out, nil
}

// fakeDetector is a Detector on a 64-dimensional fakeEmbedder.
func fakeDetector(t testing.TB) *Detector {
	t.Helper()
	d, err := NewDetector(context.Background(), &fakeEmbedder{dims: 64})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
