package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

func sqrt(x float64) float64 { return math.Sqrt(x) }

// model is the reports of one key, in memory, with the names they use
// interned. Callers hold the Learner's lock.
type model struct {
	key   string
	dims  int
	names map[string]int // server ids and tool keys (toolKey) -> id
	list  []string
	ids   map[string]int // identity -> id
	// idName is each identity id's name, byName the ids in their names'
	// order: a request's groups of the others read them (othersGroups)
	// rather than a map and a sort of every identity by name.
	idName []string
	byName []int
	recs   []*rec // oldest first
	// codes, invs, idents and ats are each of recs' quantized vector
	// (Record.Vec) and the inverse of its norm, identity id and time
	// (UnixNano), in recs' order: what every request reads of every
	// record, kept apart so the scan reads them in sequence rather than
	// through each record, and a quarter of the vectors' float32 bytes
	// (View.Request).
	codes  [][]int8
	invs   []float32
	idents []int
	ats    []int64
	byID   map[string]*rec
	// version grows with every change, so views know when their cached
	// fits are stale.
	version uint64
	// changes counts the changes to each identity's records (by
	// identity id), so a caller's fit of its own reports is refitted
	// when they change, not when another identity's do.
	changes []uint64
	// seq numbers the records as they are put (rec.seq).
	seq uint64
	// held is how many records each identity id holds, kept with every
	// put and remove: counting them per put made loading a key's 20,000
	// reports quadratic (the tenth hostile pass: seconds at start).
	held map[int]int
}

// touch counts a change to identity id's records.
func (m *model) touch(id int) {
	for len(m.changes) <= id {
		m.changes = append(m.changes, 0)
	}
	m.changes[id]++
}

// changesOf is how many times identity id's records changed.
func (m *model) changesOf(id int) uint64 {
	if id < 0 || id >= len(m.changes) {
		return 0
	}
	return m.changes[id]
}

// rec is a Record as the model uses it.
type rec struct {
	r        Record
	identity int
	// seq is the record's number in its model, unique and never reused:
	// a tally finds what it kept of a record by it.
	seq     uint64
	vec     []float32
	servers []int
	tools   []int // toolKey ids
	toolSrv []int // each tool's server id
	shown   []int // nil: not known
	// descIDs and descP are the description-based probabilities the
	// record keeps (Record.Described), dmin the least of them: what a
	// server it does not list is taken to have had, at most.
	descIDs []int
	descP   []float64
	dmin    float64
	// descL and dminL are their log-odds (residuals take them often).
	descL []float64
	dminL float64
}

// pd is the description-based probability of server id for x's request.
func (x *rec) pd(id int) float64 {
	for j, s := range x.descIDs {
		if s == id {
			return x.descP[j]
		}
	}
	return x.dmin
}

// counts says whether x counts for or against server id: it does unless
// it says what was shown and id was not.
func (x *rec) counts(id int) bool {
	return x.shown == nil || slices.Contains(x.shown, id)
}

// each calls fn for every server x counts for, once: with its
// description-based probability and whether x called it. Without a
// shown list those are the servers x lists (Described) and those it
// called (a called server it does not list at the least listed
// probability, an upper bound); with one, the servers shown.
func (x *rec) each(fn func(id int, pd float64, called bool)) {
	if x.shown != nil {
		for _, s := range x.shown {
			fn(s, x.pd(s), x.calls(s))
		}
		return
	}
	for j, s := range x.descIDs {
		fn(s, x.descP[j], x.calls(s))
	}
	for _, s := range x.servers {
		if !slices.Contains(x.descIDs, s) {
			fn(s, x.dmin, true)
		}
	}
}

// usable says whether x has the description-based probabilities its
// calls are weighed against.
func (x *rec) usable() bool { return x.dmin >= 0 }

// calls says whether x called server id.
func (x *rec) calls(id int) bool { return slices.Contains(x.servers, id) }

func newModel(key string) *model {
	return &model{key: key, names: map[string]int{}, ids: map[string]int{}, byID: map[string]*rec{}, held: map[int]int{}}
}

func (m *model) intern(s string) int {
	if i, ok := m.names[s]; ok {
		return i
	}
	m.names[s] = len(m.list)
	m.list = append(m.list, s)
	return len(m.list) - 1
}

// toolKey is a tool's name in the model: its server, name and hash, so a
// changed tool is another name.
func toolKey(server, name, hash string) string {
	return "\x00" + server + "\x00" + name + "\x00" + hash
}

