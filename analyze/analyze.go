// Package analyze is prompt analysis for hubs: which categories a prompt
// needs with next-step guidance (Analyze, with a keyword-only fallback when
// the model fails), and which contexts a message touches (DetectContexts).
package analyze

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/tracing"
	"github.com/classifierd/classifierd/policy"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

// Config tunes the analyzer. Zero values take defaults.
type Config struct {
	Limits request.Limits
	// MetaCategory names the category of meta tools (default "meta").
	MetaCategory string
}

func (c Config) withDefaults() Config {
	c.Limits = c.Limits.WithDefaults()
	if c.MetaCategory == "" {
		c.MetaCategory = request.DefaultMetaCategory
	}
	return c
}

// Analyzer answers the hub's prompt analysis and context detection. It is
// immutable after New and safe for concurrent use.
type Analyzer struct {
	policy.Base
	cfg Config
}

// New returns a Analyzer over rk, deciding with cal (the index's calibration).
func New(rk *rank.Ranker, cal calibrate.Calibration, cfg Config) *Analyzer {
	cfg = cfg.withDefaults()
	return &Analyzer{Base: policy.New(rk, cal, cfg.Limits), cfg: cfg}
}

// Analysis is the answer to a hub's analyze_prompt: which categories a
// prompt needs, how sure we are, and what the hub should do next.
type Analysis struct {
	Categories []string
	Scores     []classify.Scored
	Confidence float64
	Reasoning  string
	Warning    string
	Suggestion string
	NextStep   string
	// Ignored lists names in the request's valid categories that the
	// catalog lacks: each once, at most MaxIgnored of them, each clipped
	// to 64 bytes (Warning says how many more there were).
	Ignored []string
	// Degraded is true when inference failed and keywords decided.
	Degraded bool
}

// AnalyzeQuery is an analyze_prompt request.
type AnalyzeQuery struct {
	Prompt  string
	Context string
	// Valid restricts the answer; empty means every catalog category.
	Valid []string
	// Scored, when set, is handed the prompt's turns once they are
	// embedded and scored (rank.Ranker.Dense), with the prompt's vector,
	// before the categories are decided: what else is ranked for the
	// prompt (the servers a report of it learns from, route's
	// DescribeTurns) comes from the same pass as the answer. It must not
	// keep ts. Not called when the answer comes from keywords.
	Scored func(ts []rank.Turn, vec []float32)
}

// Confidence bands of analyze_prompt.
const (
	bandProceed = 0.7
	bandRefine  = 0.5
	// degradedCap bounds the confidence of a keyword-only answer.
	degradedCap = 0.4
	// contextWeight is the weight of earlier conversation against the prompt.
	contextWeight = 0.5
)

// EmptyPromptReasoning is the fixed reasoning for an empty prompt, which
// hubs rely on.
const EmptyPromptReasoning = "Empty or invalid prompt"

// Analyze answers analyze_prompt. An empty prompt is not an error: it gets
// the meta category with confidence 0. If the model fails at run time the
// answer comes from keyword matching with Degraded set.
func (c *Analyzer) Analyze(ctx context.Context, q AnalyzeQuery) (Analysis, error) {
	if err := request.CheckNames("valid_categories", len(q.Valid)); err != nil {
		return Analysis{}, err
	}
	valid, ignored := c.validCategories(q.Valid)
	meta := c.cfg.MetaCategory
	if request.Blank(q.Prompt) {
		return Analysis{Categories: []string{meta}, Reasoning: EmptyPromptReasoning, Ignored: ignored.names,
			Warning: ignored.warning(), NextStep: nextStep(0)}, nil
	}
	if err := c.cfg.Limits.CheckText("prompt", q.Prompt); err != nil {
		return Analysis{}, err
	}
	if q.Context != "" && len(q.Context) > c.cfg.Limits.MaxTextBytes {
		return Analysis{}, fmt.Errorf("%w: context is %d bytes, limit %d", request.ErrTextTooLong, len(q.Context), c.cfg.Limits.MaxTextBytes)
	}
	ts := rank.Needs(q.Prompt)
	if strings.TrimSpace(q.Context) != "" {
		ts = append(ts, rank.Turn{Text: q.Context, Weight: contextWeight, Context: true})
	}
	var a Analysis
	cs, err := c.score(ctx, ts, valid, q.Scored)
	switch {
	case err == nil:
		_, sp := tracing.Start(ctx, tracing.Calibrate)
		a = c.analyzeDense(cs, valid)
		sp.End()
	case ctx.Err() != nil:
		return Analysis{}, ctx.Err()
	default:
		a = c.analyzeKeywords(ts, valid)
		a.Degraded = true
		a.Reasoning = fmt.Sprintf("degraded: model unavailable (%s); %s", errorKind(err), a.Reasoning)
	}
	a.Ignored = ignored.names
	c.applyBands(&a)
	if w := ignored.warning(); w != "" {
		if a.Warning != "" {
			a.Warning += "; "
		}
		a.Warning += w
	}
	return a, nil
}

