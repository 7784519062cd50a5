package calibrate

import (
	"math"
	"math/rand"

	"github.com/viterin/vek/vek32"
)

// Head is a linear softmax classifier over embeddings, trained at index
// time on the categories' example vectors (multinomial logistic regression
// with L2 regularisation). Its log-probabilities add to the nearest-example
// score in single-label classification.
type Head struct {
	W [][]float32 `json:"w"` // [classes][dims]
	B []float32   `json:"b"`
}

// HeadOptions tunes training.
type HeadOptions struct {
	Epochs int     // default 25
	LR     float64 // default 100: unit-length inputs need large steps (SGD with 1/(1+0.01t) decay)
	L2     float64 // default 1e-6
	Batch  int     // default 32
	Seed   int64
}

func (o HeadOptions) withDefaults() HeadOptions {
	if o.Epochs <= 0 {
		o.Epochs = 25
	}
	if o.LR <= 0 {
		o.LR = 100
	}
	if o.L2 <= 0 {
		o.L2 = 1e-6
	}
	if o.Batch <= 0 {
		o.Batch = 32
	}
	return o
}

// TrainHead fits a head on vectors x with labels y in [0, classes).
// Deterministic for a seed.
func TrainHead(x [][]float32, y []int, classes int, o HeadOptions) *Head {
	o = o.withDefaults()
	dims := len(x[0])
	h := &Head{W: make([][]float32, classes), B: make([]float32, classes)}
	for c := range h.W {
		h.W[c] = make([]float32, dims)
	}
	r := rand.New(rand.NewSource(o.Seed))
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	grad := make([][]float32, classes)
	for c := range grad {
		grad[c] = make([]float32, dims)
	}
	gb := make([]float64, classes)
	logits := make([]float64, classes)
	scratch := make([]float32, dims)
	step := 0
	for ep := 0; ep < o.Epochs; ep++ {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for start := 0; start < len(order); start += o.Batch {
			end := min(start+o.Batch, len(order))
			for c := range grad {
				clear(grad[c])
			}
			clear(gb)
			for _, i := range order[start:end] {
				h.logitsInto(x[i], logits)
				softmaxInPlace(logits)
				for c := 0; c < classes; c++ {
					g := logits[c]
					if c == y[i] {
						g--
					}
					if g > -1e-4 && g < 1e-4 {
						continue // negligible: most classes once training has converged
					}
					vek32.MulNumber_Into(scratch, x[i], float32(g))
					vek32.Add_Inplace(grad[c], scratch)
					gb[c] += g
				}
			}
			step++
			lr := float32(o.LR / (1 + 0.01*float64(step)) / float64(end-start))
			decay := float32(1 - o.LR*o.L2)
			for c := 0; c < classes; c++ {
				vek32.MulNumber_Inplace(h.W[c], decay)
				vek32.MulNumber_Inplace(grad[c], -lr)
				vek32.Add_Inplace(h.W[c], grad[c])
				h.B[c] -= lr * float32(gb[c])
			}
		}
	}
	return h
}

func (h *Head) logitsInto(v []float32, out []float64) {
	for c := range h.W {
		out[c] = float64(vek32.Dot(h.W[c], v) + h.B[c])
	}
}

// LogProbs returns the head's log-probabilities for a vector.
func (h *Head) LogProbs(v []float32) []float64 {
	out := make([]float64, len(h.W))
	h.logitsInto(v, out)
	m := math.Inf(-1)
	for _, x := range out {
		m = math.Max(m, x)
	}
	var z float64
	for _, x := range out {
		z += math.Exp(x - m)
	}
	lz := m + math.Log(z)
	for i := range out {
		out[i] -= lz
	}
	return out
}

func softmaxInPlace(v []float64) {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	var z float64
	for i, x := range v {
		v[i] = math.Exp(x - m)
		z += v[i]
	}
	for i := range v {
		v[i] /= z
	}
}
