package rank

import (
	"math"

	"github.com/classifierd/classifierd/index"
	"github.com/viterin/vek/vek32"
)

// breadth measures how broad each tool is: the mean, over the tool's
// example vectors, of the cosine to the nearest other vector of the same
// tool. A narrow tool ("convert USD to EUR") has examples close to one
// another, so a prompt meant for it lands close to one of them; a broad
// tool ("find products": laptops, dresses, startups for sale) has examples
// far apart, so even its own prompts sit farther from the nearest example
// and lose to narrow neighbours on raw cosine. Route adds
// Fusion.ToolBreadth × (mean breadth − the tool's breadth) to a tool's
// score, which lifts broad tools and lowers narrow ones by what their
// spread predicts.
//
// Tools with fewer than two example vectors are not measured and get no
// adjustment. Only the first maxBreadthVectors vectors of a tool are
// compared, which bounds the start-up cost on huge example sets.
type breadth struct {
	// per vector: the best and second-best cosine to another measured
	// vector of its tool, and which vector gave the best (-1 if none).
	nn1, nn2 []float32
	arg1     []int32
	// per label: the sum of nn1 over its measured example vectors, and
	// how many there are (0 for an unmeasured label).
	sum []float64
	n   []int
	// mean is the average breadth of the measured tools.
	mean float64
}

const maxBreadthVectors = 64

func newBreadth(idx *index.Index, tools []int) *breadth {
	nv := idx.NumVectors()
	b := &breadth{nn1: make([]float32, nv), nn2: make([]float32, nv), arg1: make([]int32, nv),
		sum: make([]float64, len(idx.Labels)), n: make([]int, len(idx.Labels))}
	var total float64
	var measured int
	for _, li := range tools {
		l := &idx.Labels[li]
		cnt := min(l.Count, maxBreadthVectors)
		if examplesIn(l, cnt) < 2 {
			continue
		}
		for a := 0; a < cnt; a++ {
			va := l.First + a
			b.nn1[va], b.nn2[va], b.arg1[va] = float32(math.Inf(-1)), float32(math.Inf(-1)), -1
			for o := 0; o < cnt; o++ {
				if o == a {
					continue
				}
				d := vek32.Dot(idx.Vector(va), idx.Vector(l.First+o))
				switch {
				case d > b.nn1[va]:
					b.nn2[va] = b.nn1[va]
					b.nn1[va], b.arg1[va] = d, int32(l.First+o)
				case d > b.nn2[va]:
					b.nn2[va] = d
				}
			}
			if l.Sources[a] == index.SourceExample {
				b.sum[li] += float64(b.nn1[va])
				b.n[li]++
			}
		}
		total += b.sum[li] / float64(b.n[li])
		measured++
	}
	if measured > 0 {
		b.mean = total / float64(measured)
	}
	return b
}

// examplesIn counts the example vectors among the first cnt of l.
func examplesIn(l *index.Label, cnt int) int {
	n := 0
	for _, s := range l.Sources[:cnt] {
		if s == index.SourceExample {
			n++
		}
	}
	return n
}

// adjust is the score adjustment of tool li for turn t at weight w. When t
// is one of li's own vectors held out at calibration time, li's breadth is
// measured without it, as if the example were not in the catalog.
func (b *breadth) adjust(li int, l *index.Label, t *Turn, w float64) float64 {
	if w == 0 || b.n[li] == 0 {
		return 0
	}
	sum, n := b.sum[li], b.n[li]
	if h := t.heldVec; t.held && h >= l.First && h < l.First+min(l.Count, maxBreadthVectors) {
		sum, n = 0, 0
		for v := l.First; v < l.First+min(l.Count, maxBreadthVectors); v++ {
			if v == h || l.Sources[v-l.First] != index.SourceExample {
				continue
			}
			nn := b.nn1[v]
			if int(b.arg1[v]) == h {
				nn = b.nn2[v]
			}
			if math.IsInf(float64(nn), -1) { // h was its only neighbour
				continue
			}
			sum += float64(nn)
			n++
		}
		if n == 0 {
			return 0
		}
	}
	return w * (b.mean - sum/float64(n))
}
