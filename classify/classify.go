// Package classify owns the routing and classification policy: it turns a
// prompt (and conversation) into ranked categories, servers and tools with
// confidences, an abstain decision and a short deterministic explanation,
// using an index built by gen-index and an embedding model.
package classify

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/viterin/vek/vek32"

	"github.com/classifierd/classifierd/index"
)

// Errors for bad input; the gRPC layer maps them to InvalidArgument.
var (
	ErrEmptyText     = errors.New("classify: empty text")
	ErrTextTooLong   = errors.New("classify: text too long")
	ErrBadArgument   = errors.New("classify: invalid argument")
	ErrUnknownServer = errors.New("classify: unknown server")
	ErrNoLabels      = errors.New("classify: index has no labels of this kind")
)

// Embedder turns texts into unit vectors; the daemon passes an *embed.Engine.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Limits are the documented input bounds, enforced before any model work.
type Limits struct {
	MaxTextBytes int // per text, prompt or message (default 8192)
	MaxMessages  int // per Route request (default 64)
	MaxTopK      int // top_k, max_servers, max_tools (default 100)
}

// Config tunes the classifier. Zero values take defaults.
type Config struct {
	Limits Limits
	// DefaultTopK is Classify's top_k when the request leaves it 0 (default 3).
	DefaultTopK int
	// DefaultMaxServers and DefaultMaxTools apply when a Route request leaves them 0.
	DefaultMaxServers int // default 5
	DefaultMaxTools   int // default 20
	// MetaCategory names the category of meta tools (default "meta").
	MetaCategory string
}

func (c Config) withDefaults() Config {
	if c.Limits.MaxTextBytes <= 0 {
		c.Limits.MaxTextBytes = 8192
	}
	if c.Limits.MaxMessages <= 0 {
		c.Limits.MaxMessages = 64
	}
	if c.Limits.MaxTopK <= 0 {
		c.Limits.MaxTopK = 100
	}
	if c.DefaultTopK <= 0 {
		c.DefaultTopK = 3
	}
	if c.DefaultMaxServers <= 0 {
		c.DefaultMaxServers = 5
	}
	if c.DefaultMaxTools <= 0 {
		c.DefaultMaxTools = 20
	}
	if c.MetaCategory == "" {
		c.MetaCategory = "meta"
	}
	return c
}

// Classifier scores texts against one index. It is immutable after New and
// safe for concurrent use.
type Classifier struct {
	cfg   Config
	idx   *index.Index
	emb   Embedder
	cal   Calibration
	lex   lexicon
	cats  []int // label indices of categories
	srvs  []int
	tools []int
	// toolsOf maps a server's label index to its tools' label indices.
	toolsOf map[int][]int
	// serverOf maps a tool's label index to its server's label index
	// (indexed by label; -1 for labels that are not tools).
	serverOf []int
	// sums[li] is the sum of tool li's vectors (nil for other labels) and
	// sumSq[li] its squared norm: the centroid, and the centroid without
	// one held-out vector when calibrating.
	sums  [][]float32
	sumSq []float64
	// exampleMask lists example vectors hidden from every score, and out of
	// the centroids (set only while fitting ReferencePrior).
	exampleMask []example
	// bm is the BM25 index over the tools.
	bm bm25
	// exBM is the BM25 index over the tools' examples, one per document.
	exBM exampleBM25
	// breadth measures how spread out each tool's examples are.
	breadth *breadth
}

