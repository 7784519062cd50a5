// Package route is the routing policy: from a request (a query and its
// conversation) it builds the weighted turns, has rank score servers and
// tools, maps the scores to confidences with calibrate, and picks what to
// return: the servers above threshold, their tools, places kept for each
// need of a compound request, and the NONE/META/ALL no-match policy.
package route

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/internal/tracing"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/policy"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

// ErrUnknownServer is returned for an include or exclude server the index lacks.
var ErrUnknownServer = errors.New("route: unknown server")

// Config tunes the router. Zero values take defaults.
type Config struct {
	Limits request.Limits
	// DefaultMaxServers and DefaultMaxTools apply when a Route request leaves them 0.
	DefaultMaxServers int // default 5
	DefaultMaxTools   int // default 20
	// MetaCategory names the category of meta tools (default "meta").
	MetaCategory string
	// Learned is the evidence learned from use for this index (package
	// learn); nil routes from the descriptions alone, and so does a view
	// with no reports.
	Learned *learn.View
}

func (c Config) withDefaults() Config {
	c.Limits = c.Limits.WithDefaults()
	if c.DefaultMaxServers <= 0 {
		c.DefaultMaxServers = 5
	}
	if c.DefaultMaxTools <= 0 {
		c.DefaultMaxTools = 20
	}
	if c.MetaCategory == "" {
		c.MetaCategory = request.DefaultMetaCategory
	}
	return c
}

// Router picks the servers and tools for a request. It is immutable after
// New and safe for concurrent use.
type Router struct {
	policy.Base
	cfg Config
	// toolCount is each server's number of tools, by label (evidence).
	toolCount map[int]int
	// shape is the catalog's shape, for a catalog deciding from evidence.
	shape shape
}

// New returns a Router over rk, deciding with cal (the index's calibration).
func New(rk *rank.Ranker, cal calibrate.Calibration, cfg Config) *Router {
	cfg = cfg.withDefaults()
	r := &Router{Base: policy.New(rk, cal, cfg.Limits), cfg: cfg, toolCount: toolCounts(rk)}
	if cal.ServerEvidence != nil && weighsShape(cal.ServerEvidence) {
		r.shape = catalogShape(rk, shapeBudget)
	}
	return r
}

// Shortlists reports whether requests are scored against a shortlist of
// labels and, if so, over how many inverted-file cells (rank.Ranker.Shortlists).
func (c *Router) Shortlists() (bool, int) { return c.Rk.Shortlists() }

// ShortlistReady is closed once the router shortlists, or at once when it
// never will (rank.Ranker.ShortlistReady).
func (c *Router) ShortlistReady() <-chan struct{} { return c.Rk.ShortlistReady() }

// NoMatch is what Route returns when nothing reaches the threshold.
type NoMatch int

// No-match policies.
const (
	// NoMatchDefault defers to Config-level default (NONE).
	NoMatchDefault NoMatch = iota
	// NoMatchNone returns no tools.
	NoMatchNone
	// NoMatchMeta returns only the meta category's tools.
	NoMatchMeta
	// NoMatchAll returns every candidate tool.
	NoMatchAll
)

func (p NoMatch) String() string {
	switch p {
	case NoMatchNone:
		return "NONE"
	case NoMatchMeta:
		return "META"
	case NoMatchAll:
		return "ALL"
	}
	return "DEFAULT"
}

// Message is one conversation turn.
type Message struct {
	Role    string
	Content string
}

// RouteQuery is a Route request.
type RouteQuery struct {
	Query         string
	Messages      []Message // oldest first
	MaxServers    int
	MaxTools      int
	MinConfidence *float32
	Include       []string
	Exclude       []string
	OnNoMatch     NoMatch
	// Caller is who asks (learn.Use.Identity): what it reported weighs
	// most in its answers.
	Caller string
	// describe asks only for the description-based answer (Describe).
	describe bool
	// Evidence asks for every candidate server's evidence and probability
	// in RouteResult.Considered (only where the calibration decides from
	// evidence; for fitting the map, not for clients).
	Evidence bool
}

