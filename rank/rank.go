// Package rank scores a request against an index: dense similarity to each
// label's vectors (pooled for tools), BM25 over tool texts and examples,
// tool breadth, and lexical evidence (patterns, names, keywords), fused by
// calibrate.Fusion weights into one raw score per label. Policies (route,
// classify, analyze) turn these scores into answers; fit scores held-out
// examples with the same code so calibration sees what they rank.
package rank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/viterin/vek/vek32"
)

// ErrNoLabels is returned when the index has no labels of the kind asked for.
var ErrNoLabels = errors.New("rank: index has no labels of this kind")

// Embedder turns texts into unit vectors; the daemon passes an *embed.Engine.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options tunes a Ranker.
type Options struct {
	// Fusion weighs the evidence; a served index uses its calibration's.
	Fusion calibrate.Fusion
	// DescriptionsOnly masks every example vector out of every score and
	// every tool centroid, as if the catalog had no examples at all
	// (fit.ReferencePrior learns a description-only catalog's maps so).
	DescriptionsOnly bool
	// ShortlistFrom is the number of server and tool vectors from which
	// embedded turns are scored against a shortlist of labels instead of
	// every label (shortlist.go; DefaultShortlistFrom); 0 never shortlists.
	ShortlistFrom int
}

// Ranker scores texts against one index. It is immutable after New and
// safe for concurrent use; WithFusion returns a new Ranker.
type Ranker struct {
	idx    *index.Index
	emb    Embedder
	fusion calibrate.Fusion
	lx     lexicon
	cats   []int // label indices of categories
	srvs   []int
	tools  []int
	// serverOf maps a tool's label index to its server's label index
	// (indexed by label; -1 for labels that are not tools).
	serverOf []int
	// sums[li] is the sum of tool li's vectors (nil for other labels) and
	// sumSq[li] its squared norm: the centroid, and the centroid without
	// one held-out vector when calibrating.
	sums  [][]float32
	sumSq []float64
	// mask lists example vectors hidden from every score, and out of the
	// centroids (Options.DescriptionsOnly).
	mask []Example
	// bm is the BM25 index over the tools.
	bm bm25
	// exBM is the BM25 index over the tools' examples, one per document.
	exBM exampleBM25
	// breadth measures how spread out each tool's examples are.
	breadth *breadth
	// short finds the labels near a turn when the catalog is large enough
	// to shortlist (Options.ShortlistFrom), else nil.
	short *shortlister
	// bufs recycles the large per-turn slices of released requests.
	bufs *buffers
}

// New prepares a ranker over idx; emb embeds requests (nil when only
// index vectors are scored, as when fitting). It fails if the index's
// patterns do not compile.
func New(idx *index.Index, emb Embedder, opts Options) (*Ranker, error) {
	r := &Ranker{idx: idx, emb: emb, fusion: opts.Fusion,
		cats: idx.LabelsOf(index.KindCategory), srvs: idx.LabelsOf(index.KindServer),
		tools: idx.LabelsOf(index.KindTool), serverOf: make([]int, len(idx.Labels)), bufs: &buffers{}}
	for i := range r.serverOf {
		r.serverOf[i] = -1
	}
	for _, t := range r.tools {
		s, _ := idx.Lookup(index.KindServer, idx.Labels[t].Server)
		r.serverOf[t] = s
	}
	if opts.DescriptionsOnly {
		r.mask = allExamples(idx)
	}
	r.setCentroids(opts.DescriptionsOnly)
	r.bm = newBM25(idx, r.tools)
	r.exBM = newExampleBM25(idx, r.tools)
	r.breadth = newBreadth(idx, r.tools)
	lx, err := newLexicon(idx)
	if err != nil {
		return nil, err
	}
	r.lx = lx
	if opts.ShortlistFrom > 0 && !opts.DescriptionsOnly {
		var vs []int32
		for _, li := range append(slices.Clip(r.srvs), r.tools...) {
			l := &idx.Labels[li]
			for v := l.First; v < l.First+l.Count; v++ {
				vs = append(vs, int32(v))
			}
		}
		if len(vs) >= opts.ShortlistFrom {
			r.short = newShortlister(idx, vs)
		}
	}
	return r, nil
}

