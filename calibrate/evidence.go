package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/optimize"
)

// EvidenceFeatures names the evidence about one candidate server of a
// request that an Evidence map may weigh, in the order route computes it
// (route's evidence.go says how each is measured). New evidence (a usage
// prior, co-use) is appended to this list and computed by route; a map
// names the features it weighs, so a map fitted before a feature existed
// keeps its meaning, and a map naming a feature this build does not know
// is refused when the index loads.
var EvidenceFeatures = []string{
	"score",       // the server's fused score (best over the request and its parts)
	"gap",         // the best server's score less this one's
	"log_rank",    // log(1 + rank), rank 0 for the best server
	"first",       // 1 for the best server
	"z",           // the score in standard deviations above the mean over the catalog's scored servers
	"top_z",       // z of the best server (how far the request stands out of the catalog)
	"margin",      // the best server's score less the second's
	"crowd",       // log(1 + servers scoring within 0.03 of this one)
	"whole_gap",   // the gap within the whole request alone
	"part_first",  // 1 when the server is the best of one part of a compound request
	"part_gap",    // the smallest gap to a part's best, over the parts (0.3 when no part)
	"part_adv",    // the largest lead over the request's best server within one part (0 when none)
	"cue_first",   // 1 when the server is the catalog's best match for a cue of the request
	"cue_score",   // the best score of the server for a cue's capability (0 when no cue)
	"cue_gap",     // the smallest gap to a cue's best (0.3 when no cue)
	"cue_adv",     // the largest lead over the request's best server for one cue
	"n_parts",     // the number of parts of the request
	"n_cues",      // the number of cues of the request
	"lexical",     // 1 when the server or one of its tools is named or keyed in the request
	"log_servers", // log of the number of servers in the catalog
	"log_tools",   // log(1 + the server's tools)
	"log_words",   // log(1 + the request's words)
	"part_z",      // the highest z of the server within one part's ranking (0 when no part)
	"cue_z",       // the highest z of the server within one cue's ranking (0 when no cue)
	"need_rank",   // log(1 + the server's best rank in any need, the whole request included)
	"need_first",  // part_first or cue_first: the best server of some need (a part or a cue)
	"need_gap",    // the smaller of part_gap and cue_gap
	"need_adv",    // the larger of part_adv and cue_adv
	"need_z",      // the larger of part_z and cue_z
	// The catalog's shape (route's shape.go), from its own description
	// vectors, no labels: what a score means in this catalog.
	"twin",      // the cosine of the server's description to its nearest other server's
	"twin_z",    // twin in standard deviations from the catalog's mean twin
	"cat_twin",  // the catalog's mean twin (how near-duplicate its servers are)
	"cat_cos",   // the mean cosine between two of the catalog's servers
	"cat_words", // log(1 + the mean words of the catalog's server descriptions)
	// How the request's make-up changes what a candidate's standing
	// means (DeriveEvidence computes them from the features above): a
	// server below the best is more often needed in a request of many
	// parts, cues or words, and a gap or z counts for less in a long one.
	"other_parts",  // (1 - first)·log(1 + n_parts)
	"other_cues",   // (1 - first)·log(1 + n_cues)
	"other_words",  // (1 - first)·log_words
	"other_first",  // (1 - first)·need_first·log(1 + n_parts): the best of a part or cue, not of the request
	"other_need_z", // (1 - first)·need_z·log(1 + n_parts)
	"z_words",      // z·log_words
	"gap_words",    // gap·log_words
	"gap_parts",    // gap·log(1 + n_parts)
}

// derivedEvidence are the features DeriveEvidence computes from the
// others, each from the values it names.
var derivedEvidence = []derived{
	{"other_parts", func(g func(string) float64) float64 { return (1 - g("first")) * math.Log1p(g("n_parts")) }},
	{"other_cues", func(g func(string) float64) float64 { return (1 - g("first")) * math.Log1p(g("n_cues")) }},
	{"other_words", func(g func(string) float64) float64 { return (1 - g("first")) * g("log_words") }},
	{"other_first", func(g func(string) float64) float64 {
		return (1 - g("first")) * g("need_first") * math.Log1p(g("n_parts"))
	}},
	{"other_need_z", func(g func(string) float64) float64 {
		return (1 - g("first")) * g("need_z") * math.Log1p(g("n_parts"))
	}},
	{"z_words", func(g func(string) float64) float64 { return g("z") * g("log_words") }},
	{"gap_words", func(g func(string) float64) float64 { return g("gap") * g("log_words") }},
	{"gap_parts", func(g func(string) float64) float64 { return g("gap") * math.Log1p(g("n_parts")) }},
}