// put adds r, replacing a record with its id; it returns the ids of the
// records dropped to stay within the bounds.
func (m *model) put(r Record, cfg Config) (dropped []string) {
	if old, ok := m.byID[r.ID]; ok {
		m.remove(func(x *rec) bool { return x == old })
	}
	vec := Dequantize(r.Vec)
	if m.dims == 0 {
		m.dims = len(vec)
	}
	if len(vec) != m.dims {
		return nil // another model's vector under this key: never used together
	}
	id, ok := m.ids[r.Identity]
	if !ok {
		id = len(m.ids)
		m.ids[r.Identity] = id
		m.idName = append(m.idName, r.Identity)
		at, _ := slices.BinarySearchFunc(m.byName, r.Identity, func(x int, name string) int { return strings.Compare(m.idName[x], name) })
		m.byName = slices.Insert(m.byName, at, id)
	}
	m.seq++
	x := &rec{r: r, identity: id, vec: vec, seq: m.seq}
	for _, s := range r.Servers {
		x.servers = append(x.servers, m.intern(s))
	}
	for _, t := range r.Tools {
		x.tools = append(x.tools, m.intern(toolKey(t.Server, t.Name, t.Hash)))
		x.toolSrv = append(x.toolSrv, m.intern(t.Server))
	}
	if len(r.Shown) > 0 {
		for _, s := range r.Shown {
			x.shown = append(x.shown, m.intern(s))
		}
	}
	x.dmin = 1
	for _, d := range r.Described {
		if len(x.descIDs) == MaxDescribed {
			break
		}
		p := min(max(d.P, probFloor), 1-probFloor)
		x.descIDs = append(x.descIDs, m.intern(d.Server))
		x.descP = append(x.descP, p)
		x.descL = append(x.descL, logit(p))
		x.dmin = min(x.dmin, p)
	}
	x.dminL = logit(x.dmin)
	if len(x.descIDs) == 0 {
		x.dmin = -1 // nothing to weigh the calls against: not used (usable)
	}
	// Keep oldest first: a report is usually the newest.
	i := len(m.recs)
	for i > 0 && m.recs[i-1].r.At.After(r.At) {
		i--
	}
	m.recs = slices.Insert(m.recs, i, x)
	m.codes = slices.Insert(m.codes, i, r.Vec)
	m.invs = slices.Insert(m.invs, i, invNorm(r.Vec))
	m.idents = slices.Insert(m.idents, i, x.identity)
	m.ats = slices.Insert(m.ats, i, r.At.UnixNano())
	m.byID[r.ID] = x
	m.held[id]++
	m.version++
	m.touch(id)
	// Bounds: the identity's oldest beyond MaxPerIdentity, then beyond
	// MaxReports the busiest identity's oldest, then anything past MaxAge.
	if mine := m.held[id]; mine > cfg.MaxPerIdentity {
		over := mine - cfg.MaxPerIdentity
		dropped = append(dropped, m.remove(func(y *rec) bool {
			if over > 0 && y.identity == id {
				over--
				return true
			}
			return false
		})...)
	}
	if over := len(m.recs) - cfg.MaxReports; over > 0 {
		dropped = append(dropped, m.remove(m.busiest(over))...)
	}
	return append(dropped, m.expire(time.Now(), cfg.MaxAge)...)
}

// busiest selects over records to drop at MaxReports: each time the
// oldest of the identity holding the most (of those holding as many, the
// one whose oldest is oldest). Dropping the oldest whoever made it let
// identities at their own bound push out every other identity's reports:
// in the tenth hostile pass 50 identities' 20,500 reports left alice none
// of her 40, and four identities at MaxPerIdentity fill a key alone.
func (m *model) busiest(over int) func(*rec) bool {
	count := maps.Clone(m.held)
	drop := map[*rec]bool{}
	for ; over > 0; over-- {
		most := 0
		for _, n := range count {
			most = max(most, n)
		}
		for _, y := range m.recs {
			if !drop[y] && count[y.identity] == most {
				drop[y] = true
				count[y.identity]--
				break
			}
		}
	}
	return func(y *rec) bool { return drop[y] }
}

// expire drops the records older than maxAge.
func (m *model) expire(now time.Time, maxAge time.Duration) []string {
	cut := now.Add(-maxAge)
	if len(m.recs) == 0 || !m.recs[0].r.At.Before(cut) {
		return nil
	}
	return m.remove(func(y *rec) bool { return y.r.At.Before(cut) })
}

// remove drops the records drop selects (called oldest first) and
// returns their ids.
func (m *model) remove(drop func(*rec) bool) []string {
	var ids []string
	kept := m.recs[:0]
	n := 0
	for i, y := range m.recs {
		if drop(y) {
			ids = append(ids, y.r.ID)
			delete(m.byID, y.r.ID)
			if m.held[y.identity]--; m.held[y.identity] == 0 {
				delete(m.held, y.identity)
			}
			m.touch(y.identity)
			continue
		}
		kept = append(kept, y)
		m.codes[n], m.invs[n], m.idents[n], m.ats[n] = m.codes[i], m.invs[i], m.idents[i], m.ats[i]
		n++
	}
	clear(m.recs[len(kept):])
	clear(m.codes[n:])
	m.recs, m.codes, m.invs, m.idents, m.ats = kept, m.codes[:n], m.invs[:n], m.idents[:n], m.ats[:n]
	if len(ids) > 0 {
		m.version++
	}
	return ids
}

