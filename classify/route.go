package classify

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/classifierd/classifierd/index"
)

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
}

// RouteResult is a Route answer.
type RouteResult struct {
	Servers    []Scored
	Tools      []ToolScore
	Categories []Scored
	Reasoning  string
	// Candidates are the tool labels the request allowed (after include/exclude).
	Candidates    []int
	Abstained     bool
	AppliedPolicy NoMatch
	PolicyReason  string
}

var validRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true, "": true}

// maxContextTurns bounds how many earlier turns are embedded.
const maxContextTurns = 6

// Route picks the servers and tools relevant to a query and conversation.
func (c *Classifier) Route(ctx context.Context, q RouteQuery) (RouteResult, error) {
	ts, err := c.routeTurns(q)
	if err != nil {
		return RouteResult{}, err
	}
	maxS, err := c.checkK("max_servers", q.MaxServers, c.cfg.DefaultMaxServers)
	if err != nil {
		return RouteResult{}, err
	}
	maxT, err := c.checkK("max_tools", q.MaxTools, c.cfg.DefaultMaxTools)
	if err != nil {
		return RouteResult{}, err
	}
	if err := checkMinConf(q.MinConfidence); err != nil {
		return RouteResult{}, err
	}
	if len(c.srvs) == 0 {
		return RouteResult{}, fmt.Errorf("%w: no servers (the catalog had none)", ErrNoLabels)
	}
	allowed, err := c.allowedServers(q.Include, q.Exclude)
	if err != nil {
		return RouteResult{}, err
	}
	ts, err = c.embedTurns(ctx, ts)
	if err != nil {
		return RouteResult{}, err
	}
	c.weighContext(ts, allowed)
	return c.route(ts, allowed, maxS, maxT, q), nil
}

// routeTurns builds the weighted turns: the query (or the last user
// message) counts fully, earlier turns count less, the older the less.
func (c *Classifier) routeTurns(q RouteQuery) ([]turn, error) {
	if len(q.Messages) > c.cfg.Limits.MaxMessages {
		return nil, fmt.Errorf("%w: %d messages, limit %d", ErrBadArgument, len(q.Messages), c.cfg.Limits.MaxMessages)
	}
	for i, m := range q.Messages {
		if !validRoles[m.Role] {
			return nil, fmt.Errorf("%w: messages[%d].role %q is not user, assistant, system or tool", ErrBadArgument, i, m.Role)
		}
		if len(m.Content) > c.cfg.Limits.MaxTextBytes {
			return nil, fmt.Errorf("%w: messages[%d] is %d bytes, limit %d", ErrTextTooLong, i, len(m.Content), c.cfg.Limits.MaxTextBytes)
		}
	}
	msgs := q.Messages
	var latest string
	if strings.TrimSpace(q.Query) != "" {
		if err := c.CheckText("query", q.Query); err != nil {
			return nil, err
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
			return nil, fmt.Errorf("%w: query or a user message is required", ErrEmptyText)
		}
		if err := c.CheckText(fmt.Sprintf("messages[%d].content", i), msgs[i].Content); err != nil {
			return nil, err
		}
		latest = msgs[i].Content
		msgs = msgs[:i]
	}
	ts := c.needTurns(latest)
	f := c.cal.Fusion
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
		ts = append(ts, turn{text: m.Content, weight: 1, penalty: tp, context: true})
		n++
		p += f.ContextDecay
	}
	return ts, nil
}

// weighContext penalises earlier turns by how clearly the current turn
// alone picks a server: a topic change ("now post in #general") moves away
// from the old servers, while an ambiguous follow-up ("and the second
// one?") keeps them.
func (c *Classifier) weighContext(ts []turn, allowed map[int]bool) {
	var cur []turn
	for _, t := range ts {
		if !t.context {
			cur = append(cur, t)
		}
	}
	if len(cur) == len(ts) {
		return
	}
	f := c.cal.Fusion
	var p0 float64
	if srvS, _, _, _ := c.routeScores(cur, allowed); len(srvS) > 0 {
		p0 = c.cal.Servers.Prob(srvS[0].score)
	}
	// clarity is 0 when the current turn alone reaches no server
	// (p ≤ ClearFrom) and 1 when it plainly does (p ≥ ClearFrom+ClearSpan).
	clarity := math.Max(0, math.Min(1, (p0-f.ClearFrom)/f.ClearSpan))
	for i := range ts {
		if ts[i].context {
			ts[i].penalty += f.ClarityPenalty * clarity
		}
	}
}