// Shortlists reports whether embedded turns are scored against a
// shortlist of labels (Options.ShortlistFrom) and, if so, the number of
// inverted-file cells. The cells are built in the background after New
// (seconds at 100,000 tools): until ShortlistReady is closed every label
// is scored.
func (r *Ranker) Shortlists() (bool, int) {
	if f := r.short.get(); f != nil {
		return true, len(f.cells)
	}
	return false, 0
}

// ShortlistReady is closed once the ranker shortlists, or at once when
// it never will.
func (r *Ranker) ShortlistReady() <-chan struct{} {
	if r.short == nil {
		return closed
	}
	return r.short.ready
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// WithFusion returns a ranker that fuses evidence with f, sharing r's
// (read-only) indexes.
func (r *Ranker) WithFusion(f calibrate.Fusion) *Ranker {
	cp := *r
	cp.fusion = f
	return &cp
}

// Index returns the index the ranker scores against.
func (r *Ranker) Index() *index.Index { return r.idx }

// Fusion returns the fusion weights in use.
func (r *Ranker) Fusion() calibrate.Fusion { return r.fusion }

// Categories, Servers and Tools return the label indices of each kind.
func (r *Ranker) Categories() []int { return r.cats }

// Servers returns the label indices of the servers.
func (r *Ranker) Servers() []int { return r.srvs }

// Tools returns the label indices of the tools.
func (r *Ranker) Tools() []int { return r.tools }

// ServerOf returns the label index of tool li's server.
func (r *Ranker) ServerOf(li int) int { return r.serverOf[li] }

// Vec returns the turn's embedding (nil before Embed).
func (t *Turn) Vec() []float32 { return t.vec }

// Lexical returns the lexical boost of label li in turn t (the fusion
// weight of the strongest kind that matched) and what matched. It needs
// no embedding: analyze falls back on it when the model fails.
func (r *Ranker) Lexical(li int, t *Turn) (float64, string) {
	t.prepare()
	return r.lx.evidence(li, t, &r.fusion)
}

// prepare sets the texts the lexical signals read, once per turn.
func (t *Turn) prepare() {
	if t.prepared != t.Text {
		t.lower, t.pattern, t.prepared = strings.ToLower(t.Text), patternText(t.Text), t.Text
		t.lexHits, t.words = nil, nil
		t.bm, t.exBM, t.bmBy = nil, nil, nil
	}
}

// Turn is one piece of text with its weight in the decision.
type Turn struct {
	Text   string
	Weight float64
	dots   []float32
	vec    []float32
	// lower is Text lower-cased, pattern what patterns see of it
	// (patternText), both for prepared == Text.
	lower, pattern, prepared string
	// lexHits caches, by label, the lexical evidence found in the turn,
	// so patterns and needles run once per turn.
	lexHits map[int]lexHit
	// words is the set of word runs of lower, for long texts (mayContain).
	words map[string]struct{}
	// Context marks an earlier conversation turn (not the current request).
	Context bool
	// Part marks one need of a compound request (see Needs).
	Part bool
	// Span, when not zero, is where a part is in the prompt (the first
	// turn's text), in bytes: its vector can then be pooled from the
	// prompt's own model run (SpanEmbedder).
	Span [2]int
	// Cue is set on a turn that stands for a cue of the request (see
	// Cues): its text is the capability, not the user's words, so it is
	// ranked on its own and never counts towards a label's best score.
	Cue *Cue
	// Penalty is subtracted from every score of this turn: earlier turns
	// count, but less than the current one, and less the clearer it is.
	Penalty float64
	// bm holds the tools' BM25 scores for this text, and exBM each
	// tool's best example BM25 score, by label (nil: no match), as
	// ranker bmBy scored them (for prepared).
	bm, exBM []float64
	bmBy     *Ranker
	// held is set when the turn is an index vector scored as a query at
	// calibration time: heldVec is left out of its label's centroid.
	held    bool
	heldVec int
	// sl is the turn's shortlist: dots are set only for its labels'
	// vectors, and other labels are unscored in it (nil: every label).
	sl *shortlisted
}

// Embed embeds all turns (see embedSplit) and scores each against
// every index vector: Vectors, then Dense.
func (r *Ranker) Embed(ctx context.Context, ts []Turn) ([]Turn, error) {
	vecs, err := r.Vectors(ctx, ts)
	if err != nil {
		return nil, err
	}
	return r.Dense(ts, vecs)
}

// Dense scores each turn, with its vector from Vectors, against every
// index vector, or only its shortlist's when the ranker shortlists (and
// BM25 when the fusion uses it); the turns are ready for the label scores
// (ScoreLabels, RouteScores...).
func (r *Ranker) Dense(ts []Turn, vecs [][]float32) ([]Turn, error) {
	if len(vecs) != len(ts) {
		return nil, fmt.Errorf("rank: embedder returned %d vectors for %d texts", len(vecs), len(ts))
	}
	for i := range ts {
		if len(vecs[i]) != r.idx.Dims {
			return nil, fmt.Errorf("rank: embedder returned a vector of %d dims, index has %d", len(vecs[i]), r.idx.Dims)
		}
		r.lexical(&ts[i])
		ts[i].vec = vecs[i]
	}
	if f := r.short.get(); f != nil {
		r.shortlist(f, ts, vecs)
		return ts, nil
	}
	dots := make([][]float32, len(ts))
	for i := range ts {
		dots[i] = r.bufs.f32(r.idx.NumVectors())
	}
	// Two halves of the turns side by side (see RouteScoresParts).
	var errA, errB error
	if h := len(ts) / 2; h > 0 {
		both(func() { errA = r.idx.DotMany(vecs[h:], dots[h:]) }, func() { errB = r.idx.DotMany(vecs[:h], dots[:h]) })
	} else {
		errA = r.idx.DotMany(vecs, dots)
	}
	if err := errors.Join(errA, errB); err != nil {
		return nil, err
	}
	for i := range ts {
		ts[i].dots = dots[i]
	}
	return ts, nil
}

// PrepareLexical readies what each turn's scores need but its vector: its
// lower-cased text, its lexical evidence and its BM25 scores. Dense does it for turns this
// ranker has not readied, so a caller may call PrepareLexical while the
// model embeds the turns (Vectors on a copy of them: this writes the
// turns).
func (r *Ranker) PrepareLexical(ts []Turn) {
	for i := range ts {
		r.lexical(&ts[i])
	}
}

func (r *Ranker) lexical(t *Turn) {
	r.readyLex(t)
	if t.bmBy == r {
		return
	}
	t.bmBy = r
	if r.fusion.BM25 > 0 || r.fusion.ExampleBM25 > 0 {
		words := distinctLexWords(t.Text)
		if r.fusion.BM25 > 0 {
			t.bm = r.bm.scoreDense(words, len(r.idx.Labels), r.bufs.f64)
		}
		if r.fusion.ExampleBM25 > 0 {
			t.exBM = r.exBM.scoreDense(words, -1, len(r.idx.Labels), r.bufs.f64)
		}
	}
}

// readyLex prepares t and finds its lexical evidence for every label, so
// that scoring it only reads it (RouteScoresParts scores on two
// goroutines).
func (r *Ranker) readyLex(t *Turn) {
	t.prepare()
	if t.lexHits == nil {
		r.lx.scan(t)
	}
}

// embedSplit embeds texts[0] (the current request) in one model call and
// the rest (its parts, earlier turns) in a second call running beside it.
// On a machine with a spare core the request then costs about one model
// run instead of one run over a padded batch; under full load the two
// calls cost no more than the batch did, as the parts are no longer
// padded to the whole prompt's length.
func (r *Ranker) embedSplit(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) < 2 {
		return r.emb.Embed(ctx, texts)
	}
	var rest [][]float32
	var restErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rest, restErr = r.emb.Embed(ctx, texts[1:])
	}()
	first, err := r.emb.Embed(ctx, texts[:1])
	<-done
	if err = errors.Join(err, restErr); err != nil {
		return nil, err
	}
	return append(first, rest...), nil
}