// ToolScore is one ranked tool.
type ToolScore struct {
	Label      int
	Name       string
	Server     string
	Category   string
	Confidence float64
	Score      float64
	Evidence   string
	// Parts is Evidence by kind.
	Parts rank.Parts
}

// RouteResult is a Route answer.
type RouteResult struct {
	Servers    []classify.Scored
	Tools      []ToolScore
	Categories []classify.Scored
	Reasoning  string
	// Candidates are the tool labels the request allowed (after include/exclude).
	Candidates    []int
	Abstained     bool
	AppliedPolicy NoMatch
	PolicyReason  string
	// Vector is the request's unit embedding (its first turn) and
	// Described the servers the descriptions rank first
	// (learn.MaxDescribed of them) with their probabilities before any
	// learned evidence, for learning from what is then called
	// (learn.View.Observe).
	Vector    []float32
	Described []learn.Prob
	// Considered is every candidate server with its evidence, most
	// probable first, when RouteQuery.Evidence asked for it.
	Considered []Considered
}

var validRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true, "": true}

// maxContextTurns bounds how many earlier turns are embedded.
const maxContextTurns = 6

// Route picks the servers and tools relevant to a query and conversation.
func (c *Router) Route(ctx context.Context, q RouteQuery) (RouteResult, error) {
	ts, latest, cueAt, err := c.routeTurns(q)
	if err != nil {
		return RouteResult{}, err
	}
	maxS, err := c.cfg.Limits.CheckK("max_servers", q.MaxServers, c.cfg.DefaultMaxServers)
	if err != nil {
		return RouteResult{}, err
	}
	maxT, err := c.cfg.Limits.CheckK("max_tools", q.MaxTools, c.cfg.DefaultMaxTools)
	if err != nil {
		return RouteResult{}, err
	}
	if err := request.CheckMinConf(q.MinConfidence); err != nil {
		return RouteResult{}, err
	}
	if len(c.Rk.Servers()) == 0 {
		return RouteResult{}, fmt.Errorf("%w: no servers (the catalog had none)", rank.ErrNoLabels)
	}
	allowed, err := c.allowedServers(q.Include, q.Exclude)
	if err != nil {
		return RouteResult{}, err
	}
	ts, vecs, err := c.embedTurns(ctx, ts, latest, cueAt)
	if err != nil {
		return RouteResult{}, err
	}
	_, sp := tracing.Start(ctx, tracing.Score)
	if ts, err = c.Rk.Dense(ts, vecs); err != nil {
		sp.End()
		return RouteResult{}, err
	}
	// Nothing in the answer refers to the turns' slices: they serve the
	// next request.
	defer c.Rk.Release(ts)
	c.weighContext(ts, allowed)
	// The parts of a compound request are needs of their own (see route);
	// each part's ranking comes from the same pass.
	parts := needTurns(ts)
	if c.Cal.ServerEvidence != nil {
		parts = evidenceNeeds(ts)
	}
	all, partRes := c.Rk.RouteScoresParts(ts, allowed, parts)
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyTurns.Int(len(ts)), tracing.KeyVectors.Int(c.Idx.NumVectors()),
			tracing.KeyLabels.Int(len(all.Servers)+len(all.Tools)+len(all.Categories)))
	}
	sp.End()
	_, sp = tracing.Start(ctx, tracing.Calibrate)
	var res RouteResult
	if c.Cal.ServerEvidence != nil {
		res = c.decide(ts, all, parts, partRes, maxS, maxT, q, vecs[0])
	} else {
		res = c.route(all, partRes, maxS, maxT, q, vecs[0])
	}
	sp.End()
	res.Vector = vecs[0]
	return res, nil
}