// allServers is the set of every server label.
func (c *Classifier) allServers() map[int]bool {
	all := make(map[int]bool, len(c.srvs))
	for _, li := range c.srvs {
		all[li] = true
	}
	return all
}

func (c *Classifier) allowedServers(include, exclude []string) (map[int]bool, error) {
	var allowed map[int]bool
	if len(include) == 0 {
		allowed = c.allServers()
	} else {
		allowed = map[int]bool{}
		for _, id := range include {
			li, ok := c.idx.Lookup(index.KindServer, id)
			if !ok {
				return nil, fmt.Errorf("%w: include_servers has %q", ErrUnknownServer, clip(id, 64))
			}
			allowed[li] = true
		}
	}
	for _, id := range exclude {
		li, ok := c.idx.Lookup(index.KindServer, id)
		if !ok {
			return nil, fmt.Errorf("%w: exclude_servers has %q", ErrUnknownServer, clip(id, 64))
		}
		delete(allowed, li)
	}
	return allowed, nil
}

// routeScores computes the fused server and tool scores for the allowed
// servers, best first. Fit uses it too, so calibration sees exactly what
// Route ranks.
func (c *Classifier) routeScores(ts []turn, allowed map[int]bool) (srvS, toolS, catS []labelScore, cand []int) {
	f := c.cal.Fusion
	ok := make([]bool, len(c.idx.Labels)) // allowed, by label
	for li := range allowed {
		ok[li] = true
	}
	for _, li := range c.tools {
		if ok[c.serverOf[li]] {
			cand = append(cand, li)
		}
	}
	toolS = c.scoreLabels(cand, ts)
	bestTool := make([]int, len(c.idx.Labels)) // server label -> 1 + position in toolS of its best tool
	for i, s := range toolS {
		si := c.serverOf[s.label]
		if b := bestTool[si]; b == 0 || s.score > toolS[b-1].score {
			bestTool[si] = i + 1
		}
	}
	var srvLs []int
	for _, li := range c.srvs {
		if ok[li] {
			srvLs = append(srvLs, li)
		}
	}
	srvS = c.scoreLabels(srvLs, ts)
	// Categories carry the most examples, so they vouch for the servers
	// that serve them.
	catS = c.categoryScores(ts)
	catScore := map[string]labelScore{}
	if f.ServerFromCategory > 0 {
		for _, cs := range catS {
			catScore[c.idx.Labels[cs.label].ID] = cs
		}
	}
	srvScore := make([]float64, len(c.idx.Labels))
	for i, s := range srvS {
		if b := bestTool[s.label]; b > 0 && f.ServerFromTools*toolS[b-1].score > srvS[i].score {
			bt := toolS[b-1]
			bt.score = f.ServerFromTools * bt.score
			bt.via = "tool " + c.idx.Labels[bt.label].Name + ": "
			bt.label = s.label
			srvS[i] = bt
		}
		// A category vouches for all its servers alike; the server's own
		// match breaks the tie.
		own := srvS[i].score
		for _, cat := range c.idx.Labels[s.label].Categories {
			if cs, ok := catScore[cat]; ok {
				v := f.ServerFromCategory*cs.score + (1-f.ServerFromCategory)*own
				if v > srvS[i].score {
					cs.score = v
					cs.via = "category " + cat + ": "
					cs.label = s.label
					srvS[i] = cs
				}
			}
		}
		srvScore[s.label] = srvS[i].score
	}
	srvS = sortedByScore(srvS)
	for i := range toolS {
		s := &toolS[i]
		s.score = (1-f.ToolFromServer)*s.score + f.ToolFromServer*srvScore[c.serverOf[s.label]]
	}
	return srvS, sortedByScore(toolS), catS, cand
}

