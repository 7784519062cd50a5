package calibrate

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"testing"
)

// twoCatalogs draws candidates of two catalogs that differ only in how
// sure the same evidence is: needed with probability σ(T·3·z), T 0.4 in
// the first and 2.5 in the second. "score" carries z, "cat_twin" names
// the catalog (0 or 1).
func twoCatalogs(n int, seed int64) []EvidenceSample {
	r := rand.New(rand.NewSource(seed))
	x := func(z, c float64) []float64 {
		v := make([]float64, len(EvidenceFeatures))
		v[evidenceIndex["score"]] = z
		v[evidenceIndex["cat_twin"]] = c
		return v
	}
	var out []EvidenceSample
	for c, temp := range []float64{0.4, 2.5} {
		for range n {
			z := r.NormFloat64()
			p := 1 / (1 + math.Exp(-temp*3*z))
			out = append(out, EvidenceSample{X: x(z, float64(c)), Needed: r.Float64() < p, Weight: 1})
		}
	}
	return out
}

func TestFitEvidenceTemperature(t *testing.T) {
	train, test := twoCatalogs(4000, 1), twoCatalogs(4000, 2)
	plain, err := FitEvidence(train, []string{"score", "cat_twin"}, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	tempered, err := FitEvidenceTemperature(train, []string{"score"}, []string{"cat_twin"}, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if len(tempered.Temperature) != 1 || tempered.Temperature[0].Feature != "cat_twin" {
		t.Fatalf("temperature terms = %+v, want one on cat_twin", tempered.Temperature)
	}
	// An additive term cannot make the same evidence surer in one catalog
	// than in the other; a temperature can.
	if lp, lt := plain.LogLoss(test), tempered.LogLoss(test); !(lt < lp-0.02) {
		t.Errorf("held-out log-loss with a temperature %.4f, without %.4f: want clearly lower", lt, lp)
	}
	// The fitted log-odds at z = 1 in each catalog are near the truth
	// (1.2 and 7.5).
	for c, want := range []float64{1.2, 7.5} {
		x := make([]float64, len(EvidenceFeatures))
		x[evidenceIndex["score"]], x[evidenceIndex["cat_twin"]] = 1, float64(c)
		if got := tempered.Logit(x); math.Abs(got-want) > 0.25*want {
			t.Errorf("catalog %d: log-odds at z=1 %.2f, want %.2f ± 25%%", c, got, want)
		}
	}
	// The map survives JSON and validation.
	b, err := json.Marshal(&tempered)
	if err != nil {
		t.Fatal(err)
	}
	var back Evidence
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := back.Prob(test[0].X), tempered.Prob(test[0].X); got != want {
		t.Errorf("after JSON: p %v, want %v", got, want)
	}
}

func TestEvidenceTemperatureBounded(t *testing.T) {
	ev := Evidence{Intercept: 1, Terms: []EvidenceTerm{{Feature: "score", Scale: 1, Coef: 1}},
		Temperature: []EvidenceTerm{{Feature: "cat_twin", Scale: 1, Coef: 1}}}
	x := make([]float64, len(EvidenceFeatures))
	x[evidenceIndex["score"]] = 1
	tests := []struct {
		name string
		twin float64
		want float64
	}{
		{"none", 0, 2},
		{"inside the bound", 1, 2 * math.E},
		{"beyond the bound", 100, 2 * math.Exp(maxLogTemp)},
		{"below the bound", -100, 2 * math.Exp(-maxLogTemp)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x[evidenceIndex["cat_twin"]] = tc.twin
			if got := ev.Logit(x); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Logit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEvidenceValidateTemperature(t *testing.T) {
	tests := []struct {
		name string
		temp []EvidenceTerm
		ok   bool
	}{
		{"valid", []EvidenceTerm{{Feature: "cat_cos", Scale: 0.1, Coef: -1}}, true},
		{"unknown feature", []EvidenceTerm{{Feature: "nope", Scale: 1}}, false},
		{"twice", []EvidenceTerm{{Feature: "cat_cos", Scale: 1}, {Feature: "cat_cos", Scale: 1}}, false},
		{"zero scale", []EvidenceTerm{{Feature: "cat_cos"}}, false},
		{"not finite", []EvidenceTerm{{Feature: "cat_cos", Scale: 1, Coef: math.NaN()}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := Evidence{Terms: []EvidenceTerm{{Feature: "score", Scale: 1, Coef: 1}}, Temperature: tc.temp}
			err := ev.Validate()
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrEvidence) {
				t.Errorf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestDeriveEvidence(t *testing.T) {
	x := func(kv map[string]float64) []float64 {
		v := make([]float64, len(EvidenceFeatures))
		for k, f := range kv {
			v[evidenceIndex[k]] = f
		}
		DeriveEvidence(v)
		return v
	}
	tests := []struct {
		name string
		in   map[string]float64
		want map[string]float64
	}{
		{"the request's best server: no other_ terms",
			map[string]float64{"first": 1, "need_first": 1, "n_parts": 3, "n_cues": 1, "log_words": 2, "need_z": 4, "z": 5},
			map[string]float64{"other_parts": 0, "other_cues": 0, "other_words": 0, "other_first": 0, "other_need_z": 0, "z_words": 10, "gap_words": 0, "gap_parts": 0}},
		{"the best of a part, below the request's best",
			map[string]float64{"first": 0, "need_first": 1, "n_parts": 3, "n_cues": 1, "log_words": 2, "need_z": 4, "z": 1.5, "gap": 0.2},
			map[string]float64{"other_parts": math.Log(4), "other_cues": math.Log(2), "other_words": 2, "other_first": math.Log(4),
				"other_need_z": 4 * math.Log(4), "z_words": 3, "gap_words": 0.4, "gap_parts": 0.2 * math.Log(4)}},
		{"a runner-up of a one-part request",
			map[string]float64{"first": 0, "need_first": 0, "n_parts": 0, "log_words": 1, "z": 2, "gap": 0.1},
			map[string]float64{"other_parts": 0, "other_first": 0, "other_words": 1, "z_words": 2, "gap_words": 0.1, "gap_parts": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := x(tc.in)
			for k, w := range tc.want {
				if !DerivedEvidence(k) {
					t.Fatalf("%s is not a derived feature", k)
				}
				if g := got[evidenceIndex[k]]; math.Abs(g-w) > 1e-12 {
					t.Errorf("%s = %v, want %v", k, g, w)
				}
			}
		})
	}
	if DerivedEvidence("score") {
		t.Error("score reported as derived")
	}
}
