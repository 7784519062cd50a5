package rank

import (
	"math"
	"testing"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testindex"
)

// breadthCatalog has a narrow tool (near-identical examples) and a broad
// one (examples with no words in common).
const breadthCatalog = `{"servers": [
 {"id": "fx", "description": "money", "tools": [{"name": "convert", "description": "convert currency",
   "examples": ["convert usd to eur", "convert usd to gbp", "convert eur to usd"]}]},
 {"id": "shop", "description": "shopping", "tools": [{"name": "find_product", "description": "find products",
   "examples": ["cheap gaming laptop", "red party dress", "startup for sale", "blender with glass jug"]}]}]}`

func breadthClassifier(t *testing.T) *Ranker {
	t.Helper()
	return testRanker(t, testindex.Parse(t, breadthCatalog), 256)
}

func TestBreadthLiftsBroadTools(t *testing.T) {
	c := breadthClassifier(t)
	narrow, _ := c.idx.Lookup(index.KindTool, "fx/convert")
	broad, _ := c.idx.Lookup(index.KindTool, "shop/find_product")
	q := &Turn{}
	an := c.breadth.adjust(narrow, &c.idx.Labels[narrow], q, 0.3)
	ab := c.breadth.adjust(broad, &c.idx.Labels[broad], q, 0.3)
	if !(ab > 0 && an < 0) {
		t.Fatalf("adjustment: broad %v, narrow %v; want broad > 0 > narrow", ab, an)
	}
	if math.Abs(ab+an) > 1e-9 {
		t.Errorf("two measured tools: adjustments %v and %v should cancel around the mean", ab, an)
	}
	if got := c.breadth.adjust(broad, &c.idx.Labels[broad], q, 0); got != 0 {
		t.Errorf("weight 0: got %v, want 0", got)
	}
}

// TestBreadthHeldOut checks the calibration-time breadth: holding a vector
// out must equal measuring the tool without it.
func TestBreadthHeldOut(t *testing.T) {
	c := breadthClassifier(t)
	li, _ := c.idx.Lookup(index.KindTool, "fx/convert")
	l := &c.idx.Labels[li]
	for k, src := range l.Sources {
		if src != index.SourceExample {
			continue
		}
		h := l.First + k
		got := c.breadth.adjust(li, l, &Turn{held: true, heldVec: h}, 1)
		// Recompute by brute force without h.
		var sum float64
		var n int
		for a := l.First; a < l.First+l.Count; a++ {
			if a == h || l.Sources[a-l.First] != index.SourceExample {
				continue
			}
			best := math.Inf(-1)
			for b := l.First; b < l.First+l.Count; b++ {
				if b != a && b != h {
					best = math.Max(best, dot(c.idx.Vector(a), c.idx.Vector(b)))
				}
			}
			sum += best
			n++
		}
		if want := c.breadth.mean - sum/float64(n); math.Abs(got-want) > 1e-6 {
			t.Errorf("held %d: got %v, want %v", h, got, want)
		}
	}
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestExampleBM25(t *testing.T) {
	c := breadthClassifier(t)
	broad, _ := c.idx.Lookup(index.KindTool, "shop/find_product")
	s := c.exBM.score("is there a blender with a glass jug", -1)
	if len(s) != 1 || s[broad] <= 0 {
		t.Fatalf("scores %v: want only shop/find_product, from its blender example", s)
	}
	// Held out, the example no longer finds itself.
	l := &c.idx.Labels[broad]
	var blender int
	for k, txt := range l.Texts {
		if txt == "blender with glass jug" {
			blender = l.First + k
		}
	}
	if got := c.exBM.score("blender with glass jug", blender); got[broad] != 0 {
		t.Errorf("held-out example: got %v for its own tool, want 0", got[broad])
	}
	// A tool scores as its best example, not the sum of them.
	one := c.exBM.score("convert usd", -1)
	fx, _ := c.idx.Lookup(index.KindTool, "fx/convert")
	per := c.exBM.bm.score("convert usd")
	var best float64
	for v, x := range per {
		if c.exBM.owner[v] == fx {
			best = math.Max(best, x)
		}
	}
	if one[fx] != best {
		t.Errorf("fx/convert: got %v, want its best example's %v", one[fx], best)
	}
}