// embedTurns embeds the turns while, beside the model's run, it finds the
// request's cues (rank.Cues of latest, inserted at cueAt; none for
// cueAt < 0) and readies every turn's lexical scores: with one request on
// a machine of two cores the regular expressions and BM25 then cost no
// time of their own (on a 200-word request they took longer than
// tokenising it). It returns the turns with the cues and their vectors.
func (c *Router) embedTurns(ctx context.Context, ts []rank.Turn, latest string, cueAt int) ([]rank.Turn, [][]float32, error) {
	own := slices.Clone(ts) // Vectors reads its copy, PrepareLexical writes ts
	var vecs [][]float32
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		vecs, err = c.Rk.Vectors(ctx, own)
	}()
	var cues []rank.Turn
	var cueVecs [][]float32
	var cueErr error
	if cueAt >= 0 {
		// The capabilities' vectors are cached after a first request.
		if cues = rank.Cues(latest); len(cues) > 0 {
			cueVecs, cueErr = c.Rk.Vectors(ctx, cues)
		}
	}
	c.Rk.PrepareLexical(ts)
	c.Rk.PrepareLexical(cues)
	<-done
	if err := errors.Join(err, cueErr); err != nil {
		return nil, nil, err
	}
	if len(cues) == 0 {
		return ts, vecs, nil
	}
	return slices.Concat(ts[:cueAt], cues, ts[cueAt:]), slices.Concat(vecs[:cueAt], cueVecs, vecs[cueAt:]), nil
}

// routeTurns builds the weighted turns: the query (or the last user
// message) counts fully, earlier turns count less, the older the less.
// It returns the latest user text too and, where the request's cues are
// turns of their own, where they go among the turns (embedTurns finds
// them); else cueAt is -1.
func (c *Router) routeTurns(q RouteQuery) ([]rank.Turn, string, int, error) {
	if len(q.Messages) > c.cfg.Limits.MaxMessages {
		return nil, "", 0, fmt.Errorf("%w: %d messages, limit %d", request.ErrBadArgument, len(q.Messages), c.cfg.Limits.MaxMessages)
	}
	for i, m := range q.Messages {
		if !validRoles[m.Role] {
			return nil, "", 0, fmt.Errorf("%w: messages[%d].role %q is not user, assistant, system or tool", request.ErrBadArgument, i, clip.String(m.Role, 64))
		}
		if len(m.Content) > c.cfg.Limits.MaxTextBytes {
			return nil, "", 0, fmt.Errorf("%w: messages[%d] is %d bytes, limit %d", request.ErrTextTooLong, i, len(m.Content), c.cfg.Limits.MaxTextBytes)
		}
	}
	msgs := q.Messages
	var latest string
	if strings.TrimSpace(q.Query) != "" {
		if err := c.cfg.Limits.CheckText("query", q.Query); err != nil {
			return nil, "", 0, err
		}
		latest = q.Query
	} else {
		// The current turn is the last user message with content.
		i := len(msgs) - 1
		for ; i >= 0; i-- {
			if (msgs[i].Role == "user" || msgs[i].Role == "") && strings.TrimSpace(msgs[i].Content) != "" {
				break
			}
		}
		if i < 0 {
			return nil, "", 0, fmt.Errorf("%w: query or a user message is required", request.ErrEmptyText)
		}
		if err := c.cfg.Limits.CheckText(fmt.Sprintf("messages[%d].content", i), msgs[i].Content); err != nil {
			return nil, "", 0, err
		}
		latest = msgs[i].Content
		msgs = msgs[:i]
	}
	var ts []rank.Turn
	cueAt := -1
	if c.Cal.ServerEvidence != nil {
		// Clauses and cues are needs of their own where the evidence
		// map weighs them; a catalog with its own fit routes as before.
		ts = rank.Clauses(latest)
		cueAt = len(ts)
	} else {
		ts = rank.Needs(latest)
	}
	f := c.Cal.Fusion
	p := f.ContextPenalty
	for i, n := len(msgs)-1, 0; i >= 0 && n < maxContextTurns; i-- {
		m := msgs[i]
		if m.Role == "system" || m.Role == "tool" || strings.TrimSpace(m.Content) == "" {
			continue
		}
		tp := p
		if m.Role == "assistant" {
			tp += f.AssistantPenalty
		}
		ts = append(ts, rank.Turn{Text: m.Content, Weight: 1, Penalty: tp, Context: true})
		n++
		p += f.ContextDecay
	}
	return ts, latest, cueAt, nil
}

