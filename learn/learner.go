package learn

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Store keeps the records: Memory (none), SQLite, or Redis shared by
// replicas. Errors that mean the store cannot be reached wrap
// ErrUnavailable.
type Store interface {
	// Put adds or replaces (by key and id) a record.
	Put(ctx context.Context, r Record) error
	// Delete removes the records of key with these ids.
	Delete(ctx context.Context, key string, ids []string) error
	// Reset removes identity's records (every record if identity is "").
	Reset(ctx context.Context, identity string) error
	// Load returns every record.
	Load(ctx context.Context) ([]Record, error)
	Close() error
}

// Follower is a Store other processes write to as well (Redis): Changes
// returns the records put since cursor (all of them, and reload true,
// when they must replace what the learner holds: after a reset).
type Follower interface {
	Changes(ctx context.Context, cursor int64) (recs []Record, next int64, reload bool, err error)
}

// Learner keeps the reports of every key and answers with their evidence.
// Safe for concurrent use. A nil *Learner is learning off.
type Learner struct {
	cfg   Config
	store Store

	mu      sync.RWMutex
	models  map[string]*model
	pending *pending
	limits  *limiters
	cursor  int64

	stored, ignored, refused atomic.Int64
}

// New returns a learner over st (nil: memory only), with the records st
// holds already.
func New(ctx context.Context, cfg Config, st Store) (*Learner, error) {
	cfg = cfg.WithDefaults()
	if st == nil {
		st = Memory{}
	}
	l := &Learner{cfg: cfg, store: st, models: map[string]*model{}, pending: newPending(cfg), limits: newLimiters(cfg)}
	if err := l.reload(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Close closes the store.
func (l *Learner) Close() error {
	if l == nil {
		return nil
	}
	return l.store.Close()
}

// Config is the configuration in use, defaults filled in.
func (l *Learner) Config() Config { return l.cfg }

func (l *Learner) reload(ctx context.Context) error {
	recs, err := l.store.Load(ctx)
	if err != nil {
		return err
	}
	models := map[string]*model{}
	var drop []Record
	for _, r := range recs {
		m := models[r.Key]
		if m == nil {
			m = newModel(r.Key)
			models[r.Key] = m
		}
		for _, id := range m.put(r, l.cfg) {
			drop = append(drop, Record{Key: r.Key, ID: id})
		}
	}
	l.mu.Lock()
	l.models = models
	l.mu.Unlock()
	for _, d := range drop {
		if err := l.store.Delete(ctx, d.Key, []string{d.ID}); err != nil {
			return err
		}
	}
	return nil
}

// Observe remembers a routed request — its unit vector q, the servers
// the descriptions ranked first with their probabilities (the route's
// Described), the caller's identity and the view's key — for reports by
// request id, and returns the id. Nothing is kept when the view is nil
// (learning off).
func (v *View) Observe(identity string, q []float32, described []Prob) string {
	if v == nil || len(q) == 0 {
		return ""
	}
	return v.l.pending.put(pendingReq{key: v.key, identity: identity, vec: Quantize(q), described: v.described(described)})
}

// described is d limited to the view's servers, MaxDescribed of them,
// probabilities within [0, 1].
func (v *View) described(d []Prob) []Prob {
	var out []Prob
	for _, p := range d {
		if len(out) == MaxDescribed {
			break
		}
		li, ok := v.srvOf[p.Server]
		if !ok || p.P != p.P {
			continue
		}
		out = append(out, Prob{Server: v.idx.Labels[li].ID, P: min(max(p.P, 0), 1)})
	}
	return out
}

// Use is one report: what the agent called for a request.
type Use struct {
	// RequestID is a routed request's id (Observe); empty for a report
	// by query, whose vector is Vec and whose description-based
	// probabilities are Described (route.RouteResult's).
	RequestID string
	Vec       []float32
	Described []Prob
	// Identity is the reporting caller's (server.Caller.Quota): a
	// request id is found only for the identity that routed it.
	Identity string
	Servers  []string
	Tools    []ToolRef
	Shown    []string
	// Merge adds to an earlier report of the same request instead of
	// replacing it (the proxy reports each call as it is forwarded).
	Merge bool
}

// Result is what a report did.
type Result struct {
	// ID is the stored record's id: the request id, or one made for a
	// report by query.
	ID string
	// Stored is false when nothing usable remained (every name unknown).
	Stored           bool
	Servers, Tools   int
	IgnoredServers   []string
	IgnoredTools     []ToolRef
	IgnoredShown     []string
	ServersRequested int
}

// Report stores u, validated against the view's catalog: unknown servers
// and tools are listed as ignored, not stored. A second report of one
// request id replaces the first (or adds to it with Merge).
func (v *View) Report(ctx context.Context, u Use) (Result, error) {
	if v == nil {
		return Result{}, ErrOff
	}
	l := v.l
	if err := checkUse(u); err != nil {
		l.refused.Add(1)
		return Result{}, err
	}
	if !l.limits.allow(u.Identity) {
		l.refused.Add(1)
		return Result{}, ErrRateLimited
	}
	key, vec, id := v.key, u.Vec, u.RequestID
	if id != "" {
		p, ok := l.pending.get(id, u.Identity)
		if !ok {
			l.refused.Add(1)
			return Result{}, fmt.Errorf("%w: %q", ErrUnknownRequest, clipID(id))
		}
		return v.store(ctx, u, id, p.key, p.vec, p.described)
	}
	if len(vec) == 0 {
		return Result{}, fmt.Errorf("%w: request_id or query is required", ErrBadReport)
	}
	id = newID("rp-")
	return v.store(ctx, u, id, key, Quantize(vec), v.described(u.Described))
}

func (v *View) store(ctx context.Context, u Use, id, key string, vec []int8, described []Prob) (Result, error) {
	l := v.l
	res := Result{ID: id}
	srv := map[string]bool{}
	for _, s := range u.Servers {
		if li, ok := v.srvOf[s]; ok {
			srv[v.idx.Labels[li].ID] = true
		} else if !slices.Contains(res.IgnoredServers, s) {
			res.IgnoredServers = append(res.IgnoredServers, s)
		}
	}
	var tools []ToolUse
	seen := map[ToolUse]bool{}
	for _, t := range u.Tools {
		sid := t.Server
		if li, ok := v.srvOf[sid]; ok {
			sid = v.idx.Labels[li].ID
		}
		li, ok := v.toolOf[ToolRef{Server: sid, Name: t.Name}]
		if !ok {
			res.IgnoredTools = append(res.IgnoredTools, t)
			continue
		}
		tu := ToolUse{Server: sid, Name: t.Name, Hash: v.hash[li]}
		if !seen[tu] {
			seen[tu] = true
			tools = append(tools, tu)
		}
		srv[sid] = true
	}
	var shown []string
	for _, s := range u.Shown {
		if li, ok := v.srvOf[s]; ok {
			shown = append(shown, v.idx.Labels[li].ID)
		} else {
			res.IgnoredShown = append(res.IgnoredShown, s)
		}
	}
	named := len(u.Servers) + len(u.Tools)
	if named > 0 && len(srv) == 0 {
		// Every name was unknown: storing it as "called nothing" would
		// be a report the caller did not make.
		l.ignored.Add(1)
		return res, nil
	}
	r := Record{ID: id, Key: key, Identity: u.Identity, At: time.Now().UTC(), Vec: vec, Tools: tools, Described: described}
	for s := range srv {
		r.Servers = append(r.Servers, s)
	}
	slices.Sort(r.Servers)
	if len(shown) > 0 {
		for s := range srv {
			shown = append(shown, s) // what was called was shown
		}
		slices.Sort(shown)
		r.Shown = slices.Compact(shown)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.models[key]
	if m == nil {
		m = newModel(key)
		l.models[key] = m
	}
	if old, ok := m.byID[id]; ok && u.Merge {
		r = merge(old.r, r)
	}
	if err := l.store.Put(ctx, r); err != nil {
		return Result{}, err
	}
	if dropped := m.put(r, l.cfg); len(dropped) > 0 {
		if err := l.store.Delete(ctx, key, dropped); err != nil {
			return Result{}, err
		}
	}
	l.stored.Add(1)
	res.Stored, res.Servers, res.Tools = true, len(r.Servers), len(r.Tools)
	return res, nil
}

// merge is old with what r adds: its servers, tools and shown servers.
func merge(old, r Record) Record {
	out := old
	out.At = r.At
	out.Servers = union(old.Servers, r.Servers)
	out.Shown = union(old.Shown, r.Shown)
	out.Tools = slices.Clone(old.Tools)
	for _, t := range r.Tools {
		if !slices.Contains(out.Tools, t) {
			out.Tools = append(out.Tools, t)
		}
	}
	return out
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func checkUse(u Use) error {
	if u.RequestID != "" && len(u.Vec) > 0 {
		return fmt.Errorf("%w: give request_id or query, not both", ErrBadReport)
	}
	if len(u.RequestID) > MaxRequestIDBytes {
		return fmt.Errorf("%w: request_id is %d bytes, limit %d", ErrBadReport, len(u.RequestID), MaxRequestIDBytes)
	}
	for what, n := range map[string]int{"servers": len(u.Servers), "tools": len(u.Tools), "shown_servers": len(u.Shown)} {
		if n > MaxNames {
			return fmt.Errorf("%w: %d %s, limit %d", ErrBadReport, n, what, MaxNames)
		}
	}
	for i, s := range u.Servers {
		if err := checkName(fmt.Sprintf("servers[%d]", i), s); err != nil {
			return err
		}
	}
	for i, s := range u.Shown {
		if err := checkName(fmt.Sprintf("shown_servers[%d]", i), s); err != nil {
			return err
		}
	}
	for i, t := range u.Tools {
		if err := checkName(fmt.Sprintf("tools[%d].server", i), t.Server); err != nil {
			return err
		}
		if err := checkName(fmt.Sprintf("tools[%d].name", i), t.Name); err != nil {
			return err
		}
	}
	return nil
}

func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Reset forgets identity's reports (every report if identity is ""), in
// the store and in memory, and the requests waiting for a report.
func (l *Learner) Reset(ctx context.Context, identity string) (int, error) {
	if l == nil {
		return 0, ErrOff
	}
	if err := l.store.Reset(ctx, identity); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, m := range l.models {
		n += len(m.remove(func(x *rec) bool { return identity == "" || x.r.Identity == identity }))
		if len(m.recs) == 0 {
			delete(l.models, k)
		}
	}
	l.pending.reset(identity)
	return n, nil
}

// Export returns identity's records (all if ""), oldest first.
func (l *Learner) Export(identity string) []Record {
	if l == nil {
		return nil
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []Record
	for _, m := range l.models {
		out = append(out, m.records(identity)...)
	}
	slices.SortStableFunc(out, func(a, b Record) int { return a.At.Compare(b.At) })
	return out
}

// Info is how much has been learned.
type Info struct {
	Enabled bool
	Key     string
	// Reports, Identities, Servers and Tools are counted under the
	// view's key; AllReports under every key.
	Reports, Identities, Servers, Tools, AllReports int
	Pending                                         int
	Last                                            time.Time
	HalfLife                                        time.Duration
	// Stored, Ignored and Refused count reports since start: stored,
	// ignored (every name unknown), refused (an error).
	Stored, Ignored, Refused int64
}

// Info describes what the view's key has learned.
func (v *View) Info() Info {
	if v == nil {
		return Info{}
	}
	l := v.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	in := Info{Enabled: true, Key: v.key, Pending: l.pending.len(), HalfLife: l.cfg.HalfLife,
		Stored: l.stored.Load(), Ignored: l.ignored.Load(), Refused: l.refused.Load()}
	for k, m := range l.models {
		in.AllReports += len(m.recs)
		if k == v.key {
			in.Reports, in.Identities, in.Servers, in.Tools, in.Last = m.summary()
		}
	}
	return in
}

// Sync brings the learner in step with a store other processes write to
// (a Follower), every interval until ctx ends; a store that is not one
// needs no syncing. report gets the errors.
func (l *Learner) Sync(ctx context.Context, every time.Duration, report func(error)) {
	f, ok := l.store.(Follower)
	if !ok {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := l.syncOnce(ctx, f); err != nil && ctx.Err() == nil {
			report(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SyncNow is one Sync step (tests, and the start).
func (l *Learner) SyncNow(ctx context.Context) error {
	f, ok := l.store.(Follower)
	if !ok {
		return nil
	}
	return l.syncOnce(ctx, f)
}

func (l *Learner) syncOnce(ctx context.Context, f Follower) error {
	l.mu.RLock()
	cur := l.cursor
	l.mu.RUnlock()
	recs, next, reload, err := f.Changes(ctx, cur)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if reload {
		l.models = map[string]*model{}
	}
	for _, r := range recs {
		m := l.models[r.Key]
		if m == nil {
			m = newModel(r.Key)
			l.models[r.Key] = m
		}
		m.put(r, l.cfg)
	}
	l.cursor = next
	return nil
}

// Memory is the store of a learner that keeps nothing past its process.
type Memory struct{}

// Put implements Store.
func (Memory) Put(context.Context, Record) error { return nil }

// Delete implements Store.
func (Memory) Delete(context.Context, string, []string) error { return nil }

// Reset implements Store.
func (Memory) Reset(context.Context, string) error { return nil }

// Load implements Store.
func (Memory) Load(context.Context) ([]Record, error) { return nil, nil }

// Close implements Store.
func (Memory) Close() error { return nil }

// pendingReq is a routed request waiting for its report.
type pendingReq struct {
	id        string
	key       string
	identity  string
	vec       []int8
	described []Prob
	at        time.Time
	all, own  *list.Element // in pending.order and in its identity's list
}

// pending holds routed requests by id, oldest first, bounded in all and
// per identity, each for cfg.PendingTTL. When it is full, the identity
// holding the most makes way (its oldest request), so busy identities
// push out their own requests before anyone else's: an identity keeps at
// least MaxPending divided by the number of identities holding requests.
// Every operation is O(1) in the requests held; choosing whom to evict
// when full is O(identities holding requests).
type pending struct {
	mu    sync.Mutex
	cfg   Config
	order *list.List // of *pendingReq, oldest first
	byID  map[string]*pendingReq
	users map[string]*list.List // identity's own requests, oldest first
}

func newPending(cfg Config) *pending {
	return &pending{cfg: cfg, order: list.New(), byID: map[string]*pendingReq{}, users: map[string]*list.List{}}
}

func (p *pending) put(r pendingReq) string {
	r.id, r.at = newID("rq-"), time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(r.at)
	if own := p.users[r.identity]; own != nil && own.Len() >= p.cfg.MaxPendingPerIdentity {
		p.drop(own.Front().Value.(*pendingReq))
	}
	for p.order.Len() >= p.cfg.MaxPending {
		p.drop(p.largest().Front().Value.(*pendingReq))
	}
	own := p.users[r.identity]
	if own == nil {
		own = list.New()
		p.users[r.identity] = own
	}
	q := &r
	q.all, q.own = p.order.PushBack(q), own.PushBack(q)
	p.byID[q.id] = q
	return q.id
}

// largest is the list of the identity holding the most requests; of
// those holding as many, the one whose oldest request is oldest.
func (p *pending) largest() *list.List {
	var best *list.List
	for _, own := range p.users {
		if best == nil || own.Len() > best.Len() ||
			own.Len() == best.Len() && own.Front().Value.(*pendingReq).at.Before(best.Front().Value.(*pendingReq).at) {
			best = own
		}
	}
	return best
}

func (p *pending) get(id, identity string) (pendingReq, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(time.Now())
	r, ok := p.byID[id]
	if !ok || r.identity != identity {
		return pendingReq{}, false
	}
	return *r, true
}

func (p *pending) expire(now time.Time) {
	for e := p.order.Front(); e != nil && now.Sub(e.Value.(*pendingReq).at) > p.cfg.PendingTTL; e = p.order.Front() {
		p.drop(e.Value.(*pendingReq))
	}
}

func (p *pending) drop(r *pendingReq) {
	p.order.Remove(r.all)
	own := p.users[r.identity]
	if own.Remove(r.own); own.Len() == 0 {
		delete(p.users, r.identity)
	}
	delete(p.byID, r.id)
}

func (p *pending) reset(identity string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := p.order
	if identity != "" {
		all = p.users[identity]
	}
	for all != nil && all.Len() > 0 {
		p.drop(all.Front().Value.(*pendingReq))
	}
}

func (p *pending) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// limiters are the per-identity report rates, bounded in number: idle
// ones are dropped when there are too many.
type limiters struct {
	mu  sync.Mutex
	cfg Config
	m   map[string]*limiter
}

type limiter struct {
	lim  *rate.Limiter
	used time.Time
}

// maxLimiters bounds the identities tracked at once.
const maxLimiters = 10000

func newLimiters(cfg Config) *limiters { return &limiters{cfg: cfg, m: map[string]*limiter{}} }

func (ls *limiters) allow(identity string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	x := ls.m[identity]
	if x == nil {
		if len(ls.m) >= maxLimiters {
			// A limiter idle long enough to be full again is as good as new.
			full := time.Duration(float64(ls.cfg.Burst) / ls.cfg.Rate * float64(time.Second))
			for k, y := range ls.m {
				if now.Sub(y.used) > full {
					delete(ls.m, k)
				}
			}
			if len(ls.m) >= maxLimiters {
				return false
			}
		}
		x = &limiter{lim: rate.NewLimiter(rate.Limit(ls.cfg.Rate), ls.cfg.Burst)}
		ls.m[identity] = x
	}
	x.used = now
	return x.lim.AllowN(now, 1)
}