// errorKind names an inference failure without its details (which could
// echo input).
func errorKind(err error) string {
	var k interface{ Kind() string }
	if errors.As(err, &k) {
		return k.Kind()
	}
	return "inference error"
}

// MaxIgnored is how many unknown valid_categories an answer repeats: a
// hub needs to see that its list and the catalog disagree, and a few
// names show how; a request of many unknown names is not echoed back
// whole (100,000 of them made a 2 MB answer).
const MaxIgnored = 16

// ignored is the unknown names of a request: the first MaxIgnored
// distinct ones (clipped), and how many more distinct ones there were.
type ignored struct {
	names []string
	more  int
}

func (ig ignored) warning() string {
	if len(ig.names) == 0 {
		return ""
	}
	w := fmt.Sprintf("ignored unknown categories: %s", strings.Join(ig.names, ", "))
	if ig.more > 0 {
		w += fmt.Sprintf(" and %d more", ig.more)
	}
	return w
}

func (c *Analyzer) validCategories(names []string) (map[int]bool, ignored) {
	valid := map[int]bool{}
	var ig ignored
	seen := map[string]bool{}
	for _, n := range names {
		if li, ok := c.Idx.Lookup(index.KindCategory, n); ok {
			valid[li] = true
			continue
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		if len(ig.names) < MaxIgnored {
			ig.names = append(ig.names, rank.Clip(n, 64))
		} else {
			ig.more++
		}
	}
	if len(valid) == 0 {
		for _, li := range c.Rk.Categories() {
			valid[li] = true
		}
	}
	return valid, ig
}

// score embeds the turns (the embed spans) and scores every category
// against them (the score span): each category's confidence, the best of
// the request's and of each part's that the request's best category does
// not explain (categoryProbs).
func (c *Analyzer) score(ctx context.Context, ts []rank.Turn, valid map[int]bool, scored func([]rank.Turn, []float32)) ([]catProb, error) {
	vecs, err := c.Rk.Vectors(ctx, ts)
	if err != nil {
		return nil, err
	}
	_, sp := tracing.Start(ctx, tracing.Score)
	defer sp.End()
	if ts, err = c.Rk.Dense(ts, vecs); err != nil {
		return nil, err
	}
	if scored != nil {
		scored(ts, vecs[0])
	}
	cs := c.categoryProbs(ts, valid)
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyTurns.Int(len(ts)), tracing.KeyVectors.Int(c.Idx.NumVectors()), tracing.KeyLabels.Int(len(cs)))
	}
	return cs, nil
}

// catProb is one category's score and confidence.
type catProb struct {
	s rank.Score
	p float64
	// part is the part of the request the confidence comes from ("": the
	// request).
	part string
}

// explainedMargin is how close the request's best category must come to
// a part's best, within that part, for the part to count as explained by
// it: "list recent issues" after "Check my GitHub notifications" asks for
// GitHub issues, not for another category that matches "issues" as well.
const explainedMargin = 0.05