// weights are each record's weight now: faded by age, then scaled so no
// identity weighs more than cfg.IdentityCap reports; with only set, the
// records of other identities weigh 0. It returns the weights and each
// identity's weight (by identity id): its faded records', at most
// IdentityCap, exactly IdentityCap for every identity above it (so
// identities at the cap tie, and othersGroups ranks them by name rather
// than by the rounding of a sum of their scaled weights, which moved
// with the clock and changed a request's groups, and so its fits, from
// one request to the next).
func (m *model) weights(now time.Time, cfg Config, only string) (w []float64, mass []float64) {
	w = make([]float64, len(m.recs))
	mass = make([]float64, len(m.ids))
	own, isOwn := m.ids[only]
	t := now.UnixNano()
	for i, identity := range m.idents {
		if only != "" && (!isOwn || identity != own) {
			continue
		}
		w[i] = 1
		if cfg.HalfLife > 0 {
			if age := t - m.ats[i]; age > 0 {
				w[i] = math.Exp2(-float64(age) / float64(cfg.HalfLife))
			}
		}
		mass[identity] += w[i]
	}
	for i, identity := range m.idents {
		if mm := mass[identity]; mm > cfg.IdentityCap {
			w[i] *= cfg.IdentityCap / mm
		}
	}
	for id, mm := range mass {
		mass[id] = min(mm, cfg.IdentityCap)
	}
	return w, mass
}

// summary counts what the model has learned.
func (m *model) summary() (reports, identities, servers, tools int, last time.Time) {
	srv, tl := map[int]bool{}, map[int]bool{}
	idn := map[int]bool{}
	for _, x := range m.recs {
		idn[x.identity] = true
		for _, s := range x.servers {
			srv[s] = true
		}
		for _, t := range x.tools {
			tl[t] = true
		}
		if x.r.At.After(last) {
			last = x.r.At
		}
	}
	return len(m.recs), len(idn), len(srv), len(tl), last
}

// records returns the records, oldest first, of identity (all if "").
func (m *model) records(identity string) []Record {
	var out []Record
	for _, x := range m.recs {
		if identity == "" || x.r.Identity == identity {
			out = append(out, x.r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// others is a group of identities other than a caller whose reports a
// Request leaves out together: has is by identity id (a slice, read
// for every stored report), key names the group for the fit cache.
type others struct {
	has []bool
	key string
}

// othersGroups are the groups of the identities other than caller that
// weigh anything (mass, by identity id: weights'): the n−1 weighing
// most one by one (ties by name), the rest as one group, so at most n
// groups.
func (m *model) othersGroups(mass []float64, caller string, n int) []others {
	name := m.idName
	heavier := func(a, b int) bool {
		if mass[a] != mass[b] {
			return mass[a] > mass[b]
		}
		return name[a] < name[b]
	}
	// The n−1 weighing most, in order, by one walk (insertion into a
	// list of at most n−1) rather than a sort of every identity.
	var top []int
	count := 0
	for id, ms := range mass {
		if ms <= 0 || caller != "" && name[id] == caller {
			continue
		}
		count++
		at := len(top)
		for at > 0 && heavier(id, top[at-1]) {
			at--
		}
		if at < n-1 {
			top = slices.Insert(top, at, id)
			if len(top) > n-1 {
				top = top[:n-1]
			}
		}
	}
	var out []others
	one := func(id int) {
		g := others{has: make([]bool, len(m.ids)), key: "\x00without\x00" + name[id]}
		g.has[id] = true
		out = append(out, g)
	}
	if count <= n {
		// Every one alone: the last is the lightest.
		for _, id := range top {
			one(id)
		}
		if count == n {
			inTop := make([]bool, len(m.ids))
			for _, id := range top {
				inTop[id] = true
			}
			for id, ms := range mass {
				if ms > 0 && (caller == "" || name[id] != caller) && !inTop[id] {
					one(id)
				}
			}
		}
		return out
	}
	for _, id := range top {
		one(id)
	}
	// The rest, together: named by a hash of its members, in their
	// names' order.
	g := others{has: make([]bool, len(m.ids))}
	for _, id := range top {
		g.has[id] = true
	}
	h := sha256.New()
	rest := make([]bool, len(m.ids))
	for _, id := range m.byName {
		if id < len(mass) && mass[id] > 0 && (caller == "" || name[id] != caller) && !g.has[id] {
			rest[id] = true
			io.WriteString(h, name[id])
			h.Write([]byte{0})
		}
	}
	g.has = rest
	g.key = "\x00without-all\x00" + hex.EncodeToString(h.Sum(nil)[:12])
	return append(out, g)
}
