package learn

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/viterin/vek/vek32"
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
	recs  []*rec         // oldest first
	byID  map[string]*rec
	// version grows with every change, so views know when their cached
	// name maps and usage norms are stale.
	version uint64
	usage   usageCache
}

// rec is a Record as the model uses it.
type rec struct {
	r        Record
	identity int
	vec      []float32
	servers  []int
	tools    []int // toolKey ids
	toolSrv  []int // each tool's server id
	shown    []int // nil: not known
}

type usageCache struct {
	version uint64
	at      time.Time
	norm    map[int]float64 // server id -> norm of its weighted vector sum
}

func newModel(key string) *model {
	return &model{key: key, names: map[string]int{}, ids: map[string]int{}, byID: map[string]*rec{}}
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
	}
	x := &rec{r: r, identity: id, vec: vec}
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
	// Keep oldest first: a report is usually the newest.
	i := len(m.recs)
	for i > 0 && m.recs[i-1].r.At.After(r.At) {
		i--
	}
	m.recs = slices.Insert(m.recs, i, x)
	m.byID[r.ID] = x
	m.version++
	// Bounds: the identity's oldest beyond MaxPerIdentity, then the
	// oldest beyond MaxReports, then anything past MaxAge.
	mine := 0
	for _, y := range m.recs {
		if y.identity == id {
			mine++
		}
	}
	if mine > cfg.MaxPerIdentity {
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
		dropped = append(dropped, m.remove(func(*rec) bool {
			over--
			return over >= 0
		})...)
	}
	return append(dropped, m.expire(time.Now(), cfg.MaxAge)...)
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
	for _, y := range m.recs {
		if drop(y) {
			ids = append(ids, y.r.ID)
			delete(m.byID, y.r.ID)
			continue
		}
		kept = append(kept, y)
	}
	clear(m.recs[len(kept):])
	m.recs = kept
	if len(ids) > 0 {
		m.version++
	}
	return ids
}

// weights are each record's weight now for a request of caller: faded by
// age, then scaled so no identity weighs more than cfg.IdentityCap
// reports and, unless cfg.Share, no other identity than caller's more
// than max(cfg.ForeignFloor, cfg.ForeignRatio × caller's own weight): one
// identity's reports move another's answers only so far.
func (m *model) weights(now time.Time, cfg Config, caller string) []float64 {
	w := make([]float64, len(m.recs))
	mass := make([]float64, len(m.ids))
	for i, x := range m.recs {
		w[i] = 1
		if cfg.HalfLife > 0 {
			if age := now.Sub(x.r.At); age > 0 {
				w[i] = math.Exp2(-float64(age) / float64(cfg.HalfLife))
			}
		}
		mass[x.identity] += w[i]
	}
	own, isOwn := m.ids[caller]
	foreign := cfg.IdentityCap
	if !cfg.Share {
		ownMass := 0.0
		if isOwn {
			ownMass = min(mass[own], cfg.IdentityCap)
		}
		foreign = min(foreign, max(cfg.ForeignFloor, cfg.ForeignRatio*ownMass))
	}
	for i, x := range m.recs {
		limit := foreign
		if isOwn && x.identity == own {
			limit = cfg.IdentityCap
		}
		if mm := mass[x.identity]; mm > limit {
			w[i] *= limit / mm
		}
	}
	return w
}

// tally is what the reports say about one request: by name id, how much
// weight used it (n, and u among the tasks like it), out of how much
// could have (den, wden); for tools the same within their server's tasks.
type tally struct {
	// Over all reports (base rates) and over the tasks like this one.
	n, den, u, wden []float64
	// total is the weight of all reports; similar of the tasks like this.
	total, similar float64
	// den0 and wden0 are the part of den and wden every name has: the
	// reports that do not say what was shown.
	den0, wden0 float64
	// tden and twden: the weight of the reports with tools that used each
	// server (the denominators of its tools' rates).
	tden, twden []float64
	// co[a][s] is the weight of reports that used chosen server a and s;
	// coN[a] of those that used a.
	co  map[int][]float64
	coN map[int]float64
	// usage[s] is Σ w·cos(request, report) over the reports using s.
	usage []float64
}