// categoryProbs is the confidence of each valid category, most confident
// first: the calibrated relevance (CategoriesMulti, by score and gap below
// the best) in the request with its earlier context, or in one part of a
// compound request whose best category the request's best does not
// explain (it scores more than explainedMargin below it there), whichever
// is higher. A part the request's best explains adds nothing: a second
// category is a second need only when the request's best cannot answer it.
func (c *Analyzer) categoryProbs(ts []rank.Turn, valid map[int]bool) []catProb {
	cats := c.Rk.Categories()
	var whole []rank.Turn
	var parts []int
	for i := range ts {
		if ts[i].Part {
			parts = append(parts, i)
		} else {
			whole = append(whole, ts[i])
		}
	}
	ws := c.Rk.ScoreLabels(cats, whole)
	top := -1
	for j, s := range ws {
		if valid[s.Label] && (top < 0 || s.Score > ws[top].Score) {
			top = j
		}
	}
	out := make([]catProb, 0, len(cats))
	for _, s := range ws {
		if !valid[s.Label] || top < 0 {
			continue
		}
		out = append(out, catProb{s: s, p: c.Cal.CategoriesMulti.ProbAt(s.Score, ws[top].Score-s.Score)})
	}
	for _, pi := range parts {
		ps := c.Rk.ScoreLabels(cats, ts[pi:pi+1])
		best := -1
		for j, s := range ps {
			if valid[s.Label] && (best < 0 || s.Score > ps[best].Score) {
				best = j
			}
		}
		if best < 0 || ps[top].Score >= ps[best].Score-explainedMargin {
			continue
		}
		for k := range out {
			j := slices.IndexFunc(ps, func(s rank.Score) bool { return s.Label == out[k].s.Label })
			if p := c.Cal.CategoriesMulti.ProbAt(ps[j].Score, ps[best].Score-ps[j].Score); p > out[k].p {
				out[k] = catProb{s: ps[j], p: p, part: ts[pi].Text}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b catProb) int {
		if a.p != b.p {
			if a.p > b.p {
				return -1
			}
			return 1
		}
		if a.s.Score > b.s.Score {
			return -1
		}
		if a.s.Score < b.s.Score {
			return 1
		}
		return 0
	})
	return out
}

// analyzeDense answers with the set of categories of best expected F1
// under their confidences (calibrate.BestF1Size: several needs give
// several), most confident first.
func (c *Analyzer) analyzeDense(cs []catProb, valid map[int]bool) Analysis {
	var a Analysis
	// The answer's confidence is that of the best category naming a real
	// need: the meta category is the fallback for prompts too vague to act
	// on, so a prompt that only matches meta ("help me with my project")
	// gets meta with a low confidence, as hubs expect. Only when meta is
	// the one valid category does its own probability count.
	oneValid := len(valid) == 1
	var best *catProb
	ps := make([]float64, len(cs))
	for i := range cs {
		ps[i] = cs[i].p
		isMeta := c.Idx.Labels[cs[i].s.Label].ID == c.cfg.MetaCategory
		if best == nil && (!isMeta || oneValid) {
			best = &cs[i]
			a.Confidence = cs[i].p
		}
	}
	if best == nil {
		a.Reasoning = "no categories to choose from"
		return a
	}
	n := calibrate.BestF1Size(ps, request.MaxCategories)
	for _, x := range cs[:n] {
		id := c.Idx.Labels[x.s.Label].ID
		ev := c.Rk.Evidence(x.s)
		if x.part != "" {
			ev = fmt.Sprintf("answers the need %q; %s", rank.Clip(x.part, 60), ev)
		}
		a.Categories = append(a.Categories, id)
		a.Scores = append(a.Scores, classify.Scored{Label: x.s.Label, ID: id, Confidence: x.p, Score: x.s.Score, Evidence: ev, Parts: c.Rk.Parts(x.s)})
	}
	if len(a.Categories) == 0 {
		a.Reasoning = fmt.Sprintf("no category is likely enough to be needed; closest %s %.2f: %s", c.Idx.Labels[best.s.Label].ID, a.Confidence, c.Rk.Evidence(best.s))
		return a
	}
	var parts []string
	for _, s := range a.Scores {
		parts = append(parts, fmt.Sprintf("%s %.2f (%s)", s.ID, s.Confidence, s.Evidence))
	}
	a.Reasoning = strings.Join(parts, "; ")
	if a.Categories[0] == c.cfg.MetaCategory && !oneValid && !slices.Contains(a.Categories, c.Idx.Labels[best.s.Label].ID) {
		a.Reasoning += fmt.Sprintf("; no specific tool category: closest %s %.2f", c.Idx.Labels[best.s.Label].ID, a.Confidence)
	}
	return a
}

// analyzeKeywords is the degraded path: catalog keywords and patterns only.
func (c *Analyzer) analyzeKeywords(ts []rank.Turn, valid map[int]bool) Analysis {
	var a Analysis
	type hit struct {
		label int
		boost float64
		ev    string
	}
	var hits []hit
	for _, li := range c.Rk.Categories() {
		if !valid[li] {
			continue
		}
		var best hit
		for i := range ts {
			t := &ts[i]
			b, ev := c.Rk.Lexical(li, t)
			if b*t.Weight > best.boost {
				best = hit{label: li, boost: b * t.Weight, ev: ev}
			}
		}
		if best.boost > 0 {
			hits = append(hits, best)
		}
	}
	sort.SliceStable(hits, func(x, y int) bool { return hits[x].boost > hits[y].boost })
	var parts []string
	for _, h := range hits {
		if len(a.Categories) >= request.MaxCategories {
			break
		}
		conf := math.Min(degradedCap, h.boost/c.Cal.Fusion.Pattern*degradedCap)
		id := c.Idx.Labels[h.label].ID
		a.Categories = append(a.Categories, id)
		a.Scores = append(a.Scores, classify.Scored{Label: h.label, ID: id, Confidence: conf, Evidence: h.ev})
		parts = append(parts, fmt.Sprintf("%s (%s)", id, h.ev))
		a.Confidence = math.Max(a.Confidence, conf)
	}
	if len(parts) == 0 {
		a.Reasoning = "no keyword matched"
	} else {
		a.Reasoning = "keywords: " + strings.Join(parts, "; ")
	}
	return a
}

// applyBands adds meta first below 0.5 with a warning and suggestion, and
// next-step guidance by confidence band. A catalog without a meta category
// (the proxy's, made of live servers) gets the warning only: a category it
// lacks would be refused when the hub exposes it.
func (c *Analyzer) applyBands(a *Analysis) {
	meta := c.cfg.MetaCategory
	if a.Confidence < bandRefine {
		if _, ok := c.Idx.Lookup(index.KindCategory, meta); ok && (len(a.Categories) == 0 || a.Categories[0] != meta) {
			cats := []string{meta}
			for _, x := range a.Categories {
				if x != meta {
					cats = append(cats, x)
				}
			}
			a.Categories = cats
		}
		a.Warning = fmt.Sprintf("low confidence (%.2f): the prompt does not clearly match a tool category", a.Confidence)
		a.Suggestion = "ask the user what they want to do, or call analyze_prompt again with a more specific prompt"
	}
	a.NextStep = nextStep(a.Confidence)
}

func nextStep(conf float64) string {
	switch {
	case conf >= bandProceed:
		return "proceed: use the tools of the returned categories"
	case conf >= bandRefine:
		return "proceed with care: the categories may need refining after the next user message"
	default:
		return "be more specific: ask the user to clarify the task before choosing tools"
	}
}

// Context is one detected context.
type Context struct {
	ID         string
	Confidence float64
	// Kind is "pattern", "keyword" or "semantic".
	Kind     string
	Evidence string
}

// NoContextReason is DetectContexts' reason when nothing is detected.
const NoContextReason = "no_context_detected"

// DetectContexts tells which contexts (categories) a message touches, with
// the kind of evidence for each.
func (c *Analyzer) DetectContexts(ctx context.Context, text string) ([]Context, error) {
	if err := c.cfg.Limits.CheckText("text", text); err != nil {
		return nil, err
	}
	all := map[int]bool{}
	for _, li := range c.Rk.Categories() {
		all[li] = true
	}
	cs, err := c.score(ctx, rank.Needs(text), all, nil)
	if err != nil {
		return nil, err
	}
	// A context is touched when the category is in the set of best
	// expected F1 (as Analyze answers), or named by a keyword or pattern.
	ps := make([]float64, len(cs))
	for i, x := range cs {
		ps[i] = x.p
	}
	inSet := calibrate.BestF1Size(ps, request.MaxCategories)
	var out []Context
	for i, x := range cs {
		s, p := x.s, x.p
		kind := "semantic"
		switch {
		case strings.HasPrefix(s.Lex, "pattern"):
			kind = "pattern"
		case s.Lex != "":
			kind = "keyword"
		}
		if i >= inSet && kind == "semantic" {
			continue
		}
		ev := s.Lex
		if kind == "semantic" {
			ev = c.Rk.Evidence(s)
		}
		out = append(out, Context{ID: c.Idx.Labels[s.Label].ID, Confidence: p, Kind: kind, Evidence: ev})
	}
	return out, nil
}
