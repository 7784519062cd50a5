package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/classifierd/classifierd/index"
)

// View is the learner as one served index sees it: its key, and its
// servers and tools by label with each tool's content hash. It is made
// once per index (Learner.View) and immutable.
type View struct {
	l   *Learner
	key string
	idx *index.Index
	// server ids by label, and labels by server id or name.
	srvOf  map[string]int
	toolOf map[ToolRef]int
	// hash is each tool label's content hash.
	hash map[int]string
}

// ToolHash is the content hash of a tool's definition: its name,
// description and input schema. A tool whose hash changes is learned
// again from nothing.
func ToolHash(l *index.Label) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", l.Server, l.Name, l.Description)
	h.Write(l.InputSchema)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// View returns the learner's view of idx. Safe on a nil Learner (learning
// off): the view is nil, and a nil view learns and tells nothing.
func (l *Learner) View(idx *index.Index) *View {
	if l == nil {
		return nil
	}
	v := &View{l: l, key: Key(idx.Fingerprint, l.cfg.Scope), idx: idx, srvOf: map[string]int{}, toolOf: map[ToolRef]int{}, hash: map[int]string{}}
	for _, li := range idx.LabelsOf(index.KindServer) {
		lb := &idx.Labels[li]
		v.srvOf[lb.ID] = li
		if n := idx.ServerName(lb.ID); n != "" {
			if _, taken := v.srvOf[n]; !taken {
				v.srvOf[n] = li
			}
		}
	}
	for _, li := range idx.LabelsOf(index.KindTool) {
		lb := &idx.Labels[li]
		v.toolOf[ToolRef{Server: lb.Server, Name: lb.Name}] = li
		v.hash[li] = ToolHash(lb)
	}
	return v
}

// Key is the key the view's reports are kept under.
func (v *View) Key() string { return v.key }

// Evidence is what the reports say about one server or tool for one
// request, and the confidence that results.
type Evidence struct {
	// P is the confidence with the learned evidence, from the
	// description-based one the caller gave.
	P float64
	// Rate is the share of the tasks like this one that called it, and
	// Similar how many such tasks there were (in report weights).
	Rate, Similar float64
	// Base is the share of all reported tasks that called it, out of
	// Reports.
	Base, Reports float64
	// Co is the share of the tasks calling CoWith (a server chosen for
	// this request) that called it too.
	Co     float64
	CoWith string
	// Usage is the cosine of the request with the usage vector (the
	// weighted mean of the requests that called it); 0 if never called.
	Usage float64
	// Text says it in one phrase: "called in 38% of tasks like this".
	Text string
}

// Request is the learned evidence for one request: made by View.Request,
// read by Server and Tool. Nil when nothing is learned (Server and Tool
// then answer the description's confidence unchanged).
type Request struct {
	v     *View
	m     *model
	t     *tally
	norms map[int]float64
	w     Weights
	// chosen are the chosen servers' ids; avg is the base rate of an
	// average server of the index.
	chosen []int
	avg    float64
}

// Request tallies the reports for a request of caller (its identity, as
// in Use) with unit vector q. ranked
// are the server labels best first by description confidence (probs):
// the first CoTop of them above CoFrom are the chosen servers whose
// co-use counts. It returns nil when the view's key has no reports.
func (v *View) Request(caller string, q []float32, ranked []int, probs []float64) *Request {
	if v == nil || len(q) == 0 {
		return nil
	}
	l := v.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	m := l.models[v.key]
	if m == nil || len(m.recs) == 0 || m.dims != len(q) {
		return nil
	}
	w := l.cfg.Weigh
	var chosen []int
	for i, li := range ranked {
		if len(chosen) >= w.CoTop || probs[i] < w.CoFrom {
			break
		}
		if id, ok := m.names[v.idx.Labels[li].ID]; ok {
			chosen = append(chosen, id)
		}
	}
	now := time.Now()
	r := &Request{v: v, m: m, w: w, chosen: chosen}
	r.t = m.tally(q, now, l.cfg, caller, chosen)
	// The average server's base rate: the servers called per reported
	// task over the servers of the index.
	var calls float64
	for _, li := range ranked {
		if id, ok := m.names[v.idx.Labels[li].ID]; ok {
			calls += r.t.n[id]
		}
	}
	if r.t.total > 0 && len(ranked) > 0 {
		r.avg = calls / r.t.total / float64(len(ranked))
	}
	l.usageMu.Lock()
	r.norms = m.usageNorms(now, l.cfg)
	l.usageMu.Unlock()
	return r
}