// New prepares a classifier over idx. It fails if the index's calibration
// section or patterns cannot be used.
func New(idx *index.Index, emb Embedder, cfg Config) (*Classifier, error) {
	c := &Classifier{cfg: cfg.withDefaults(), idx: idx, emb: emb,
		cats: idx.LabelsOf(index.KindCategory), srvs: idx.LabelsOf(index.KindServer),
		tools: idx.LabelsOf(index.KindTool), toolsOf: map[int][]int{}, serverOf: make([]int, len(idx.Labels))}
	for i := range c.serverOf {
		c.serverOf[i] = -1
	}
	for _, t := range c.tools {
		s, _ := idx.Lookup(index.KindServer, idx.Labels[t].Server)
		c.toolsOf[s] = append(c.toolsOf[s], t)
		c.serverOf[t] = s
	}
	c.setCentroids(false)
	c.bm = newBM25(idx, c.tools)
	c.exBM = newExampleBM25(idx, c.tools)
	c.breadth = newBreadth(idx, c.tools)
	cal, err := ParseCalibration(idx.Calibration)
	if err != nil {
		return nil, err
	}
	c.cal = cal
	lex, err := newLexicon(idx)
	if err != nil {
		return nil, err
	}
	c.lex = lex
	return c, nil
}

// Index returns the index the classifier serves.
func (c *Classifier) Index() *index.Index { return c.idx }

// Limits returns the enforced input limits.
func (c *Classifier) Limits() Limits { return c.cfg.Limits }

// Calibration returns the calibration in use.
func (c *Classifier) Calibration() Calibration { return c.cal }

// blank reports whether s has nothing to embed: only white space, control
// and format characters (U+200B ZERO WIDTH SPACE, U+FEFF, …), which the
// tokenizers drop, so such a text would reach the model as zero tokens.
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.In(r, unicode.Cc, unicode.Cf) }) == ""
}

// CheckText validates one input text against the limits.
func (c *Classifier) CheckText(field, s string) error {
	if blank(s) {
		return fmt.Errorf("%w: %s is empty", ErrEmptyText, field)
	}
	if len(s) > c.cfg.Limits.MaxTextBytes {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTextTooLong, field, len(s), c.cfg.Limits.MaxTextBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrBadArgument, field)
	}
	return nil
}

func (c *Classifier) checkK(field string, k int, def int) (int, error) {
	if k < 0 || k > c.cfg.Limits.MaxTopK {
		return 0, fmt.Errorf("%w: %s %d out of range 0..%d", ErrBadArgument, field, k, c.cfg.Limits.MaxTopK)
	}
	if k == 0 {
		return def, nil
	}
	return k, nil
}

func checkMinConf(mc *float32) error {
	if mc != nil && (math.IsNaN(float64(*mc)) || *mc < 0 || *mc > 1) {
		return fmt.Errorf("%w: min_confidence %v outside [0,1]", ErrBadArgument, *mc)
	}
	return nil
}

// Scored is one ranked label.
type Scored struct {
	Label      int // index into the index's labels
	ID         string
	Confidence float64
	Score      float64 // fused raw score
	Evidence   string
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
	if err := c.CheckText("text", text); err != nil {
		return Result{}, err
	}
	k, err := c.checkK("top_k", topK, c.cfg.DefaultTopK)
	if err != nil {
		return Result{}, err
	}
	if err := checkMinConf(minConf); err != nil {
		return Result{}, err
	}
	if len(c.cats) == 0 {
		return Result{}, fmt.Errorf("%w: no categories (the catalog had none)", ErrNoLabels)
	}
	turns, err := c.embedTurns(ctx, []turn{{text: text, weight: 1}})
	if err != nil {
		return Result{}, err
	}
	cs := c.categoryScores(turns)
	c.addHead(cs, turns[0].vec)
	thr := c.cal.Categories.Threshold
	if minConf != nil {
		thr = float64(*minConf)
	}
	return c.rankSingle(cs, k, thr), nil
}

// addHead adds the linear head's weighted log-probabilities to category
// scores (single-label only).
func (c *Classifier) addHead(cs []labelScore, v []float32) {
	h := c.cal.Head
	if h == nil || c.cal.HeadWeight == 0 || len(h.W) != len(cs) || len(v) != len(h.W[0]) {
		return
	}
	lp := h.LogProbs(v)
	for j := range cs {
		cs[j].score += c.cal.HeadWeight * lp[j]
	}
}