// tally counts the reports for query q; chosen are the server ids whose
// co-use is wanted.
func (m *model) tally(q []float32, now time.Time, cfg Config, caller string, chosen []int) *tally {
	n := len(m.list)
	t := &tally{n: make([]float64, n), den: make([]float64, n), u: make([]float64, n), wden: make([]float64, n),
		tden: make([]float64, n), twden: make([]float64, n), co: map[int][]float64{}, coN: map[int]float64{}, usage: make([]float64, n)}
	for _, a := range chosen {
		t.co[a] = make([]float64, n)
	}
	w := m.weights(now, cfg, caller)
	kern := cfg.Weigh.Kernel
	ks := make([]float64, len(m.recs))
	local := make([]float64, len(m.ids))
	cosines := make([]float64, len(m.recs))
	for i, x := range m.recs {
		cos := float64(vek32.Dot(q, x.vec))
		cosines[i] = cos
		if cos > kern {
			k := (cos - kern) / (1 - kern)
			ks[i] = k * k
			local[x.identity] += w[i] * ks[i]
		}
	}
	// Unless shared, another identity's weight among the tasks like this
	// one is capped too, at ForeignRatio × (the caller's own there +
	// Local): a hostile identity that reported the very requests a caller
	// makes holds at most ForeignRatio/(1+ForeignRatio) of their weight.
	if !cfg.Share {
		own, isOwn := m.ids[caller]
		ownLocal := 0.0
		if isOwn {
			ownLocal = local[own]
		}
		limit := cfg.ForeignRatio * (ownLocal + cfg.Weigh.Local)
		for i, x := range m.recs {
			if isOwn && x.identity == own {
				continue
			}
			if lm := local[x.identity]; lm > limit {
				ks[i] *= limit / lm
			}
		}
	}
	for i, x := range m.recs {
		wi := w[i]
		if wi == 0 {
			continue
		}
		cos, k := cosines[i], ks[i]
		t.total += wi
		t.similar += wi * k
		if x.shown == nil {
			t.den0 += wi
			t.wden0 += wi * k
		} else {
			for _, s := range x.shown {
				t.den[s] += wi
				t.wden[s] += wi * k
			}
		}
		for _, s := range x.servers {
			t.n[s] += wi
			t.u[s] += wi * k
			t.usage[s] += wi * cos
			if len(x.tools) > 0 {
				t.tden[s] += wi
				t.twden[s] += wi * k
			}
		}
		for _, tl := range x.tools {
			t.n[tl] += wi
			t.u[tl] += wi * k
		}
		for _, a := range chosen {
			if slices.Contains(x.servers, a) {
				t.coN[a] += wi
				for _, s := range x.servers {
					t.co[a][s] += wi
				}
			}
		}
	}
	for i := range t.den {
		t.den[i] += t.den0
		t.wden[i] += t.wden0
	}
	return t
}

// usageNorms are the norms of each server's vector sum (its usage
// vector, every report weighing as for a caller sharing every report),
// recomputed when the records change or an hour passes.
func (m *model) usageNorms(now time.Time, cfg Config) map[int]float64 {
	if m.usage.norm != nil && m.usage.version == m.version && now.Sub(m.usage.at) < time.Hour {
		return m.usage.norm
	}
	shared := cfg
	shared.Share = true
	w := m.weights(now, shared, "")
	sums := map[int][]float32{}
	for i, x := range m.recs {
		for _, s := range x.servers {
			sum := sums[s]
			if sum == nil {
				sum = make([]float32, m.dims)
				sums[s] = sum
			}
			vek32.Add_Inplace(sum, vek32.MulNumber(x.vec, float32(w[i])))
		}
	}
	norm := make(map[int]float64, len(sums))
	for s, sum := range sums {
		norm[s] = math.Sqrt(float64(vek32.Dot(sum, sum)))
	}
	m.usage = usageCache{version: m.version, at: now, norm: norm}
	return norm
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