// Score is one label's fused score and what produced it. The
// evidence text is built only for labels that reach an answer.
type Score struct {
	Label int
	Score float64
	cos   float64 // cosine of the best vector (the evidence)
	vec   int     // best vector
	owner int     // label that owns vec (differs from label when via is set)
	ctx   bool    // the best vector matched an earlier conversation turn
	Lex   string  // lexical evidence, if any
	// via is 1 + the label the score came from when it is another's (a
	// server's best tool or category), else 0; the evidence names it.
	via int
}

// viaText is the start of the evidence of a score that came from another
// label: "tool list_issues: ", "category code: ".
func (r *Ranker) viaText(s Score) string {
	if s.via == 0 {
		return ""
	}
	l := &r.idx.Labels[s.via-1]
	if l.Kind == index.KindTool {
		return "tool " + l.Name + ": "
	}
	return string(l.Kind) + " " + l.ID + ": "
}

// ScoreLabels fuses, for each label in ls, the dense similarity (best
// vector, weighted by turn) with lexical evidence: its best score over
// the turns.
func (r *Ranker) ScoreLabels(ls []int, ts []Turn) []Score {
	if len(ts) == 0 {
		out := make([]Score, len(ls))
		for j, li := range ls {
			out[j] = unscored(li, &r.idx.Labels[li])
		}
		return out
	}
	if len(ts) == 1 && ts[0].Cue == nil {
		return r.scoreRows(ls, ts)
	}
	return bestOfRows(r.scoreRows(ls, ts), len(ls), ts)
}

