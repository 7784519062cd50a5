package classify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/index"
)

// Analysis is the answer to a hub's analyze_prompt: which categories a
// prompt needs, how sure we are, and what the hub should do next.
type Analysis struct {
	Categories []string
	Scores     []Scored
	Confidence float64
	Reasoning  string
	Warning    string
	Suggestion string
	NextStep   string
	// Ignored lists names in the request's valid categories that the catalog lacks.
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
func (c *Classifier) Analyze(ctx context.Context, q AnalyzeQuery) (Analysis, error) {
	valid, ignored := c.validCategories(q.Valid)
	meta := c.cfg.MetaCategory
	if blank(q.Prompt) {
		return Analysis{Categories: []string{meta}, Reasoning: EmptyPromptReasoning, Ignored: ignored,
			Warning: ignoredWarning(ignored), NextStep: nextStep(0)}, nil
	}
	if err := c.CheckText("prompt", q.Prompt); err != nil {
		return Analysis{}, err
	}
	if q.Context != "" && len(q.Context) > c.cfg.Limits.MaxTextBytes {
		return Analysis{}, fmt.Errorf("%w: context is %d bytes, limit %d", ErrTextTooLong, len(q.Context), c.cfg.Limits.MaxTextBytes)
	}
	ts := c.needTurns(q.Prompt)
	if strings.TrimSpace(q.Context) != "" {
		ts = append(ts, turn{text: q.Context, weight: contextWeight, context: true})
	}
	var a Analysis
	scored, err := c.embedTurns(ctx, ts)
	switch {
	case err == nil:
		a = c.analyzeDense(scored, valid)
	case ctx.Err() != nil:
		return Analysis{}, ctx.Err()
	default:
		a = c.analyzeKeywords(ts, valid)
		a.Degraded = true
		a.Reasoning = fmt.Sprintf("degraded: model unavailable (%s); %s", errorKind(err), a.Reasoning)
	}
	a.Ignored = ignored
	c.applyBands(&a)
	if w := ignoredWarning(ignored); w != "" {
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

func ignoredWarning(ignored []string) string {
	if len(ignored) == 0 {
		return ""
	}
	return fmt.Sprintf("ignored unknown categories: %s", strings.Join(ignored, ", "))
}

func (c *Classifier) validCategories(names []string) (map[int]bool, []string) {
	valid := map[int]bool{}
	var ignored []string
	for _, n := range names {
		if li, ok := c.idx.Lookup(index.KindCategory, n); ok {
			valid[li] = true
		} else {
			ignored = append(ignored, clip(n, 64))
		}
	}
	if len(valid) == 0 {
		for _, li := range c.cats {
			valid[li] = true
		}
	}
	return valid, ignored
}

// analyzeDense picks every valid category whose calibrated relevance
// reaches the multi-label threshold (several needs give several), best
// first.
func (c *Classifier) analyzeDense(ts []turn, valid map[int]bool) Analysis {
	cs := c.categoryScores(ts)
	cs = sortedByScore(cs)
	thr := c.cal.CategoriesMulti.Threshold
	var a Analysis
	var best *labelScore
	// The answer's confidence is that of the best category naming a real
	// need: the meta category is the fallback for prompts too vague to act
	// on, so a prompt that only matches meta ("help me with my project")
	// gets meta with a low confidence, as hubs expect. Only when meta is
	// the one valid category does its own probability count.
	oneValid := len(valid) == 1
	for i := range cs {
		s := cs[i]
		if !valid[s.label] {
			continue
		}
		p := c.cal.CategoriesMulti.Prob(s.score)
		isMeta := c.idx.Labels[s.label].ID == c.cfg.MetaCategory
		if best == nil && (!isMeta || oneValid) {
			best = &cs[i]
			a.Confidence = p
		}
		if p >= thr && len(a.Categories) < 5 {
			a.Categories = append(a.Categories, c.idx.Labels[s.label].ID)
			a.Scores = append(a.Scores, Scored{Label: s.label, ID: c.idx.Labels[s.label].ID, Confidence: p, Score: s.score, Evidence: c.evidence(s)})
		}
	}
	if best == nil {
		a.Reasoning = "no categories to choose from"
		return a
	}
	if len(a.Categories) == 0 {
		a.Reasoning = fmt.Sprintf("no category reached %.2f; closest %s %.2f: %s", thr, c.idx.Labels[best.label].ID, a.Confidence, c.evidence(*best))
		return a
	}
	var parts []string
	for _, s := range a.Scores {
		parts = append(parts, fmt.Sprintf("%s %.2f (%s)", s.ID, s.Confidence, s.Evidence))
	}
	a.Reasoning = strings.Join(parts, "; ")
	if a.Categories[0] == c.cfg.MetaCategory && !oneValid && !slices.Contains(a.Categories, c.idx.Labels[best.label].ID) {
		a.Reasoning += fmt.Sprintf("; no specific tool category: closest %s %.2f", c.idx.Labels[best.label].ID, a.Confidence)
	}
	return a
}

// analyzeKeywords is the degraded path: catalog keywords and patterns only.
func (c *Classifier) analyzeKeywords(ts []turn, valid map[int]bool) Analysis {
	var a Analysis
	type hit struct {
		label int
		boost float64
		ev    string
	}
	var hits []hit
	for _, li := range c.cats {
		if !valid[li] {
			continue
		}
		var best hit
		for i := range ts {
			t := &ts[i]
			t.lower = strings.ToLower(t.text)
			b, ev := c.lex.evidence(li, t, &c.cal.Fusion)
			if b*t.weight > best.boost {
				best = hit{label: li, boost: b * t.weight, ev: ev}
			}
		}
		if best.boost > 0 {
			hits = append(hits, best)
		}
	}
	sort.SliceStable(hits, func(x, y int) bool { return hits[x].boost > hits[y].boost })
	var parts []string
	for _, h := range hits {
		if len(a.Categories) >= 5 {
			break
		}
		conf := math.Min(degradedCap, h.boost/c.cal.Fusion.Pattern*degradedCap)
		id := c.idx.Labels[h.label].ID
		a.Categories = append(a.Categories, id)
		a.Scores = append(a.Scores, Scored{Label: h.label, ID: id, Confidence: conf, Evidence: h.ev})
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
// next-step guidance by confidence band.
func (c *Classifier) applyBands(a *Analysis) {
	meta := c.cfg.MetaCategory
	if a.Confidence < bandRefine {
		if len(a.Categories) == 0 || a.Categories[0] != meta {
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

// needSplit separates the needs of a compound request ("read config.json
// and push it to my repo"); sentences ("Find the PDF. Can you email it to
// Sam?") are split first, by needParts.
var needSplit = regexp.MustCompile(`(?i)\s*(?:;|,\s*(?:and\s+)?then\b|\band\s+then\b|\bthen\b|\band\s+also\b|\balso\b|\bas\s+well\s+as\b|\band\b|,)\s*`)

// maxNeeds bounds the extra turns one prompt is split into.
const maxNeeds = 4

// needTurns is the prompt as one turn plus, when it joins several requests,
// one turn per part, so each need is matched on its own words.
func (c *Classifier) needTurns(prompt string) []turn {
	ts := []turn{{text: prompt, weight: 1}}
	parts := needParts(prompt)
	if len(parts) < 2 {
		return ts
	}
	for _, p := range parts {
		if len(strings.Fields(p)) < 2 {
			continue
		}
		ts = append(ts, turn{text: p, weight: needWeight, part: true})
		if len(ts) > maxNeeds {
			break
		}
	}
	if len(ts) == 2 { // one usable part is the prompt again
		return ts[:1]
	}
	return ts
}

// needParts splits a prompt into sentences (a '.', '?' or '!' followed by
// white space and an upper-case letter), then each sentence at needSplit.
func needParts(prompt string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(prompt); i++ {
		if b := prompt[i]; b != '.' && b != '?' && b != '!' {
			continue
		}
		j := i + 1
		for j < len(prompt) && (prompt[j] == ' ' || prompt[j] == '\t' || prompt[j] == '\n') {
			j++
		}
		if j > i+1 && j < len(prompt) && prompt[j] >= 'A' && prompt[j] <= 'Z' {
			parts = append(parts, needSplit.Split(prompt[start:i], -1)...)
			start = j
		}
	}
	return append(parts, needSplit.Split(prompt[start:], -1)...)
}

// needWeight is the weight of one part of a compound request.
const needWeight = 1

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
func (c *Classifier) DetectContexts(ctx context.Context, text string) ([]Context, error) {
	if err := c.CheckText("text", text); err != nil {
		return nil, err
	}
	ts, err := c.embedTurns(ctx, c.needTurns(text))
	if err != nil {
		return nil, err
	}
	cs := c.categoryScores(ts)
	cs = sortedByScore(cs)
	thr := c.cal.CategoriesMulti.Threshold
	var out []Context
	for _, s := range cs {
		p := c.cal.CategoriesMulti.Prob(s.score)
		kind := "semantic"
		switch {
		case strings.HasPrefix(s.lex, "pattern"):
			kind = "pattern"
		case s.lex != "":
			kind = "keyword"
		}
		if p < thr && kind == "semantic" {
			continue
		}
		ev := s.lex
		if kind == "semantic" {
			ev = c.evidence(s)
		}
		out = append(out, Context{ID: c.idx.Labels[s.label].ID, Confidence: p, Kind: kind, Evidence: ev})
	}
	return out, nil
}