// rankSingle turns category scores into a single-label answer: calibrated
// probabilities over categories (plus an out-of-scope mass), top k above
// the threshold.
func (c *Classifier) rankSingle(cs []labelScore, k int, thr float64) Result {
	raw := make([]float64, len(cs))
	for i, s := range cs {
		raw[i] = s.score
	}
	probs := c.cal.Categories.Probabilities(raw)
	order := argsort(probs)
	var res Result
	inScope := 1.0
	if len(order) > 0 {
		inScope = c.cal.Categories.InScope.Prob(raw[order[0]])
	}
	for _, i := range order {
		if len(res.Categories) >= k {
			break
		}
		if probs[i]*inScope < thr {
			break
		}
		res.Categories = append(res.Categories, Scored{Label: cs[i].label, ID: c.idx.Labels[cs[i].label].ID,
			Confidence: probs[i], Score: cs[i].score, Evidence: c.evidence(cs[i])})
	}
	res.Abstained = len(res.Categories) == 0
	res.InScope = inScope
	res.Reasoning = c.explain(cs, probs, order, thr, inScope)
	return res
}

// explain is the deterministic reasoning: what matched, how strongly, and
// the margin to the runner-up.
func (c *Classifier) explain(cs []labelScore, probs []float64, order []int, thr, inScope float64) string {
	if len(order) == 0 {
		return "no labels"
	}
	best := order[0]
	id := c.idx.Labels[cs[best].label].ID
	var b strings.Builder
	if probs[best]*inScope < thr {
		fmt.Fprintf(&b, "abstained: best %s at %.2f with in-scope probability %.2f is below %.2f (%s)",
			id, probs[best], inScope, thr, c.evidence(cs[best]))
		return b.String()
	}
	fmt.Fprintf(&b, "%s %.2f: %s", id, probs[best], c.evidence(cs[best]))
	if len(order) > 1 {
		r := order[1]
		fmt.Fprintf(&b, "; runner-up %s %.2f (margin %.2f)", c.idx.Labels[cs[r].label].ID, probs[r], probs[best]-probs[r])
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

// turn is one piece of text with its weight in the decision.
type turn struct {
	text   string
	weight float64
	dots   []float32
	lower  string
	vec    []float32
	// context marks an earlier conversation turn (not the current request).
	context bool
	// part marks one need of a compound request (see needTurns).
	part bool
	// penalty is subtracted from every score of this turn: earlier turns
	// count, but less than the current one, and less the clearer it is.
	penalty float64
	// bm holds the tools' BM25 scores for this text, and exBM each
	// tool's best example BM25 score.
	bm, exBM map[int]float64
	// held is set when the turn is an index vector scored as a query at
	// calibration time: heldVec is left out of its label's centroid.
	held    bool
	heldVec int
}

// embedTurns embeds all turns (see embedSplit) and scores each against
// every index vector.
func (c *Classifier) embedTurns(ctx context.Context, ts []turn) ([]turn, error) {
	texts := make([]string, len(ts))
	for i, t := range ts {
		texts[i] = t.text
	}
	vecs, err := c.embedSplit(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(ts) {
		return nil, fmt.Errorf("classify: embedder returned %d vectors for %d texts", len(vecs), len(ts))
	}
	for i := range ts {
		ts[i].dots = make([]float32, c.idx.NumVectors())
		if err := c.idx.Dot(vecs[i], ts[i].dots); err != nil {
			return nil, err
		}
		ts[i].lower = strings.ToLower(ts[i].text)
		ts[i].vec = vecs[i]
		if c.cal.Fusion.BM25 > 0 {
			ts[i].bm = c.bm.score(ts[i].text)
		}
		if c.cal.Fusion.ExampleBM25 > 0 {
			ts[i].exBM = c.exBM.score(ts[i].text, -1)
		}
	}
	return ts, nil
}

// embedSplit embeds texts[0] (the current request) in one model call and
// the rest (its parts, earlier turns) in a second call running beside it.
// On a machine with a spare core the request then costs about one model
// run instead of one run over a padded batch; under full load the two
// calls cost no more than the batch did, as the parts are no longer
// padded to the whole prompt's length.
func (c *Classifier) embedSplit(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) < 2 {
		return c.emb.Embed(ctx, texts)
	}
	var rest [][]float32
	var restErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rest, restErr = c.emb.Embed(ctx, texts[1:])
	}()
	first, err := c.emb.Embed(ctx, texts[:1])
	<-done
	if err = errors.Join(err, restErr); err != nil {
		return nil, err
	}
	return append(first, rest...), nil
}

// labelScore is one label's fused score and what produced it. The
// evidence text is built only for labels that reach an answer.
type labelScore struct {
	label int
	score float64
	cos   float64 // cosine of the best vector (the evidence)
	vec   int     // best vector
	owner int     // label that owns vec (differs from label when via is set)
	ctx   bool    // the best vector matched an earlier conversation turn
	lex   string  // lexical evidence, if any
	via   string  // set when the score came from another label (a server's best tool)
}

// scoreLabels fuses, for each label in ls, the dense similarity (best
// vector, weighted by turn) with lexical evidence.
func (c *Classifier) scoreLabels(ls []int, ts []turn) []labelScore {
	out := make([]labelScore, len(ls))
	for j, li := range ls {
		l := &c.idx.Labels[li]
		best := labelScore{label: li, owner: li, score: math.Inf(-1), vec: l.First}
		for ti := range ts {
			t := &ts[ti]
			d := t.dots[l.First : l.First+l.Count]
			v, s := 0, d[0]
			for x := 1; x < len(d); x++ {
				if d[x] > s {
					v, s = x, d[x]
				}
			}
			dense := float64(s)
			if c.sums[li] != nil && !math.IsInf(dense, -1) {
				dense = c.pooled(li, l, t, dense, float64(d[0]))
			}
			total := (dense+c.breadth.adjust(li, l, t, c.cal.Fusion.ToolBreadth))*t.weight - t.penalty
			cos := float64(s)
			boost, lexEv := c.lex.evidence(li, t, &c.cal.Fusion)
			total += (boost + c.cal.Fusion.BM25*t.bm[li] + c.cal.Fusion.ExampleBM25*t.exBM[li]) * t.weight
			if total > best.score {
				best = labelScore{label: li, owner: li, score: total, cos: cos, vec: l.First + v, ctx: t.context, lex: lexEv}
			}
		}
		out[j] = best
	}
	return out
}

// setCentroids sums each tool's vectors for its centroid; without examples
// (for ReferencePrior) only its description and name vectors count.
func (c *Classifier) setCentroids(withoutExamples bool) {
	idx := c.idx
	c.sums, c.sumSq = make([][]float32, len(idx.Labels)), make([]float64, len(idx.Labels))
	for _, li := range c.tools {
		l := &idx.Labels[li]
		sum := make([]float32, idx.Dims)
		for v := l.First; v < l.First+l.Count; v++ {
			if withoutExamples && l.Sources[v-l.First] == index.SourceExample {
				continue
			}
			vek32.Add_Inplace(sum, idx.Vector(v))
		}
		c.sums[li], c.sumSq[li] = sum, float64(vek32.Dot(sum, sum))
	}
}

// pooled is a tool's dense score: its best vector, its centroid and its
// description vector, weighed as Fusion says, and no lower than the best
// vector less Fusion.ToolExactGap. best and desc are the
// cosines of the best vector and of the first (description) vector.
func (c *Classifier) pooled(li int, l *index.Label, t *turn, best, desc float64) float64 {
	f := &c.cal.Fusion
	if t.vec == nil || f.ToolCentroid <= 0 && f.ToolDescription <= 0 {
		return best
	}
	sum, sq := c.sums[li], c.sumSq[li]
	dq := float64(vek32.Dot(t.vec, sum))
	if t.held && c.exampleMask == nil && t.heldVec >= l.First && t.heldVec < l.First+l.Count {
		v := c.idx.Vector(t.heldVec)
		dq -= float64(vek32.Dot(t.vec, v))
		sq += float64(vek32.Dot(v, v)) - 2*float64(vek32.Dot(sum, v))
	}
	cent := best
	if sq > 1e-9 {
		cent = dq / math.Sqrt(sq)
	}
	if l.Sources[0] != index.SourceDescription || math.IsInf(desc, -1) {
		desc = best
	}
	p := ((1-f.ToolCentroid)*best + f.ToolCentroid*cent + f.ToolDescription*desc) / (1 + f.ToolDescription)
	if f.ToolExactGap > 0 {
		p = math.Max(p, best-f.ToolExactGap)
	}
	return p
}

// evidence describes what produced a label's score.
func (c *Classifier) evidence(s labelScore) string {
	l := &c.idx.Labels[s.owner]
	if math.IsInf(s.score, -1) || s.vec < l.First || s.vec >= l.First+l.Count {
		return ""
	}
	k := s.vec - l.First
	ev := fmt.Sprintf("nearest %s %q (%.2f)", l.Sources[k], clip(l.Texts[k], 60), s.cos)
	if s.lex != "" {
		ev = s.lex + "; " + ev
	}
	if s.ctx {
		ev += " from earlier conversation"
	}
	return s.via + ev
}

func (c *Classifier) categoryScores(ts []turn) []labelScore { return c.scoreLabels(c.cats, ts) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// lexicon holds the lexical evidence of every label: keywords, patterns and
// names, matched against lower-cased text.
type lexicon struct {
	keywords map[int][]string
	patterns map[int][]*regexp.Regexp
	names    map[int][]string
}

func newLexicon(idx *index.Index) (lexicon, error) {
	lx := lexicon{keywords: map[int][]string{}, patterns: map[int][]*regexp.Regexp{}, names: map[int][]string{}}
	for i, l := range idx.Labels {
		for _, k := range l.Keywords {
			if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
				lx.keywords[i] = append(lx.keywords[i], k)
			}
		}
		for _, p := range l.Patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return lx, fmt.Errorf("classify: label %q pattern %q: %w", l.ID, p, err)
			}
			lx.patterns[i] = append(lx.patterns[i], re)
		}
		switch l.Kind {
		case index.KindTool:
			if len(l.Name) >= 4 && strings.ContainsAny(l.Name, "_-") {
				lx.names[i] = append(lx.names[i], strings.ToLower(l.Name))
			}
		case index.KindServer:
			if len(l.ID) >= 3 {
				lx.names[i] = append(lx.names[i], strings.ToLower(l.ID))
			}
		}
	}
	return lx, nil
}

// evidence returns the lexical boost for label li in turn t (the fusion
// weight of the strongest kind that matched) and what matched.
func (lx *lexicon) evidence(li int, t *turn, f *Fusion) (float64, string) {
	for _, re := range lx.patterns[li] {
		if m := re.FindString(t.text); m != "" {
			return f.Pattern, fmt.Sprintf("pattern matched %q", clip(m, 40))
		}
	}
	for _, n := range lx.names[li] {
		if containsWord(t.lower, n) {
			return f.Name, fmt.Sprintf("names %q", n)
		}
	}
	for _, k := range lx.keywords[li] {
		if containsWord(t.lower, k) {
			return f.Keyword, fmt.Sprintf("keyword %q", k)
		}
	}
	return 0, ""
}

// containsWord reports whether needle occurs in s at word boundaries.
func containsWord(s, needle string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], needle)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(needle)
		before := i == 0 || !isWordByte(s[i-1])
		after := end == len(s) || !isWordByte(s[end])
		if before && after {
			return true
		}
		off = i + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}