// scoreRows scores each label of ls in each turn alone: row ti (out[ti*len(ls):])
// is what ScoreLabels returns for ts[ti:ti+1], so a compound request's
// parts are ranked from the same pass as the whole request.
func (r *Ranker) scoreRows(ls []int, ts []Turn) []Score {
	out := make([]Score, len(ls)*len(ts))
	for j, li := range ls {
		l := &r.idx.Labels[li]
		for ti := range ts {
			t := &ts[ti]
			if !t.sl.has(li) {
				out[ti*len(ls)+j] = unscored(li, l)
				continue
			}
			d := t.dots[l.First : l.First+l.Count]
			v, s := 0, d[0]
			for x := 1; x < len(d); x++ {
				if d[x] > s {
					v, s = x, d[x]
				}
			}
			dense := float64(s)
			if r.sums[li] != nil && !math.IsInf(dense, -1) {
				dense = r.pooled(li, l, t, dense, float64(d[0]))
			}
			total := (dense+r.breadth.adjust(li, l, t, r.fusion.ToolBreadth))*t.Weight - t.Penalty
			cos := float64(s)
			boost, lexEv := r.lx.evidence(li, t, &r.fusion)
			total += (boost + r.fusion.BM25*at(t.bm, li) + r.fusion.ExampleBM25*at(t.exBM, li)) * t.Weight
			if total > math.Inf(-1) {
				out[ti*len(ls)+j] = Score{Label: li, owner: li, Score: total, cos: cos, vec: l.First + v, ctx: t.Context, Lex: lexEv}
			} else {
				out[ti*len(ls)+j] = unscored(li, l)
			}
		}
	}
	return out
}

// at is s[i], or 0 for a nil s.
func at(s []float64, i int) float64 {
	if s == nil {
		return 0
	}
	return s[i]
}

// unscored is the score of a label no turn reaches (every vector masked).
func unscored(li int, l *index.Label) Score {
	return Score{Label: li, owner: li, Score: math.Inf(-1), vec: l.First}
}

// bestOfRows is, for each of n labels, its best score over the rows of
// the turns ts that are not cues (the first row wins ties).
func bestOfRows(rows []Score, n int, ts []Turn) []Score {
	out := make([]Score, n)
	if n == 0 {
		return out
	}
	first := true
	for ti, off := 0, 0; off < len(rows); ti, off = ti+1, off+n {
		if ts[ti].Cue != nil {
			continue
		}
		if first {
			copy(out, rows[off:off+n])
			first = false
			continue
		}
		for j, s := range rows[off : off+n] {
			if s.Score > out[j].Score {
				out[j] = s
			}
		}
	}
	if first {
		for j := range out {
			out[j] = Score{Label: rows[j].Label, owner: rows[j].owner, Score: math.Inf(-1), vec: rows[j].vec}
		}
	}
	return out
}