// weighContext penalises earlier turns by how clearly the current turn
// alone picks a server: a topic change ("now post in #general") moves away
// from the old servers, while an ambiguous follow-up ("and the second
// one?") keeps them.
func (c *Router) weighContext(ts []rank.Turn, allowed map[int]bool) {
	var cur []rank.Turn
	for _, t := range ts {
		if !t.Context {
			cur = append(cur, t)
		}
	}
	if len(cur) == len(ts) {
		return
	}
	f := c.Cal.Fusion
	var p0 float64
	if srvS, _, _, _ := c.Rk.RouteScores(cur, allowed); len(srvS) > 0 {
		p0 = c.Cal.Servers.Prob(srvS[0].Score)
	}
	// clarity is 0 when the current turn alone reaches no server
	// (p ≤ ClearFrom) and 1 when it plainly does (p ≥ ClearFrom+ClearSpan).
	clarity := math.Max(0, math.Min(1, (p0-f.ClearFrom)/f.ClearSpan))
	for i := range ts {
		if ts[i].Context {
			ts[i].Penalty += f.ClarityPenalty * clarity
		}
	}
}

// allowedServers is the set of servers a request allows, nil for every
// server (a catalog of 10,000 servers is not copied into a set per request).
func (c *Router) allowedServers(include, exclude []string) (map[int]bool, error) {
	var allowed map[int]bool
	if len(include) == 0 && len(exclude) == 0 {
		return nil, nil
	}
	if len(include) == 0 {
		allowed = c.Rk.AllServers()
	} else {
		allowed = map[int]bool{}
		for _, id := range include {
			li, ok := c.Idx.Lookup(index.KindServer, id)
			if !ok {
				return nil, fmt.Errorf("%w: include_servers has %q", ErrUnknownServer, rank.Clip(id, 64))
			}
			allowed[li] = true
		}
	}
	for _, id := range exclude {
		li, ok := c.Idx.Lookup(index.KindServer, id)
		if !ok {
			return nil, fmt.Errorf("%w: exclude_servers has %q", ErrUnknownServer, rank.Clip(id, 64))
		}
		delete(allowed, li)
	}
	return allowed, nil
}

// Describe is what a report of query is learned from: its unit
// embedding and the servers the descriptions rank first for it, as Route
// gives them (RouteResult.Vector and Described).
func (c *Router) Describe(ctx context.Context, query string) ([]float32, []learn.Prob, error) {
	zero := float32(0)
	res, err := c.Route(ctx, RouteQuery{Query: query, MaxServers: 1, MaxTools: 1, MinConfidence: &zero, OnNoMatch: NoMatchNone, describe: true})
	if err != nil {
		return nil, nil, err
	}
	return res.Vector, res.Described, nil
}

// DescribeTurns is Describe for a prompt another pass has embedded and
// scored (ts, from rank.Ranker.Dense, and vec, the prompt's unit vector):
// AnalyzePrompt's, so that its answer and the description a report of it
// learns from come from one embedding and one scoring, not two. ts is
// read, not kept. Nil without learning.
func (c *Router) DescribeTurns(ts []rank.Turn, vec []float32) []learn.Prob {
	if c.cfg.Learned == nil || len(ts) == 0 || len(vec) == 0 || len(c.Rk.Servers()) == 0 {
		return nil
	}
	parts := needTurns(ts)
	if c.Cal.ServerEvidence != nil {
		parts = evidenceNeeds(ts)
	}
	all, partRes := c.Rk.RouteScoresParts(ts, nil, parts)
	zero := float32(0)
	q := RouteQuery{MaxServers: 1, MaxTools: 1, MinConfidence: &zero, OnNoMatch: NoMatchNone, describe: true}
	if c.Cal.ServerEvidence != nil {
		return c.decide(ts, all, parts, partRes, 1, 1, q, vec).Described
	}
	return c.route(all, partRes, 1, 1, q, vec).Described
}

