package calibrate

import (
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"testing"
)

func TestCalibrationJSON(t *testing.T) {
	for _, raw := range []string{`{"categories":{"t":0}}`, `{"servers":{"a":"x"}}`, `not json`} {
		var c Calibration
		if err := json.Unmarshal([]byte(raw), &c); err == nil {
			t.Fatalf("%s: accepted", raw)
		}
	}
	c := OrDefault(nil)
	if c.Fitted || c.Categories.Method != "prior" {
		t.Fatalf("default: %+v", c)
	}
	p := c.Categories.Probabilities([]float64{0.9, 0.2, -1})
	if !(p[0] > p[1] && p[1] > p[2]) || p[0]+p[1]+p[2] > 1 {
		t.Fatalf("probabilities %v", p)
	}
	if got := (Binary{A: -10, B: 5}).Prob(0.5); math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("Prob(0.5) = %v, want 0.5", got)
	}
}

// TestFitPlattGap recovers the parameters of a known model from samples
// drawn from it.
func TestFitPlattGap(t *testing.T) {
	const A, G, B = -5.0, 20.0, 2.0
	r := rand.New(rand.NewSource(7))
	var s, gap []float64
	var pos []bool
	for i := 0; i < 20000; i++ {
		x, g := r.Float64(), 0.0
		if r.Intn(2) == 1 {
			g = r.Float64() * 0.3
		}
		p := 1 / (1 + math.Exp(A*x+G*g+B))
		s, gap, pos = append(s, x), append(gap, g), append(pos, r.Float64() < p)
	}
	a, g, b := fitPlattGap(s, gap, pos)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"A", a, A}, {"G", g, G}, {"B", b, B}} {
		if math.Abs(c.got-c.want) > 0.15*math.Abs(c.want) {
			t.Errorf("%s: got %.3f, want %.3f within 15%%", c.name, c.got, c.want)
		}
	}
	m := Binary{Method: "platt-gap", A: a, G: g, B: b}
	if top, below := m.ProbAt(0.8, 0), m.ProbAt(0.8, 0.1); !(top > below) {
		t.Errorf("ProbAt: the best label %.3f should beat one 0.1 below it at the same score %.3f", top, below)
	}
}

// TestFitPlattGapRealServers fits the server samples gen-index collected
// on the default catalog with all-MiniLM-L6-v2-int8 (scores and gaps
// rounded to 4 decimals; testdata/platt-servers-minilm.json). Every
// held-out example's own server is its best (gap 0), so a gap threshold
// nearly separates the samples: plain Newton steps overshot there and ran
// the weights off to about 1e11, which maps every score to 0 or 1 and made
// Route abstain on in-scope requests. On Platt's smoothed targets the
// optimum is finite; the fit must find it.
func TestFitPlattGapRealServers(t *testing.T) {
	data, err := os.ReadFile("testdata/platt-servers-minilm.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Score, Gap []float64
		Pos        []bool
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	a, g, b := fitPlattGap(d.Score, d.Gap, d.Pos)
	for name, w := range map[string]float64{"A": a, "G": g, "B": b} {
		if math.IsNaN(w) || math.Abs(w) > 1000 {
			t.Errorf("%s = %g: the fit ran away", name, w)
		}
	}
	m := Binary{Method: "platt-gap", A: a, G: g, B: b}
	// A clear best server (score 0.7, gap 0) is likely relevant; one 0.3
	// below the best is not; neither is certain.
	if p := m.ProbAt(0.7, 0); p < 0.5 || p > 0.999 {
		t.Errorf("best server at 0.7: p = %.4f, want in [0.5, 0.999]", p)
	}
	if p := m.ProbAt(0.5, 0.3); p > 0.1 || p <= 0 {
		t.Errorf("a server 0.3 below the best: p = %.6f, want in (0, 0.1]", p)
	}
	var held []float64
	for i := range d.Score {
		held = append(held, m.ProbAt(d.Score[i], d.Gap[i]))
	}
	if e := ECE(held, d.Pos, 15); e > 0.03 {
		t.Errorf("ECE on the fitting samples %.4f, want <= 0.03", e)
	}
}