// derived is a feature computed from others: f reads them by name.
type derived struct {
	name string
	f    func(get func(string) float64) float64
}

// DerivedEvidence reports whether feature is one DeriveEvidence computes.
func DerivedEvidence(feature string) bool {
	return slices.ContainsFunc(derivedEvidence, func(d derived) bool { return d.name == feature })
}

// DeriveEvidence sets the derived features of x (in EvidenceFeatures
// order) from the others: products of the candidate's standing and the
// request's make-up, so the map can weigh them together.
func DeriveEvidence(x []float64) {
	get := func(n string) float64 { return x[evidenceIndex[n]] }
	for _, d := range derivedEvidence {
		x[evidenceIndex[d.name]] = d.f(get)
	}
}

var evidenceIndex = func() map[string]int {
	m := make(map[string]int, len(EvidenceFeatures))
	for i, n := range EvidenceFeatures {
		m[n] = i
	}
	return m
}()

// Evidence maps a candidate's evidence to the probability that the request
// needs it: a logistic regression over standardised features,
// p = 1/(1+exp(-(Intercept + Σ Coef·(x-Mean)/Scale))). It is learnt across
// many catalogs (route-eval fit), so it holds for a catalog that has no
// examples of its own; Record says on what and how it was chosen.
type Evidence struct {
	Terms     []EvidenceTerm `json:"terms"`
	Intercept float64        `json:"intercept"`
	// Temperature, when set, multiplies the log-odds by
	// exp(Σ Coef·(x-Mean)/Scale) (its log bounded to ±3): a temperature
	// that features of the catalog (its shape, its size) set, so the same
	// evidence is surer in a catalog of distinct servers than in one of
	// near-duplicates. Fitted jointly with Terms.
	Temperature []EvidenceTerm  `json:"temperature,omitempty"`
	Record      *EvidenceRecord `json:"record,omitempty"`
}

// EvidenceTerm is one weighed feature (a name of EvidenceFeatures).
type EvidenceTerm struct {
	Feature string  `json:"feature"`
	Mean    float64 `json:"mean"`
	Scale   float64 `json:"scale"`
	Coef    float64 `json:"coef"`
}

// EvidenceRecord is what a fitted Evidence map was learnt from and how it
// was chosen.
type EvidenceRecord struct {
	Model       string             `json:"model"`
	Fingerprint string             `json:"fingerprint"`
	Catalogs    []EvidenceCatalog  `json:"catalogs"`
	L2          float64            `json:"l2"`
	Selection   string             `json:"selection"`
	LeftOut     []EvidenceLeftOut  `json:"left_out,omitempty"`
	Command     string             `json:"command,omitempty"`
	Extra       map[string]float64 `json:"extra,omitempty"`
}

// EvidenceCatalog is one catalog a map was fitted on.
type EvidenceCatalog struct {
	Name       string `json:"name"`
	Tasks      int    `json:"tasks"`
	Candidates int    `json:"candidates"`
}

// EvidenceLeftOut is a catalog's figures when the map was fitted without it.
type EvidenceLeftOut struct {
	Catalog string  `json:"catalog"`
	ECE     float64 `json:"ece"`
	LogLoss float64 `json:"log_loss"`
}

// ErrEvidence reports an Evidence map that cannot be used.
var ErrEvidence = errors.New("calibrate: evidence map")

// Validate checks that every term names a known feature once and that
// every number is finite with a positive scale.
func (e *Evidence) Validate() error {
	if math.IsNaN(e.Intercept) || math.IsInf(e.Intercept, 0) {
		return fmt.Errorf("%w: intercept is not finite", ErrEvidence)
	}
	if err := validTerms(e.Terms); err != nil {
		return err
	}
	return validTerms(e.Temperature)
}