func (c *Router) route(all rank.Routed, partRes []rank.Routed, maxS, maxT int, q RouteQuery, vec []float32) RouteResult {
	srvThr, toolThr, catThr := c.Cal.Servers.Threshold, c.Cal.Tools.Threshold, c.Cal.CategoriesMulti.Threshold
	if q.MinConfidence != nil {
		srvThr, toolThr, catThr = float64(*q.MinConfidence), float64(*q.MinConfidence), float64(*q.MinConfidence)
	}
	var res RouteResult
	// The parts of a compound request are needs of their own: a server's
	// confidence is the best of its confidence in the whole prompt and in
	// each part alone, so a request for the filesystem and GitHub gets both
	// above the threshold although GitHub ranks well below the filesystem
	// in the whole prompt. all and partRes are the whole prompt's and the
	// parts' rankings (RouteScoresParts).
	srvS, toolS, cs := all.Servers, all.Tools, all.Categories
	res.Candidates = all.Candidates
	var partSrv, partTool [][]rank.Score
	for _, p := range partRes {
		partSrv, partTool = append(partSrv, p.Servers), append(partTool, p.Tools)
	}
	srvP := needProbs(srvS, partSrv, c.Cal.Servers.ProbAt)
	if c.cfg.Learned != nil {
		res.Described = described(c.Idx, srvS, srvP)
	}
	// Learned evidence (package learn) moves the confidences, and the
	// order follows; with no reports lr is nil and nothing changes.
	var lr *learn.Request
	if !q.describe {
		lr = c.learned(q.Caller, vec, srvS, srvP)
	}
	var learnedSrv map[int]learn.Evidence
	if lr != nil {
		srvS, learnedSrv = learnServers(lr, srvS, srvP)
	}
	keep := needPicks(partSrv, srvS, maxS, func(s rank.Score) bool { return srvP[s.Label] >= srvThr })
	selected := map[int]bool{}
	for i, s := range srvS {
		if len(res.Servers) >= maxS {
			break
		}
		p := srvP[s.Label]
		if p < srvThr || len(res.Servers)+len(keep) >= maxS && !keep[s.Label] {
			continue
		}
		ev, parts := c.Rk.Evidence(s), c.Rk.Parts(s)
		if e, ok := learnedSrv[s.Label]; ok && e.Text != "" {
			ev, parts.Learned = "learned: "+e.Text+"; "+ev, e.Text
		}
		if keep[s.Label] && i >= maxS {
			ev = keptNeed + ev
		}
		delete(keep, s.Label)
		selected[s.Label] = true
		res.Servers = append(res.Servers, classify.Scored{Label: s.Label, ID: c.Idx.Labels[s.Label].ID,
			Confidence: p, Score: s.Score, Evidence: ev, Parts: parts})
	}
	// Tools of the selected servers, best first. Every selected server
	// contributes at least its best tool: a relevant server with nothing to
	// call would be a silent empty answer.
	hasTool := map[int]bool{}
	// Tools keep their confidence in the whole prompt: within a selected
	// server the tool threshold is low and every server brings its best
	// tool, and the part-wise confidence over-stated tools (MetaTool dev
	// split, ECE over returned tools 0.016 -> 0.041: details split off a
	// single request, "the keyword is fashion", have confident bests too).
	// It is computed only for the tools looked at.
	toolP := func(s rank.Score) float64 { return c.Cal.Tools.ProbAt(s.Score, toolS[0].Score-s.Score) }
	var learnedTool map[int]learn.Evidence
	if lr != nil && len(toolS) > 0 {
		toolS, learnedTool = learnTools(lr, toolS, selected, c.Rk.ServerOf, toolP)
		descP := toolP
		toolP = func(s rank.Score) float64 {
			if e, ok := learnedTool[s.Label]; ok {
				return e.P
			}
			return descP(s)
		}
	}
	keepT := needPicks(partTool, toolS, maxT, func(s rank.Score) bool { return selected[c.Rk.ServerOf(s.Label)] && toolP(s) >= toolThr })
	for i, s := range toolS {
		if len(res.Tools) >= maxT {
			break
		}
		si := c.Rk.ServerOf(s.Label)
		if !selected[si] {
			continue
		}
		p := toolP(s)
		if p < toolThr && hasTool[si] {
			continue
		}
		if len(res.Tools)+len(keepT) >= maxT && !keepT[s.Label] {
			continue
		}
		tl := c.toolScore(s, p)
		if e, ok := learnedTool[s.Label]; ok && e.Reports > 0 {
			tl.Evidence, tl.Parts.Learned = "learned: "+e.Text+"; "+tl.Evidence, e.Text
		}
		if keepT[s.Label] && i >= maxT {
			tl.Evidence = keptNeed + tl.Evidence
		}
		delete(keepT, s.Label)
		hasTool[si] = true
		res.Tools = append(res.Tools, tl)
	}
	// Categories, multi-label.
	if len(c.Rk.Categories()) > 0 {
		cs = rank.SortedByScore(cs)
		for _, s := range cs {
			p := c.Cal.CategoriesMulti.ProbAt(s.Score, cs[0].Score-s.Score)
			if len(res.Categories) >= request.MaxCategories || p < catThr {
				break
			}
			res.Categories = append(res.Categories, classify.Scored{Label: s.Label, ID: c.Idx.Labels[s.Label].ID,
				Confidence: p, Score: s.Score, Evidence: c.Rk.Evidence(s), Parts: c.Rk.Parts(s)})
		}
	}
	if len(res.Servers) == 0 {
		why := "no servers to route to"
		if len(srvS) > 0 {
			why = fmt.Sprintf("no server reached confidence %.2f (best %s %.2f)", srvThr,
				c.Idx.Labels[srvS[0].Label].ID, c.Cal.Servers.Prob(srvS[0].Score))
		}
		c.applyNoMatch(&res, why, q.OnNoMatch)
		return res
	}
	res.Reasoning = c.routeReason(res, srvS, srvP, lr != nil)
	return res
}

