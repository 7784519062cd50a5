package calibrate

import (
	"math"
	"math/rand"
	"reflect"
	"testing"
)

// around makes n unit vectors per centre, noise drawn from r.
func around(r *rand.Rand, centres [][]float32, n int, noise float64) ([][]float32, []int) {
	var x [][]float32
	var y []int
	dims := len(centres[0])
	for c, centre := range centres {
		for i := 0; i < n; i++ {
			v := make([]float32, dims)
			for d := range v {
				v[d] = centre[d] + float32(noise*r.NormFloat64())
			}
			x = append(x, unit(v))
			y = append(y, c)
		}
	}
	return x, y
}

func randUnit(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for d := range v {
		v[d] = float32(r.NormFloat64())
	}
	return unit(v)
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] = float32(float64(v[i]) / n)
	}
	return v
}

func TestTrainHead(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const classes, dims = 6, 32
	centres := make([][]float32, classes)
	for c := range centres {
		centres[c] = randUnit(r, dims)
	}
	x, y := around(rand.New(rand.NewSource(2)), centres, 20, 0.08)
	h := TrainHead(x, y, classes, HeadOptions{Seed: 3})

	// Held-out points of the same clusters (other noise, so none is a
	// training point) are classified right.
	tx, ty := around(rand.New(rand.NewSource(3)), centres, 20, 0.08)
	for i := range tx {
		for j := range x {
			if reflect.DeepEqual(tx[i], x[j]) {
				t.Fatalf("held-out point %d is training point %d", i, j)
			}
		}
	}
	right := 0
	for i, v := range tx {
		lp := h.LogProbs(v)
		var z float64
		best := 0
		for j, l := range lp {
			if l > 0 || math.IsNaN(l) {
				t.Fatalf("log-probability %v for class %d: want finite and ≤ 0", l, j)
			}
			z += math.Exp(l)
			if l > lp[best] {
				best = j
			}
		}
		if math.Abs(z-1) > 1e-6 {
			t.Fatalf("probabilities sum to %v, want 1", z)
		}
		if best == ty[i] {
			right++
		}
	}
	if acc := float64(right) / float64(len(tx)); acc < 0.95 {
		t.Errorf("accuracy on separable clusters: got %.3f, want ≥ 0.95", acc)
	}

	// Deterministic for a seed.
	if again := TrainHead(x, y, classes, HeadOptions{Seed: 3}); !reflect.DeepEqual(h, again) {
		t.Error("TrainHead with the same seed gave a different head")
	}
}

func TestChooseHeadWeight(t *testing.T) {
	// Two samples whose raw scores pick the wrong class; the head's
	// out-of-fold log-probabilities fix them once weighted enough.
	scores := [][]float64{{0.50, 0.51}, {0.52, 0.50}, {0.3, 0.2}}
	labels := []int{0, 1, -1}
	vec := []int{10, 11, 12}
	oof := map[int][]float64{10: {math.Log(0.9), math.Log(0.1)}, 11: {math.Log(0.1), math.Log(0.9)}, 12: {math.Log(0.5), math.Log(0.5)}}
	if got := ChooseHeadWeight(scores, labels, vec, oof); got <= 0 {
		t.Errorf("chooseHeadWeight: got %v, want a positive weight when the head fixes errors", got)
	}
	// A head that only agrees with the raw scores earns no weight.
	agree := map[int][]float64{10: {math.Log(0.1), math.Log(0.9)}, 11: {math.Log(0.9), math.Log(0.1)}, 12: {math.Log(0.5), math.Log(0.5)}}
	if got := ChooseHeadWeight([][]float64{{0.6, 0.5}, {0.5, 0.6}}, []int{0, 1}, []int{10, 11}, agree); got != 0 {
		t.Errorf("chooseHeadWeight: got %v, want 0 when the head does not improve accuracy", got)
	}
}