// Server is the evidence for server label li whose description-based
// confidence is pd.
func (r *Request) Server(li int, pd float64) Evidence {
	if r == nil {
		return Evidence{P: pd}
	}
	t, w := r.t, r.w
	id, ok := r.m.names[r.v.idx.Labels[li].ID]
	var n, den, u, wden float64
	if ok {
		n, den, u, wden = t.n[id], t.den[id], t.u[id], t.wden[id]
	} else {
		// Never called nor shown: the reports that did not say what
		// they showed count against it.
		den, wden = t.den0, t.wden0
	}
	e := Evidence{Reports: den, Similar: wden}
	e.Base = n / (den + 1)
	// A base rate or co-use counts for what it has above the rate of an
	// average server: the descriptions' confidence already holds a
	// typical server's prior, and a server every task needs (a
	// filesystem a hub's agents always write to) is what they miss.
	avg := r.avg
	learned := excess(e.Base, avg) * t.total / (t.total + w.Global)
	for _, a := range r.chosen {
		if a == id && ok {
			continue
		}
		// Shrunk to the base rate by coPrior tasks: one task calling
		// both is not a habit.
		c := 0.0
		if ok {
			c = (t.co[a][id] + coPrior*e.Base) / (t.coN[a] + coPrior)
		}
		if c > e.Co {
			e.Co, e.CoWith = c, r.m.list[a]
		}
	}
	learned = max(learned, excess(e.Co, max(e.Base, avg)))
	prior := 1 - (1-pd)*(1-learned)
	local := (u + w.Local*prior) / (wden + w.Local)
	e.P = local
	if w.PromoteOnly {
		e.P = max(prior, local)
	}
	if wden > 0 {
		e.Rate = u / wden
	}
	if ok && r.norms[id] > 0 {
		e.Usage = t.usage[id] / r.norms[id]
	}
	e.Text = r.text(e, n)
	return e
}

// Tool is the evidence for tool label li whose description-based
// confidence is pd: how often it is called in the tasks that call its
// server.
func (r *Request) Tool(li int, pd float64) Evidence {
	if r == nil {
		return Evidence{P: pd}
	}
	lb := &r.v.idx.Labels[li]
	t, w := r.t, r.w
	sid, ok := r.m.names[lb.Server]
	if !ok {
		return Evidence{P: pd}
	}
	tden, twden := t.tden[sid], t.twden[sid]
	if tden == 0 {
		return Evidence{P: pd}
	}
	var n, u float64
	if id, ok := r.m.names[toolKey(lb.Server, lb.Name, r.v.hash[li])]; ok {
		n, u = t.n[id], t.u[id]
	}
	e := Evidence{Reports: tden, Similar: twden, Base: n / (tden + 1)}
	prior := 1 - (1-pd)*(1-e.Base*tden/(tden+w.Global))
	e.P = (u + w.Local*prior) / (twden + w.Local)
	if twden > 0 {
		e.Rate = u / twden
	}
	e.Text = r.text(e, n)
	return e
}

// coPrior is how many tasks the base rate weighs in a co-use rate.
const coPrior = 4

// excess is how far rate p is above base rate b, as a share of what is
// above b: 0 at or below b, p when b is 0.
func excess(p, b float64) float64 {
	if p <= b || b >= 1 {
		return 0
	}
	return (p - b) / (1 - b)
}

// text is the evidence in one phrase, from the part that weighs most.
func (r *Request) text(e Evidence, n float64) string {
	switch {
	case e.Similar >= 0.5:
		return fmt.Sprintf("called in %.0f%% of tasks like this (%.1f similar of %.0f reported)", 100*e.Rate, e.Similar, e.Reports)
	case e.Co > e.Base && e.CoWith != "":
		return fmt.Sprintf("called with %s in %.0f%% of its tasks", e.CoWith, 100*e.Co)
	case n > 0:
		return fmt.Sprintf("called in %.0f%% of %.0f reported tasks", 100*e.Base, e.Reports)
	}
	return fmt.Sprintf("not called in %.0f reported tasks", e.Reports)
}