// learned is the learned evidence for a request with vector vec, whose
// servers srvS have description confidences srvP; nil without any.
func (c *Router) learned(caller string, vec []float32, srvS []rank.Score, srvP map[int]float64) *learn.Request {
	if c.cfg.Learned == nil || len(vec) == 0 || len(srvS) == 0 {
		return nil
	}
	ranked := make([]int, len(srvS))
	for i, s := range srvS {
		ranked[i] = s.Label
	}
	slices.SortStableFunc(ranked, func(a, b int) int { return cmp.Compare(srvP[b], srvP[a]) })
	probs := make([]float64, len(ranked))
	for i, li := range ranked {
		probs[i] = srvP[li]
	}
	return c.cfg.Learned.Request(caller, vec, ranked, probs)
}

// described are the learn.MaxDescribed servers of srvS with the highest
// description-based probabilities, best first.
func described(idx *index.Index, srvS []rank.Score, srvP map[int]float64) []learn.Prob {
	out := make([]learn.Prob, 0, min(len(srvS), learn.MaxDescribed))
	for _, s := range srvS {
		out = append(out, learn.Prob{Server: idx.Labels[s.Label].ID, P: srvP[s.Label]})
	}
	slices.SortStableFunc(out, func(a, b learn.Prob) int { return cmp.Compare(b.P, a.P) })
	return out[:min(len(out), learn.MaxDescribed)]
}