// sortedByScore returns ls ordered by score, best first, ties in their
// original order. It sorts positions rather than the (large) structs.
func sortedByScore(ls []labelScore) []labelScore {
	order := make([]int32, len(ls))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(ls[b].score, ls[a].score) })
	out := make([]labelScore, len(ls))
	for i, j := range order {
		out[i] = ls[j]
	}
	return out
}

func (c *Classifier) route(ts []turn, allowed map[int]bool, maxS, maxT int, q RouteQuery) RouteResult {
	srvThr, toolThr, catThr := c.cal.Servers.Threshold, c.cal.Tools.Threshold, c.cal.CategoriesMulti.Threshold
	if q.MinConfidence != nil {
		srvThr, toolThr, catThr = float64(*q.MinConfidence), float64(*q.MinConfidence), float64(*q.MinConfidence)
	}
	var res RouteResult
	srvS, toolS, cs, cand := c.routeScores(ts, allowed)
	res.Candidates = cand
	// The parts of a compound request are needs of their own: a server's
	// confidence is the best of its confidence in the whole prompt and in
	// each part alone, so a request for the filesystem and GitHub gets both
	// above the threshold although GitHub ranks well below the filesystem
	// in the whole prompt.
	partSrv, partTool := c.partScores(ts, allowed)
	srvP := needProbs(srvS, partSrv, c.cal.Servers.ProbAt)
	keep := needPicks(partSrv, srvS, maxS, func(s labelScore) bool { return srvP[s.label] >= srvThr })
	selected := map[int]bool{}
	for i, s := range srvS {
		if len(res.Servers) >= maxS {
			break
		}
		p := srvP[s.label]
		if p < srvThr || len(res.Servers)+len(keep) >= maxS && !keep[s.label] {
			continue
		}
		ev := c.evidence(s)
		if keep[s.label] && i >= maxS {
			ev = keptNeed + ev
		}
		delete(keep, s.label)
		selected[s.label] = true
		res.Servers = append(res.Servers, Scored{Label: s.label, ID: c.idx.Labels[s.label].ID,
			Confidence: p, Score: s.score, Evidence: ev})
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
	toolP := func(s labelScore) float64 { return c.cal.Tools.ProbAt(s.score, toolS[0].score-s.score) }
	keepT := needPicks(partTool, toolS, maxT, func(s labelScore) bool { return selected[c.serverOf[s.label]] && toolP(s) >= toolThr })
	for i, s := range toolS {
		if len(res.Tools) >= maxT {
			break
		}
		si := c.serverOf[s.label]
		if !selected[si] {
			continue
		}
		p := toolP(s)
		if p < toolThr && hasTool[si] {
			continue
		}
		if len(res.Tools)+len(keepT) >= maxT && !keepT[s.label] {
			continue
		}
		tl := c.toolScore(s, p)
		if keepT[s.label] && i >= maxT {
			tl.Evidence = keptNeed + tl.Evidence
		}
		delete(keepT, s.label)
		hasTool[si] = true
		res.Tools = append(res.Tools, tl)
	}
	// Categories, multi-label.
	if len(c.cats) > 0 {
		cs = sortedByScore(cs)
		for _, s := range cs {
			p := c.cal.CategoriesMulti.Prob(s.score)
			if len(res.Categories) >= 5 || p < catThr {
				break
			}
			res.Categories = append(res.Categories, Scored{Label: s.label, ID: c.idx.Labels[s.label].ID,
				Confidence: p, Score: s.score, Evidence: c.evidence(s)})
		}
	}
	if len(res.Servers) == 0 {
		c.applyNoMatch(&res, srvS, srvThr, q.OnNoMatch)
		return res
	}
	res.Reasoning = c.routeReason(res, srvS)
	return res
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
func needProbs(overall []labelScore, parts [][]labelScore, prob func(score, gap float64) float64) map[int]float64 {
	out := make(map[int]float64, len(overall))
	for _, s := range overall {
		out[s.label] = prob(s.score, overall[0].score-s.score)
	}
	for _, ps := range parts {
		for _, s := range ps {
			if p := prob(s.score, ps[0].score-s.score); p > out[s.label] {
				out[s.label] = p
			}
		}
	}
	return out
}

// keptNeed starts the evidence of a label that is in the answer only
// because a place was kept for it (see needPicks).
const keptNeed = "kept for a separate need of the request; "

// partScores scores each part of a compound request that is long enough
// to be a need on its own: the ranked servers and tools of each.
func (c *Classifier) partScores(ts []turn, allowed map[int]bool) (srv, tool [][]labelScore) {
	for i := range ts {
		if ts[i].part && len(strings.Fields(ts[i].text)) >= needMinWords {
			s, t, _, _ := c.routeScores(ts[i:i+1], allowed)
			srv, tool = append(srv, s), append(tool, t)
		}
	}
	return srv, tool
}

// needPicks returns the labels kept for the parts' needs among the first
// k of overall (see above); ok tells, from a label's overall score, whether
// it may be kept (above the threshold, of a selected server).
func needPicks(parts [][]labelScore, overall []labelScore, k int, ok func(overall labelScore) bool) map[int]bool {
	keep := map[int]bool{}
	if len(parts) < 2 || len(overall) <= k || k < 2 {
		return keep // no cut, nothing to keep a place for
	}
	rank := make(map[int]int, len(overall))
	for i, s := range overall {
		rank[s.label] = i + 1
	}
	slots := (k + 1) / 2
	for d := 0; d < needPicksPerPart; d++ {
		for _, ps := range parts {
			if d >= len(ps) || len(keep) >= slots {
				continue
			}
			li := ps[d].label
			r := rank[li]
			// Within the first k-slots the label is in the answer anyway.
			if r > k-slots && r <= needRankDepth*k && ok(overall[r-1]) {
				keep[li] = true
			}
		}
	}
	return keep
}

func (c *Classifier) toolScore(s labelScore, p float64) ToolScore {
	l := &c.idx.Labels[s.label]
	return ToolScore{Label: s.label, Name: l.Name, Server: l.Server, Category: l.Category,
		Confidence: p, Score: s.score, Evidence: c.evidence(s)}
}

func (c *Classifier) applyNoMatch(res *RouteResult, srvS []labelScore, thr float64, p NoMatch) {
	if p == NoMatchDefault {
		p = NoMatchNone
	}
	res.Abstained = true
	res.AppliedPolicy = p
	why := "no servers to route to"
	if len(srvS) > 0 {
		why = fmt.Sprintf("no server reached confidence %.2f (best %s %.2f)", thr,
			c.idx.Labels[srvS[0].label].ID, c.cal.Servers.Prob(srvS[0].score))
	}
	res.Tools = nil
	switch p {
	case NoMatchNone:
		res.PolicyReason = why + "; policy NONE: no tools"
	case NoMatchMeta:
		for _, li := range res.Candidates {
			if c.idx.Labels[li].Category == c.cfg.MetaCategory {
				res.Tools = append(res.Tools, c.toolScore(labelScore{label: li}, 0))
			}
		}
		res.PolicyReason = fmt.Sprintf("%s; policy META: %d %s tools", why, len(res.Tools), c.cfg.MetaCategory)
	case NoMatchAll:
		for _, li := range res.Candidates {
			res.Tools = append(res.Tools, c.toolScore(labelScore{label: li}, 0))
		}
		res.PolicyReason = fmt.Sprintf("%s; policy ALL: every tool (%d)", why, len(res.Tools))
	}
	res.Reasoning = "abstained: " + res.PolicyReason
}

func (c *Classifier) routeReason(res RouteResult, srvS []labelScore) string {
	top := res.Servers[0]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %.2f: %s", top.ID, top.Confidence, top.Evidence)
	if len(srvS) > 1 {
		r := srvS[1]
		p := c.cal.Servers.ProbAt(r.score, srvS[0].score-r.score)
		fmt.Fprintf(&b, "; runner-up %s %.2f (margin %.2f)", c.idx.Labels[r.label].ID, p, top.Confidence-p)
	}
	return b.String()
}