// setCentroids sums each tool's vectors for its centroid; without examples
// (for ReferencePrior) only its description and name vectors count.
func (r *Ranker) setCentroids(withoutExamples bool) {
	idx := r.idx
	r.sums, r.sumSq = make([][]float32, len(idx.Labels)), make([]float64, len(idx.Labels))
	for _, li := range r.tools {
		l := &idx.Labels[li]
		var in []int
		for v := l.First; v < l.First+l.Count; v++ {
			if !withoutExamples || l.Sources[v-l.First] != index.SourceExample {
				in = append(in, v)
			}
		}
		var sum []float32
		if len(in) == 1 {
			// The sum of one vector is that vector: share the index's
			// (read-only) row instead of a copy per tool (154 MB at
			// 100,000 one-vector tools).
			sum = idx.Vector(in[0])
		} else {
			sum = make([]float32, idx.Dims)
			for _, v := range in {
				vek32.Add_Inplace(sum, idx.Vector(v))
			}
		}
		r.sums[li], r.sumSq[li] = sum, float64(vek32.Dot(sum, sum))
	}
}

// pooled is a tool's dense score: its best vector, its centroid and its
// description vector, weighed as Fusion says, and no lower than the best
// vector less Fusion.ToolExactGap. best and desc are the
// cosines of the best vector and of the first (description) vector.
func (r *Ranker) pooled(li int, l *index.Label, t *Turn, best, desc float64) float64 {
	f := &r.fusion
	if t.vec == nil || f.ToolCentroid <= 0 && f.ToolDescription <= 0 {
		return best
	}
	sum, sq := r.sums[li], r.sumSq[li]
	var dq float64
	if l.Count == 1 && r.mask == nil && !t.held {
		// The centroid of one vector is that vector: its dot product with
		// the query is already in t.dots (the same vek32.Dot, so the same
		// value), and a large catalog of one-vector tools is scanned once
		// per turn instead of twice.
		dq = float64(t.dots[l.First])
	} else {
		dq = float64(vek32.Dot(t.vec, sum))
	}
	if t.held && r.mask == nil && t.heldVec >= l.First && t.heldVec < l.First+l.Count {
		v := r.idx.Vector(t.heldVec)
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

// Evidence describes what produced a label's score.
func (r *Ranker) Evidence(s Score) string {
	l := &r.idx.Labels[s.owner]
	if math.IsInf(s.Score, -1) || s.vec < l.First || s.vec >= l.First+l.Count {
		return ""
	}
	k := s.vec - l.First
	ev := fmt.Sprintf("nearest %s %q (%.2f)", l.Sources[k], Clip(l.Texts[k], 60), s.cos)
	if s.Lex != "" {
		ev = s.Lex + "; " + ev
	}
	if s.ctx {
		ev += " from earlier conversation"
	}
	return r.viaText(s) + ev
}

// Parts is a score's evidence by kind, for clients that show the kinds
// apart (the explain page); Evidence is the same as one sentence.
type Parts struct {
	// Dense is the cosine of the nearest catalog text to the request.
	Dense float64
	// Nearest is that text with its source: `example "…"`.
	Nearest string
	// Lexical is a name or keyword hit (`keyword "github"`), else "".
	Lexical string
	// Pattern is a category pattern hit, else "".
	Pattern string
	// Via names the label the evidence belongs to when it is another's
	// (a server's best tool or category), else "".
	Via string
	// Learned is the evidence learned from use ("called in 38% of tasks
	// like this"), set by the routing policy; else "".
	Learned string
}

// Parts splits the evidence of s by kind.
func (r *Ranker) Parts(s Score) Parts {
	l := &r.idx.Labels[s.owner]
	if math.IsInf(s.Score, -1) || s.vec < l.First || s.vec >= l.First+l.Count {
		return Parts{}
	}
	k := s.vec - l.First
	p := Parts{Dense: s.cos, Nearest: fmt.Sprintf("%s %q", l.Sources[k], Clip(l.Texts[k], 60)),
		Via: strings.TrimSuffix(r.viaText(s), ": ")}
	if strings.HasPrefix(s.Lex, "pattern") {
		p.Pattern = s.Lex
	} else {
		p.Lexical = s.Lex
	}
	return p
}

// CategoryScores scores every category for the turns.
func (r *Ranker) CategoryScores(ts []Turn) []Score { return r.ScoreLabels(r.cats, ts) }

// Clip shortens s to at most n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// AllServers is the set of every server label.
func (r *Ranker) AllServers() map[int]bool {
	all := make(map[int]bool, len(r.srvs))
	for _, li := range r.srvs {
		all[li] = true
	}
	return all
}
