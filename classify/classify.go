// Package classify is single-label classification: it ranks the
// categories of one text with rank's scores, the linear head and the
// calibrated softmax, and abstains below the threshold. Scored, the ranked
// label of every answer, is defined here.
package classify

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/internal/tracing"
	"github.com/classifierd/classifierd/policy"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

// Config tunes the classifier. Zero values take defaults.
type Config struct {
	Limits request.Limits
	// DefaultTopK is Classify's top_k when the request leaves it 0 (default 3).
	DefaultTopK int
}

func (c Config) withDefaults() Config {
	c.Limits = c.Limits.WithDefaults()
	if c.DefaultTopK <= 0 {
		c.DefaultTopK = 3
	}
	return c
}

// Classifier ranks the categories of one text (single-label). It is
// immutable after New and safe for concurrent use.
type Classifier struct {
	policy.Base
	cfg Config
}

// New returns a Classifier over rk, deciding with cal (the index's calibration).
func New(rk *rank.Ranker, cal calibrate.Calibration, cfg Config) *Classifier {
	cfg = cfg.withDefaults()
	return &Classifier{Base: policy.New(rk, cal, cfg.Limits), cfg: cfg}
}

// Scored is one ranked label.
type Scored struct {
	Label      int // index into the index's labels
	ID         string
	Confidence float64
	Score      float64 // fused raw score
	Evidence   string
	// Parts is Evidence by kind.
	Parts rank.Parts
}

// Result is a Classify answer.
type Result struct {
	Categories []Scored
	Abstained  bool
	Reasoning  string
	// InScope is the calibrated probability that the text belongs to any
	// category at all. A category is returned when its confidence times
	// InScope reaches the threshold.
	InScope float64
}

// Classify ranks categories for text.
func (c *Classifier) Classify(ctx context.Context, text string, topK int, minConf *float32) (Result, error) {
	if err := c.cfg.Limits.CheckText("text", text); err != nil {
		return Result{}, err
	}
	k, err := c.cfg.Limits.CheckK("top_k", topK, c.cfg.DefaultTopK)
	if err != nil {
		return Result{}, err
	}
	if err := request.CheckMinConf(minConf); err != nil {
		return Result{}, err
	}
	if len(c.Rk.Categories()) == 0 {
		return Result{}, fmt.Errorf("%w: no categories (the catalog had none)", rank.ErrNoLabels)
	}
	turns := []rank.Turn{{Text: text, Weight: 1}}
	vecs, err := c.Rk.Vectors(ctx, turns)
	if err != nil {
		return Result{}, err
	}
	_, sp := tracing.Start(ctx, tracing.Score)
	turns, err = c.Rk.Dense(turns, vecs)
	if err != nil {
		sp.End()
		return Result{}, err
	}
	cs := c.Rk.CategoryScores(turns)
	c.addHead(cs, turns[0].Vec())
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyTurns.Int(len(turns)), tracing.KeyVectors.Int(c.Idx.NumVectors()), tracing.KeyLabels.Int(len(cs)))
	}
	sp.End()
	thr := c.Cal.Categories.Threshold
	if minConf != nil {
		thr = float64(*minConf)
	}
	_, sp = tracing.Start(ctx, tracing.Calibrate)
	res := c.rankSingle(cs, k, thr)
	sp.End()
	return res, nil
}

// addHead adds the linear head's weighted log-probabilities to category
// scores (single-label only).
func (c *Classifier) addHead(cs []rank.Score, v []float32) {
	h := c.Cal.Head
	if h == nil || c.Cal.HeadWeight == 0 || len(h.W) != len(cs) || len(v) != len(h.W[0]) {
		return
	}
	lp := h.LogProbs(v)
	for j := range cs {
		cs[j].Score += c.Cal.HeadWeight * lp[j]
	}
}

// rankSingle turns category scores into a single-label answer: calibrated
// probabilities over categories (plus an out-of-scope mass), top k above
// the threshold.
func (c *Classifier) rankSingle(cs []rank.Score, k int, thr float64) Result {
	raw := make([]float64, len(cs))
	for i, s := range cs {
		raw[i] = s.Score
	}
	probs := c.Cal.Categories.Probabilities(raw)
	order := argsort(probs)
	var res Result
	inScope := 1.0
	if len(order) > 0 {
		inScope = c.Cal.Categories.InScope.Prob(raw[order[0]])
	}
	for _, i := range order {
		if len(res.Categories) >= k {
			break
		}
		if probs[i]*inScope < thr {
			break
		}
		res.Categories = append(res.Categories, Scored{Label: cs[i].Label, ID: c.Idx.Labels[cs[i].Label].ID,
			Confidence: probs[i], Score: cs[i].Score, Evidence: c.Rk.Evidence(cs[i]), Parts: c.Rk.Parts(cs[i])})
	}
	res.Abstained = len(res.Categories) == 0
	res.InScope = inScope
	res.Reasoning = c.explain(cs, probs, order, thr, inScope)
	return res
}

// explain is the deterministic reasoning: what matched, how strongly, and
// the margin to the runner-up.
func (c *Classifier) explain(cs []rank.Score, probs []float64, order []int, thr, inScope float64) string {
	if len(order) == 0 {
		return "no labels"
	}
	best := order[0]
	id := c.Idx.Labels[cs[best].Label].ID
	var b strings.Builder
	if probs[best]*inScope < thr {
		fmt.Fprintf(&b, "abstained: best %s at %.2f with in-scope probability %.2f is below %.2f (%s)",
			id, probs[best], inScope, thr, c.Rk.Evidence(cs[best]))
		return b.String()
	}
	fmt.Fprintf(&b, "%s %.2f: %s", id, probs[best], c.Rk.Evidence(cs[best]))
	if len(order) > 1 {
		r := order[1]
		fmt.Fprintf(&b, "; runner-up %s %.2f (margin %.2f)", c.Idx.Labels[cs[r].Label].ID, probs[r], probs[best]-probs[r])
	}
	return b.String()
}

func argsort(v []float64) []int {
	o := make([]int, len(v))
	for i := range o {
		o[i] = i
	}
	sort.SliceStable(o, func(a, b int) bool { return v[o[a]] > v[o[b]] })
	return o
}
