package rank

import (
	"math"

	"github.com/classifierd/classifierd/index"
)

// Example is one example vector of a label.
type Example struct {
	Label, Vector int
}

// allExamples lists the example vectors of every label.
func allExamples(idx *index.Index) []Example {
	labels := make([]int, len(idx.Labels))
	for i := range labels {
		labels[i] = i
	}
	return Examples(idx, labels)
}

func Examples(idx *index.Index, labels []int) []Example {
	var out []Example
	for _, li := range labels {
		l := &idx.Labels[li]
		for k, src := range l.Sources {
			if src == index.SourceExample {
				out = append(out, Example{Label: li, Vector: l.First + k})
			}
		}
	}
	return out
}

// HeldOut scores an example vector as if it were a query, with itself
// (or, for an out-of-scope sample, its whole label) masked out.
func (r *Ranker) HeldOut(ex Example, dots []float32, maskLabel bool) Turn {
	_ = r.idx.Dot(r.idx.Vector(ex.Vector), dots)
	d := append([]float32(nil), dots...)
	l := &r.idx.Labels[ex.Label]
	if maskLabel {
		for v := l.First; v < l.First+l.Count; v++ {
			d[v] = float32(math.Inf(-1))
		}
	} else {
		d[ex.Vector] = float32(math.Inf(-1))
	}
	for _, m := range r.mask {
		d[m.Vector] = float32(math.Inf(-1))
	}
	text := l.Texts[ex.Vector-l.First]
	t := Turn{Text: text, Weight: 1, dots: d, vec: r.idx.Vector(ex.Vector), held: true, heldVec: ex.Vector}
	t.prepare()
	if r.fusion.BM25 > 0 || r.fusion.ExampleBM25 > 0 {
		words := distinctLexWords(text)
		if r.fusion.BM25 > 0 {
			t.bm = r.bm.scoreDense(words, len(r.idx.Labels), nil) // examples are not in the BM25 documents
		}
		if r.fusion.ExampleBM25 > 0 {
			t.exBM = r.exBM.scoreDense(words, ex.Vector, len(r.idx.Labels), nil)
		}
	}
	return t
}

// WithExampleBM25 returns t (a HeldOut turn of ex) with its example BM25
// scores computed whatever the fusion weight, for fitting that weight.
func (r *Ranker) WithExampleBM25(t Turn, ex Example) Turn {
	t.exBM = r.exBM.scoreDense(distinctLexWords(t.Text), ex.Vector, len(r.idx.Labels), nil)
	return t
}