// learnServers sets each server's confidence in srvP to the learned one
// and returns the servers reordered by what the learned evidence adds:
// each server's key is its place in today's order (srvS, by score, as a
// log-odds made monotone along it) moved by the log of the odds ratio the
// learned evidence brings. With evidence that changes nothing the order
// is today's, even where a compound request's parts make the
// confidences disagree with the scores. It returns the evidence by label.
func learnServers(lr *learn.Request, srvS []rank.Score, srvP map[int]float64) ([]rank.Score, map[int]learn.Evidence) {
	ev := make(map[int]learn.Evidence, len(srvS))
	key := make(map[int]float64, len(srvS))
	along := math.Inf(1)
	for _, s := range srvS {
		pd := srvP[s.Label]
		e := lr.Server(s.Label, pd)
		ev[s.Label] = e
		along = math.Min(math.Nextafter(along, math.Inf(-1)), logit(pd))
		key[s.Label] = along + logit(e.P) - logit(pd)
		srvP[s.Label] = e.P
	}
	out := slices.Clone(srvS)
	slices.SortStableFunc(out, func(a, b rank.Score) int { return cmp.Compare(key[b.Label], key[a.Label]) })
	return out, ev
}

// logit is the log-odds of p, kept finite.
func logit(p float64) float64 {
	p = math.Min(math.Max(p, 1e-6), 1-1e-6)
	return math.Log(p / (1 - p))
}

// learnTools is learnServers for the tools of the selected servers: they
// are reordered as servers are, the others keep their places after them.
func learnTools(lr *learn.Request, toolS []rank.Score, selected map[int]bool, serverOf func(int) int,
	toolP func(rank.Score) float64) ([]rank.Score, map[int]learn.Evidence) {
	ev := map[int]learn.Evidence{}
	key := map[int]float64{}
	var in, out []rank.Score
	along := math.Inf(1)
	for _, s := range toolS {
		if !selected[serverOf(s.Label)] {
			out = append(out, s)
			continue
		}
		pd := toolP(s)
		e := lr.Tool(s.Label, pd)
		ev[s.Label] = e
		along = math.Min(math.Nextafter(along, math.Inf(-1)), logit(pd))
		key[s.Label] = along + logit(e.P) - logit(pd)
		in = append(in, s)
	}
	slices.SortStableFunc(in, func(a, b rank.Score) int { return cmp.Compare(key[b.Label], key[a.Label]) })
	return append(in, out...), ev
}

// Needs of a compound request. A prompt that asks for two things ("the
// latest news on Tesla and how it moved the stock market") is scored as a
// whole and as each part alone (needTurns), and a label's score is its best
// over those; but the whole prompt's first five can still all serve one
// need (five finance tools). So when the answer is cut to k labels, places
// are kept for what each part alone ranks first and second, taken in turn
// (every part's best, then every part's second), each still within the
// whole prompt's best needRankDepth×k and above the confidence threshold.
// Only parts of needMinWords words or more count: shorter ones are mostly
// details of one request ("the keyword is fashion"), not a second request.
// The whole prompt's best keeps the first place, at most half the places
// (rounded up) are kept, and the answer stays ordered by score. A server's
// confidence is the best of its confidence in the whole prompt and in each
// part (needProbs), so the best server of a second need is not
// under-stated for falling far below the first need's best. Chosen on the
// MetaTool dev split and its two-need dev prompts (tools/datasets); README
// "Compound requests".
const (
	needPicksPerPart = 2
	needRankDepth    = 2
	needMinWords     = 5
)

// needProbs is each label's confidence: the best of its confidence in the
// whole prompt (overall, best first) and in each part alone, where the gap
// is measured to the part's own best.
func needProbs(overall []rank.Score, parts [][]rank.Score, prob func(score, gap float64) float64) map[int]float64 {
	out := make(map[int]float64, len(overall))
	for _, s := range overall {
		out[s.Label] = prob(s.Score, overall[0].Score-s.Score)
	}
	for _, ps := range parts {
		for _, s := range ps {
			if p := prob(s.Score, ps[0].Score-s.Score); p > out[s.Label] {
				out[s.Label] = p
			}
		}
	}
	return out
}

