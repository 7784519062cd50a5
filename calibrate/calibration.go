package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Calibration is the index's score-to-probability maps and fusion weights,
// stored as JSON in the index header by gen-index. An index without one gets
// DefaultCalibration, whose numbers are a documented prior, not a fit.
type Calibration struct {
	// Version is the schema version of this section (Version1); 0 in
	// indexes written before it was recorded, read the same way.
	Version int `json:"version,omitempty"`
	// Categories is the single-label map for Classify: a temperature-scaled
	// softmax over categories with an out-of-scope logit.
	Categories SingleLabel `json:"categories"`
	// CategoriesMulti is the per-category relevance map used when a prompt
	// may need several categories (Route, AnalyzePrompt, DetectContexts).
	CategoriesMulti Binary `json:"categories_multi"`
	// Servers and Tools are the per-label relevance maps for Route.
	Servers Binary `json:"servers"`
	Tools   Binary `json:"tools"`
	// ServerEvidence, when set, maps each candidate server's evidence (its
	// scores in the request and in each of the request's needs, margins,
	// ranks, catalog size) to the probability that it is needed, in place
	// of Servers. It is learnt across many catalogs and set for a catalog
	// without examples of its own (indexbuild); Servers still gives the
	// confidence where a request is scored without its needs.
	ServerEvidence *Evidence `json:"server_evidence,omitempty"`
	Fusion         Fusion    `json:"fusion"`
	// Head, when set, is a linear classifier over the categories (in index
	// order) whose log-probabilities, times HeadWeight, add to each
	// category's score in single-label classification.
	Head       *Head   `json:"head,omitempty"`
	HeadWeight float64 `json:"head_weight,omitempty"`
	// Fitted is false for DefaultCalibration.
	Fitted bool `json:"fitted"`
	// FusionFitted is set when gen-index chose the tool fusion weights on
	// the catalog's tool examples rather than keeping the defaults.
	FusionFitted bool `json:"fusion_fitted,omitempty"`
}

// SingleLabel is p(label) = exp(s/T) / (exp(OOS/T) + Σ exp(s_j/T)): the
// probability that the label is right given the request is in scope. The
// default Threshold applies to p(label) × p(in scope).
// Whether it is in scope at all is InScope's job: a Platt map from the best
// raw score, fitted on held-out examples (in scope) against examples whose
// whole label was held out (out of scope, what an unseen intent looks like).
type SingleLabel struct {
	Method    string  `json:"method"`
	T         float64 `json:"t"`
	OOS       float64 `json:"oos"`
	InScope   Binary  `json:"in_scope"`
	Threshold float64 `json:"threshold"`
	ECEBefore float64 `json:"ece_before,omitempty"`
	ECEAfter  float64 `json:"ece_after,omitempty"`
	Samples   int     `json:"samples,omitempty"`
	// Reliability is the reliability diagram of the fitted map on the
	// fitting samples (ECEBins bins); absent in indexes built before it.
	Reliability []Bin `json:"reliability,omitempty"`
}

// Binary maps one label's score to a probability of relevance: Platt
// p = 1/(1+exp(A*s+B)), or with method "platt-gap"
// p = 1/(1+exp(A*s+G*gap+B)) where gap is how far the score falls below
// the best of its answer, or an isotonic step map when that calibrated
// better in cross-validation.
type Binary struct {
	Method    string    `json:"method"`
	A         float64   `json:"a"`
	B         float64   `json:"b"`
	G         float64   `json:"g,omitempty"`
	Isotonic  *isotonic `json:"isotonic,omitempty"`
	Threshold float64   `json:"threshold"`
	ECEBefore float64   `json:"ece_before,omitempty"`
	ECEAfter  float64   `json:"ece_after,omitempty"`
	Samples   int       `json:"samples,omitempty"`
	// SharedFallback lists labels with too few examples for their own map.
	SharedFallback []string `json:"shared_fallback,omitempty"`
	// Reliability is the reliability diagram of the chosen map on held-out
	// folds (ECEBins bins); absent in indexes built before it.
	Reliability []Bin `json:"reliability,omitempty"`
}