func validTerms(ts []EvidenceTerm) error {
	seen := map[string]bool{}
	for _, t := range ts {
		if _, ok := evidenceIndex[t.Feature]; !ok {
			return fmt.Errorf("%w: unknown feature %q (written by a newer classifierd?)", ErrEvidence, t.Feature)
		}
		if seen[t.Feature] {
			return fmt.Errorf("%w: feature %q twice", ErrEvidence, t.Feature)
		}
		seen[t.Feature] = true
		for _, v := range []float64{t.Mean, t.Scale, t.Coef} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: feature %q has a number that is not finite", ErrEvidence, t.Feature)
			}
		}
		if t.Scale <= 0 {
			return fmt.Errorf("%w: feature %q has scale %v", ErrEvidence, t.Feature, t.Scale)
		}
	}
	return nil
}

// Logit is the map's log-odds for x, the features in EvidenceFeatures
// order: the terms' sum, times the temperature's factor where it has one.
func (e *Evidence) Logit(x []float64) float64 {
	z := e.Intercept
	for _, t := range e.Terms {
		z += t.Coef * (x[evidenceIndex[t.Feature]] - t.Mean) / t.Scale
	}
	if len(e.Temperature) > 0 {
		var u float64
		for _, t := range e.Temperature {
			u += t.Coef * (x[evidenceIndex[t.Feature]] - t.Mean) / t.Scale
		}
		z *= math.Exp(clampTemp(u))
	}
	return z
}

// Prob is the probability that a candidate with features x (in
// EvidenceFeatures order) is needed.
func (e *Evidence) Prob(x []float64) float64 {
	return 1 / (1 + math.Exp(-e.Logit(x)))
}

// EvidenceSample is one candidate for fitting: its features (in
// EvidenceFeatures order), whether it was needed, and its weight.
type EvidenceSample struct {
	X      []float64
	Needed bool
	Weight float64
}

// FitEvidence fits a map weighing the named features on samples:
// weighted logistic regression with an L2 penalty of l2 on the
// standardised coefficients (not the intercept), minimised by L-BFGS
// (gonum). The features are standardised by their weighted mean and
// standard deviation.
func FitEvidence(samples []EvidenceSample, features []string, l2 float64) (Evidence, error) {
	return FitEvidenceTemperature(samples, features, nil, l2)
}

// FitEvidenceTemperature fits a map as FitEvidence does, with a
// temperature weighing the features temp (see Evidence.Temperature),
// fitted jointly with the same penalty on its coefficients.
func FitEvidenceTemperature(samples []EvidenceSample, features, temp []string, l2 float64) (Evidence, error) {
	if len(samples) == 0 {
		return Evidence{}, fmt.Errorf("%w: no samples", ErrEvidence)
	}
	var wsum float64
	for _, s := range samples {
		wsum += s.Weight
	}
	if !(wsum > 0) {
		return Evidence{}, fmt.Errorf("%w: samples weigh nothing", ErrEvidence)
	}
	zf, base, err := standardise(samples, features, wsum)
	if err != nil {
		return Evidence{}, err
	}
	zt, tterms, err := standardise(samples, temp, wsum)
	if err != nil {
		return Evidence{}, err
	}
	k, m := len(features), len(temp)
	// w[0] is the intercept, w[1:k+1] the coefficients, w[k+1:] the
	// temperature's coefficients.
	loss := func(w, grad []float64) float64 {
		var f float64
		if grad != nil {
			clear(grad)
		}
		for n, s := range samples {
			l := w[0]
			for j := range k {
				l += w[j+1] * zf[n][j]
			}
			t, inside := 1.0, false
			if m > 0 {
				var u float64
				for j := range m {
					u += w[k+1+j] * zt[n][j]
				}
				t, inside = math.Exp(clampTemp(u)), math.Abs(u) < maxLogTemp
			}
			a := l * t
			// log(1+e^a) - y·a, stably.
			var ll float64
			if a > 0 {
				ll = a + math.Log1p(math.Exp(-a))
			} else {
				ll = math.Log1p(math.Exp(a))
			}
			y := 0.0
			if s.Needed {
				y = 1
			}
			f += s.Weight * (ll - y*a)
			if grad != nil {
				g := s.Weight * (1/(1+math.Exp(-a)) - y)
				grad[0] += g * t
				for j := range k {
					grad[j+1] += g * t * zf[n][j]
				}
				for j := range m {
					if inside {
						grad[k+1+j] += g * a * zt[n][j]
					}
				}
			}
		}
		f /= wsum
		for j := 1; j < len(w); j++ {
			f += 0.5 * l2 * w[j] * w[j]
		}
		if grad != nil {
			for j := range grad {
				grad[j] /= wsum
			}
			for j := 1; j < len(w); j++ {
				grad[j] += l2 * w[j]
			}
		}
		return f
	}
	p := optimize.Problem{
		Func: func(w []float64) float64 { return loss(w, nil) },
		Grad: func(grad, w []float64) { loss(w, grad) },
	}
	res, err := optimize.Minimize(p, make([]float64, k+m+1), &optimize.Settings{GradientThreshold: 1e-7, MajorIterations: 500}, &optimize.LBFGS{})
	if err != nil && res == nil {
		return Evidence{}, fmt.Errorf("%w: fit: %v", ErrEvidence, err)
	}
	e := Evidence{Intercept: res.X[0], Terms: base}
	for j := range e.Terms {
		e.Terms[j].Coef = res.X[j+1]
	}
	if m > 0 {
		e.Temperature = tterms
		for j := range e.Temperature {
			e.Temperature[j].Coef = res.X[k+1+j]
		}
	}
	if err := e.Validate(); err != nil {
		return Evidence{}, err
	}
	return e, nil
}