// keptNeed starts the evidence of a label that is in the answer only
// because a place was kept for it (see needPicks).
const keptNeed = "kept for a separate need of the request; "

// needTurns are the turns of ts that are parts of a compound request
// long enough to be a need on their own, ranked alone as well.
func needTurns(ts []rank.Turn) []int {
	var out []int
	for i := range ts {
		if ts[i].Part && len(strings.Fields(ts[i].Text)) >= needMinWords {
			out = append(out, i)
		}
	}
	return out
}

// needPicks returns the labels kept for the parts' needs among the first
// k of overall (see above); ok tells, from a label's overall score, whether
// it may be kept (above the threshold, of a selected server).
func needPicks(parts [][]rank.Score, overall []rank.Score, k int, ok func(overall rank.Score) bool) map[int]bool {
	keep := map[int]bool{}
	if len(parts) < 2 || len(overall) <= k || k < 2 {
		return keep // no cut, nothing to keep a place for
	}
	rank := make(map[int]int, len(overall))
	for i, s := range overall {
		rank[s.Label] = i + 1
	}
	slots := (k + 1) / 2
	for d := 0; d < needPicksPerPart; d++ {
		for _, ps := range parts {
			if d >= len(ps) || len(keep) >= slots {
				continue
			}
			li := ps[d].Label
			r := rank[li]
			// Within the first k-slots the label is in the answer anyway.
			if r > k-slots && r <= needRankDepth*k && ok(overall[r-1]) {
				keep[li] = true
			}
		}
	}
	return keep
}

func (c *Router) toolScore(s rank.Score, p float64) ToolScore {
	l := &c.Idx.Labels[s.Label]
	return ToolScore{Label: s.Label, Name: l.Name, Server: l.Server, Category: l.Category,
		Confidence: p, Score: s.Score, Evidence: c.Rk.Evidence(s), Parts: c.Rk.Parts(s)}
}

// applyNoMatch answers a request no server was chosen for by policy p,
// saying why.
func (c *Router) applyNoMatch(res *RouteResult, why string, p NoMatch) {
	if p == NoMatchDefault {
		p = NoMatchNone
	}
	res.Abstained = true
	res.AppliedPolicy = p
	res.Tools = nil
	switch p {
	case NoMatchNone:
		res.PolicyReason = why + "; policy NONE: no tools"
	case NoMatchMeta:
		for _, li := range res.Candidates {
			if c.Idx.Labels[li].Category == c.cfg.MetaCategory {
				res.Tools = append(res.Tools, c.toolScore(rank.Score{Label: li}, 0))
			}
		}
		res.PolicyReason = fmt.Sprintf("%s; policy META: %d %s tools", why, len(res.Tools), c.cfg.MetaCategory)
	case NoMatchAll:
		for _, li := range res.Candidates {
			res.Tools = append(res.Tools, c.toolScore(rank.Score{Label: li}, 0))
		}
		res.PolicyReason = fmt.Sprintf("%s; policy ALL: every tool (%d)", why, len(res.Tools))
	}
	res.Reasoning = "abstained: " + res.PolicyReason
}

func (c *Router) routeReason(res RouteResult, srvS []rank.Score, srvP map[int]float64, learned bool) string {
	top := res.Servers[0]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %.2f: %s", top.ID, top.Confidence, top.Evidence)
	if len(srvS) > 1 {
		r := srvS[1]
		p := c.Cal.Servers.ProbAt(r.Score, srvS[0].Score-r.Score)
		if learned {
			p = srvP[r.Label]
		}
		fmt.Fprintf(&b, "; runner-up %s %.2f (margin %.2f)", c.Idx.Labels[r.Label].ID, p, top.Confidence-p)
	}
	return b.String()
}