// Fusion weighs evidence added to the dense cosine score.
type Fusion struct {
	// Pattern, Name and Keyword are added to the dense score when a
	// category pattern matches, the text names the tool or server, or a
	// catalog keyword occurs (at word boundaries).
	Pattern float64 `json:"pattern"`
	Name    float64 `json:"name"`
	Keyword float64 `json:"keyword"`
	// ServerFromTools is the weight of a server's best tool in the server's score.
	ServerFromTools float64 `json:"server_from_tools"`
	// ServerFromCategory is the weight of a server's best category in the server's score.
	ServerFromCategory float64 `json:"server_from_category"`
	// ToolFromServer is the weight of the server's score in each tool's score.
	ToolFromServer float64 `json:"tool_from_server"`
	// ContextPenalty is subtracted from the scores of the previous turn,
	// plus AssistantPenalty for assistant turns and ContextDecay per turn
	// further back, plus ClarityPenalty scaled by how clearly the current
	// turn alone picks a server (0 at a server probability of ClearFrom, 1
	// at ClearFrom+ClearSpan).
	ContextPenalty   float64 `json:"context_penalty"`
	AssistantPenalty float64 `json:"assistant_penalty"`
	ContextDecay     float64 `json:"context_decay"`
	ClarityPenalty   float64 `json:"clarity_penalty"`
	ClearFrom        float64 `json:"clear_from"`
	ClearSpan        float64 `json:"clear_span"`
	// A tool's dense score pools its vectors: (1-ToolCentroid)·best vector
	// + ToolCentroid·centroid (the normalised mean of its description and
	// examples) + ToolDescription·description, divided by
	// 1+ToolDescription. Few-shot examples are noisy one by one; their mean
	// is a steadier prototype, and the description says what the tool is.
	// A prompt that is nearly one of the tool's own examples keeps most of
	// that match: the pooled score is at least best − ToolExactGap.
	ToolCentroid    float64 `json:"tool_centroid"`
	ToolDescription float64 `json:"tool_description"`
	ToolExactGap    float64 `json:"tool_exact_gap"`
	// BM25 is the weight of a tool's Okapi BM25 score (k1 1.2, b 0.75)
	// over its name, description and keywords, added to its score.
	BM25 float64 `json:"bm25"`
	// ToolBreadth corrects raw cosine for how broad a tool is (see
	// breadth): ToolBreadth × (mean breadth − the tool's breadth) is added
	// to its score. 0 unless fitted on the catalog's tool examples.
	ToolBreadth float64 `json:"tool_breadth,omitempty"`
	// ExampleBM25 weighs the best BM25 score of any one of a tool's
	// examples, each example its own document (see exampleBM25). 0 unless
	// fitted on the catalog's tool examples.
	ExampleBM25 float64 `json:"example_bm25,omitempty"`
}

// DefaultCalibration is used for indexes built without calibration. Its
// numbers put p=0.5 near a cosine of 0.55 for use-lite-en-like models; they
// are a prior, not a measurement, and GetIndexInfo reports method "prior".
func DefaultCalibration() Calibration {
	return Calibration{
		Version: Version1,
		Categories: SingleLabel{Method: MethodPrior, T: 0.05, OOS: -10, Threshold: 0.5,
			InScope: Binary{Method: MethodPrior, A: -14, B: 6.3, Threshold: 0.5}},
		CategoriesMulti: Binary{Method: MethodPrior, A: -14, B: 7.7, Threshold: 0.5},
		Servers:         Binary{Method: MethodPrior, A: -14, B: 7.7, Threshold: 0.5},
		Tools:           Binary{Method: MethodPrior, A: -14, B: 7.7, Threshold: 0.5},
		Fusion: Fusion{Pattern: 0.3, Name: 0.2, Keyword: 0.12, ServerFromTools: 1, ServerFromCategory: 0.9, ToolFromServer: 0.15,
			ContextPenalty: 0, AssistantPenalty: 0.03, ContextDecay: 0.03, ClarityPenalty: 0.6, ClearFrom: 0.4, ClearSpan: 0.4,
			ToolCentroid: 0.5, ToolDescription: 0.7, ToolExactGap: 0.15, BM25: 0.018},
	}
}