// standardise returns the samples' named features standardised by their
// weighted mean and standard deviation, and a term per feature holding
// them.
func standardise(samples []EvidenceSample, features []string, wsum float64) ([][]float64, []EvidenceTerm, error) {
	idx := make([]int, len(features))
	for j, f := range features {
		i, ok := evidenceIndex[f]
		if !ok {
			return nil, nil, fmt.Errorf("%w: unknown feature %q", ErrEvidence, f)
		}
		idx[j] = i
	}
	k := len(features)
	mean, scale := make([]float64, k), make([]float64, k)
	for _, s := range samples {
		for j, i := range idx {
			mean[j] += s.Weight * s.X[i]
		}
	}
	for j := range mean {
		mean[j] /= wsum
	}
	for _, s := range samples {
		for j, i := range idx {
			d := s.X[i] - mean[j]
			scale[j] += s.Weight * d * d
		}
	}
	terms := make([]EvidenceTerm, k)
	for j := range scale {
		scale[j] = math.Sqrt(scale[j] / wsum)
		if scale[j] < 1e-9 {
			scale[j] = 1
		}
		terms[j] = EvidenceTerm{Feature: features[j], Mean: mean[j], Scale: scale[j]}
	}
	z := make([][]float64, len(samples))
	for n, s := range samples {
		z[n] = make([]float64, k)
		for j, i := range idx {
			z[n][j] = (s.X[i] - mean[j]) / scale[j]
		}
	}
	return z, terms, nil
}

// maxLogTemp bounds the temperature's log (e^±3: from a twentieth to
// twenty times the log-odds), so a catalog far outside what the map was
// fitted on cannot make its probabilities all 0 or 1.
const maxLogTemp = 3

func clampTemp(u float64) float64 { return math.Max(-maxLogTemp, math.Min(maxLogTemp, u)) }

// LogLoss is the weighted mean negative log-likelihood of the samples
// under e.
func (e *Evidence) LogLoss(samples []EvidenceSample) float64 {
	var f, w float64
	for _, s := range samples {
		p := math.Min(math.Max(e.Prob(s.X), 1e-12), 1-1e-12)
		if s.Needed {
			f -= s.Weight * math.Log(p)
		} else {
			f -= s.Weight * math.Log(1-p)
		}
		w += s.Weight
	}
	return f / w
}

// Features returns the names of the features e weighs.
func (e *Evidence) Features() []string {
	var out []string
	for _, t := range e.Terms {
		out = append(out, t.Feature)
	}
	return slices.Clip(out)
}