// MethodPrior is the method of a map that was not fitted: one of
// DefaultCalibration's documented priors.
const MethodPrior = "prior"

// Version1 is the calibration schema this build writes and reads.
const Version1 = 1

// ErrVersion reports a calibration section written by a newer build.
var ErrVersion = errors.New("calibrate: calibration written by a newer classifierd")

// UnmarshalJSON decodes and validates a calibration section, so an index
// header holding one is checked when the index loads. Fields an older
// index lacks keep their meaning in that index: the tool pooling and BM25
// weights did not exist then, so absent means off, not the default.
func (c *Calibration) UnmarshalJSON(data []byte) error {
	type plain Calibration // no UnmarshalJSON: no recursion
	v := plain(DefaultCalibration())
	v.Fusion.ToolCentroid, v.Fusion.ToolDescription, v.Fusion.ToolExactGap, v.Fusion.BM25 = 0, 0, 0, 0
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("calibrate: section: %w", err)
	}
	if v.Version > Version1 {
		return fmt.Errorf("%w: version %d, this build reads up to %d (rebuild the index with this gen-index, or upgrade)", ErrVersion, v.Version, Version1)
	}
	if err := Calibration(v).Validate(); err != nil {
		return err
	}
	*c = Calibration(v)
	return nil
}

// OrDefault is the calibration an index header holds, or DefaultCalibration
// for an index built without one.
func OrDefault(c *Calibration) Calibration {
	if c == nil {
		return DefaultCalibration()
	}
	return *c
}

func (c Calibration) Validate() error {
	finite := func(name string, vs ...float64) error {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("calibrate: %s is not finite", name)
			}
		}
		return nil
	}
	for name, b := range map[string]Binary{"categories_multi": c.CategoriesMulti, "servers": c.Servers, "tools": c.Tools, "in_scope": c.Categories.InScope} {
		if m := b.Isotonic; m != nil {
			if len(m.X) == 0 || len(m.X) != len(m.Y) || !sort.Float64sAreSorted(m.X) {
				return fmt.Errorf("calibrate: %s isotonic map is malformed", name)
			}
			for _, y := range m.Y {
				if !(y >= 0 && y <= 1) {
					return fmt.Errorf("calibrate: %s isotonic value %v outside [0,1]", name, y)
				}
			}
		}
	}
	if c.ServerEvidence != nil {
		if err := c.ServerEvidence.Validate(); err != nil {
			return err
		}
	}
	if c.Categories.T <= 0 {
		return fmt.Errorf("calibrate: categories.t %v must be positive", c.Categories.T)
	}
	for name, v := range map[string][]float64{
		"categories":       {c.Categories.T, c.Categories.OOS, c.Categories.Threshold, c.Categories.InScope.A, c.Categories.InScope.B},
		"categories_multi": {c.CategoriesMulti.A, c.CategoriesMulti.B, c.CategoriesMulti.Threshold},
		"servers":          {c.Servers.A, c.Servers.B, c.Servers.G, c.Servers.Threshold},
		"tools":            {c.Tools.A, c.Tools.B, c.Tools.G, c.Tools.Threshold},
	} {
		if err := finite(name, v...); err != nil {
			return err
		}
	}
	return nil
}

// Probabilities returns the calibrated distribution over labels; the
// remainder (1 - Σ) is the out-of-scope mass.
func (s SingleLabel) Probabilities(raw []float64) []float64 {
	out := make([]float64, len(raw))
	m := s.OOS / s.T
	for _, r := range raw {
		m = math.Max(m, r/s.T)
	}
	z := math.Exp(s.OOS/s.T - m)
	for i, r := range raw {
		out[i] = math.Exp(r/s.T - m)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// Prob maps one score to a probability of relevance, for the best label
// of an answer (gap 0).
func (b Binary) Prob(score float64) float64 { return b.ProbAt(score, 0) }

// ProbAt maps a score that falls gap below the best of its answer to a
// probability of relevance.
func (b Binary) ProbAt(score, gap float64) float64 {
	if math.IsInf(score, -1) {
		return 0
	}
	if b.Isotonic != nil {
		return b.Isotonic.predict(score)
	}
	return 1 / (1 + math.Exp(b.A*score+b.G*gap+b.B))
}
