package mcpproxy

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/mcpsrc"
)

// How the proxy indexes its backends (the thirteenth hostile pass: a
// backend sending notifications/tools/list_changed every second with 200
// new tools of 2 KB kept the proxy at 0.4-0.7 of a core, and another
// caller's search_tools went from 0.01 to 21 s).
//
// Each backend's listing is indexed on its own: its texts are embedded
// into a cache of vectors by text (vecCache), in batches of bgBatch that
// wait while a caller's embedding is in flight (embedGate: callers win),
// one batch at a time for every backend together. Once a backend's texts
// are in the cache, the index over every backend indexed so far is put
// together (Proxy.assemble), embedding nothing new. A backend has at most
// one index in flight: a listing that arrives meanwhile waits, and only
// the latest is indexed next; after its first, a backend is indexed at
// most once per MinReindexInterval, and the texts it has embedded that
// were not cached are bounded by a budget (EmbedBurst, refilled at
// EmbedPerMinute): a listing with more new texts than the budget holds
// waits until it holds them. Until its first index is ready, a backend's
// tools are not searchable, and search_tools and call_tool say so
// (SearchOutput.Indexing).
const (
	// MinReindexInterval is the least time between the starts of two
	// indexes of one backend's listing (Config.MinReindex sets another):
	// a backend that changes its tools more often has its latest listing
	// indexed at this pace, at most.
	MinReindexInterval = 5 * time.Second
	// EmbedBurst is the most texts one backend may have embedded at once
	// (its budget when full, as at start: a first index of
	// MaxToolsPerServer tools and MaxServerExamples examples fits), and
	// EmbedPerMinute the pace its budget refills at. A text costs up to
	// about 70 ms of a core with the default model (256 tokens, its
	// limit, measured on the proxy's 2-core test machine), so a backend
	// listing new texts without end costs at most about 8 s of a core a
	// minute; a backend listing what it listed before embeds nothing.
	EmbedBurst     = 1024
	EmbedPerMinute = 120
	// MaxCachedVectors bounds the vectors cached by text (about 1.5 KB
	// each at 384 dimensions: 24 MB), least recently used dropped first.
	// It holds what MaxToolsIndexed tools and their servers' examples
	// embed, twice over, so a backend listing what it listed before
	// embeds nothing.
	MaxCachedVectors = 16384
	// bgBatch is the texts of one background embedding: a caller waits
	// for at most one such batch.
	bgBatch = 4
)

// embedGate lets callers' embeddings (search_tools, hub__analyze_prompt)
// go before the index's: a background batch starts only while no caller's
// embedding is in flight, and one at a time.
type embedGate struct {
	mu   sync.Mutex
	fg   int           // callers' embeddings in flight
	idle chan struct{} // closed when fg drops to 0
	bg   chan struct{} // held by the background batch running
	// waited counts background batches that had to wait for callers.
	waited int
}

func newEmbedGate() *embedGate { return &embedGate{bg: make(chan struct{}, 1)} }

// foreground is emb counted as a caller's.
func (g *embedGate) foreground(emb Embedder) Embedder { return fgEmbedder{g, emb} }

// background is emb in batches of bgBatch, each waiting its turn.
func (g *embedGate) background(emb Embedder) Embedder { return bgEmbedder{g, emb} }

type fgEmbedder struct {
	g   *embedGate
	emb Embedder
}

func (f fgEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	g := f.g
	g.mu.Lock()
	if g.fg == 0 {
		g.idle = make(chan struct{})
	}
	g.fg++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.fg--
		if g.fg == 0 {
			close(g.idle)
		}
		g.mu.Unlock()
	}()
	return f.emb.Embed(ctx, texts)
}

// acquire waits for the background slot and for no caller's embedding
// in flight; release gives the slot back.
func (g *embedGate) acquire(ctx context.Context) error {
	select {
	case g.bg <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	for first := true; ; first = false {
		g.mu.Lock()
		if g.fg == 0 {
			g.mu.Unlock()
			return nil
		}
		if first {
			g.waited++
		}
		idle := g.idle
		g.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			<-g.bg
			return ctx.Err()
		}
	}
}

func (g *embedGate) release() { <-g.bg }

type bgEmbedder struct {
	g   *embedGate
	emb Embedder
}

func (b bgEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += bgBatch {
		if err := b.g.acquire(ctx); err != nil {
			return nil, err
		}
		vecs, err := b.emb.Embed(ctx, texts[start:min(start+bgBatch, len(texts))])
		b.g.release()
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// vecCache is a labels.Embedder that keeps the vector of each text it
// embedded, by the text's sha256, up to max vectors (least recently used
// dropped first): a backend listing texts it listed before costs no
// embedding. Callers must not modify the vectors.
type vecCache struct {
	emb Embedder
	max int

	mu  sync.Mutex
	m   map[[32]byte]*list.Element
	lru *list.List // of *cached, most recently used first
}

type cached struct {
	key [32]byte
	vec []float32
}

func newVecCache(emb Embedder, max int) *vecCache {
	return &vecCache{emb: emb, max: max, m: map[[32]byte]*list.Element{}, lru: list.New()}
}

func (c *vecCache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([][32]byte, len(texts))
	var todo []string
	var at [][]int // todo[j]'s places in texts
	first := map[[32]byte]int{}
	c.mu.Lock()
	for i, t := range texts {
		keys[i] = sha256.Sum256([]byte(t))
		if e, ok := c.m[keys[i]]; ok {
			c.lru.MoveToFront(e)
			out[i] = e.Value.(*cached).vec
			continue
		}
		if j, ok := first[keys[i]]; ok {
			at[j] = append(at[j], i)
			continue
		}
		first[keys[i]] = len(todo)
		todo = append(todo, t)
		at = append(at, []int{i})
	}
	c.mu.Unlock()
	if len(todo) == 0 {
		return out, nil
	}
	vecs, err := c.emb.Embed(ctx, todo)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(todo) {
		return nil, errors.New("mcpproxy: the embedder returned a vector count other than the texts'")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, places := range at {
		for _, i := range places {
			out[i] = vecs[j]
		}
		k := keys[places[0]]
		if _, ok := c.m[k]; !ok {
			c.m[k] = c.lru.PushFront(&cached{key: k, vec: vecs[j]})
		}
	}
	for c.lru.Len() > c.max {
		e := c.lru.Back()
		c.lru.Remove(e)
		delete(c.m, e.Value.(*cached).key)
	}
	return out, nil
}

// missing counts the distinct texts not cached.
func (c *vecCache) missing(texts []string) int {
	seen := map[[32]byte]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range texts {
		k := sha256.Sum256([]byte(t))
		if _, ok := c.m[k]; !ok {
			seen[k] = true
		}
	}
	return len(seen)
}

// Len is the number of vectors cached.
func (c *vecCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// backend is what the proxy knows of one server's listings.
type backend struct {
	name string
	// want is the newest listing seen (nil until the server lists);
	// ready the one whose texts are embedded, in the index; failed the
	// key of a listing whose index failed (not tried again).
	want, ready *listing
	failed      string
	// assembling: ready's texts are embedded and the index that holds
	// them is being put together; until it serves, Indexing still names
	// the server (a caller told it was done found no tool of it).
	assembling bool
	// busy: an index of this backend's listing is in flight or waits
	// for MinReindex (indexLoop).
	busy bool
	// last is when its last index started.
	last time.Time
	// indexes counts the indexes of its listings started.
	indexes int
	// budget is the texts it may have embedded now (EmbedBurst at most),
	// as of budgetAt.
	budget   float64
	budgetAt time.Time
	// warned is the warnings last logged for its listings: a backend
	// re-listing the same left-out tools is not logged again.
	warned string
}

// spend takes n texts from b's budget (EmbedBurst, refilled at perMinute
// a minute since budgetAt) and returns 0, or how long until the budget
// holds n, taking nothing (p.mu held).
func (b *backend) spend(n int, burst, perMinute float64, now time.Time) time.Duration {
	if b.budgetAt.IsZero() {
		b.budget = burst
	} else {
		b.budget = min(burst, b.budget+now.Sub(b.budgetAt).Minutes()*perMinute)
	}
	b.budgetAt = now
	need := min(float64(n), burst)
	if b.budget >= need {
		b.budget -= need
		return 0
	}
	return time.Duration((need - b.budget) / perMinute * float64(time.Minute))
}

// listing is one tools/list of a server: its state with the tools the
// proxy indexes (serverTools), and their key (toolsKey).
type listing struct {
	key   string
	state mcpsrc.ServerState
}

// offer takes the servers' newest listings from snap: each listing that
// differs from its server's last is checked (serverTools, warnings logged
// once per listing) and indexed in the background (indexLoop), at most one
// index of a server in flight, the latest listing winning.
func (p *Proxy) offer(ctx context.Context, snap mcpsrc.Snapshot) {
	for _, l := range p.listings(snap) {
		p.mu.Lock()
		b := p.backends[l.state.Name]
		if b.want != nil && b.want.key == l.key {
			p.mu.Unlock()
			continue
		}
		b.want = l
		start := !b.busy
		b.busy = true
		p.mu.Unlock()
		if start {
			p.workers.Add(1)
			go func() {
				defer p.workers.Done()
				p.indexLoop(ctx, b)
			}()
		}
	}
}

// listings are snap's servers that have listed, with the tools the proxy
// indexes (serverTools); warnings for what a listing leaves out are
// logged when it is new. Every server gets a backend.
func (p *Proxy) listings(snap mcpsrc.Snapshot) []*listing {
	names := make([]string, len(snap.Servers))
	for i, st := range snap.Servers {
		names[i] = st.Name
	}
	ids, err := serverIDs(names)
	if err != nil {
		p.cfg.Logger.Warn("proxy: servers without ids; not indexed", "err", err)
		return nil
	}
	var out []*listing
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, st := range snap.Servers {
		b := p.backends[st.Name]
		if b == nil {
			b = &backend{name: st.Name}
			p.backends[st.Name] = b
			p.order = append(p.order, st.Name)
		}
		if !st.Listed {
			continue
		}
		key := serverKey(st)
		if b.want != nil && b.want.key == key {
			out = append(out, b.want)
			continue
		}
		tools, _, warnings := serverTools(st, ids[i])
		const shown = 8
		if w := strings.Join(warnings, "\n"); w == b.warned {
			warnings = nil
		} else {
			b.warned = w
		}
		for j, w := range warnings {
			if j == shown && len(warnings) > shown+1 {
				p.cfg.Logger.Warn("proxy: backend tools left out", "server", st.Name, "more", len(warnings)-shown)
				break
			}
			p.cfg.Logger.Warn("proxy: backend tool left out", "server", st.Name, "why", w)
		}
		st.Tools = tools
		out = append(out, &listing{key: key, state: st})
	}
	return out
}

// indexLoop indexes b's newest listing until the newest is indexed (or
// failed), waiting MinReindex between two indexes of b.
func (p *Proxy) indexLoop(ctx context.Context, b *backend) {
	for {
		p.mu.Lock()
		want := b.want
		if ctx.Err() != nil || (b.ready != nil && want.key == b.ready.key) || want.key == b.failed {
			b.busy = false
			p.mu.Unlock()
			return
		}
		wait := time.Duration(0)
		if b.ready != nil || b.failed != "" {
			wait = time.Until(b.last.Add(p.cfg.MinReindex))
		}
		p.mu.Unlock()
		if wait <= 0 {
			// The texts not cached must fit the backend's budget.
			texts, err := p.listingTexts(want)
			if err == nil {
				miss := p.cache.missing(texts)
				p.mu.Lock()
				wait = b.spend(miss, p.burst, p.perMinute, time.Now())
				p.mu.Unlock()
				if wait > 0 {
					p.cfg.Logger.Debug("proxy: a backend's new texts wait for its embedding budget", "server", b.name, "texts", miss, "wait", wait)
				}
			}
		}
		if wait > 0 {
			if !p.sleep(ctx, wait) {
				p.mu.Lock()
				b.busy = false
				p.mu.Unlock()
				return
			}
			continue // the newest listing may have changed meanwhile
		}
		p.indexListing(ctx, b, want)
	}
}

// sleepCtx waits d or until ctx ends, and reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// indexListing embeds l's texts (into the cache, in the background) and
// then puts the index of every backend together with it.
func (p *Proxy) indexListing(ctx context.Context, b *backend, l *listing) {
	p.mu.Lock()
	b.last = time.Now()
	b.indexes++
	p.mu.Unlock()
	start := time.Now()
	n, err := p.embedListing(ctx, l)
	p.mu.Lock()
	if err != nil {
		b.failed = l.key
		p.progressLocked()
	} else {
		b.ready, b.failed, b.assembling = l, "", true
	}
	p.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("proxy: a backend's tools not indexed; its previous tools stay", "server", l.state.Name, "err", err)
		}
		return
	}
	p.cfg.Logger.Debug("proxy: backend texts embedded", "server", l.state.Name, "tools", len(l.state.Tools), "texts", n,
		"took", time.Since(start).Round(time.Millisecond))
	if err := p.assemble(ctx); err != nil && !errors.Is(err, errNoTools) && ctx.Err() == nil {
		p.cfg.Logger.Warn("proxy: live tools not indexed; keeping the previous index", "err", err)
	}
	p.mu.Lock()
	b.assembling = false
	p.progressLocked() // after the index holds it
	p.mu.Unlock()
}

// embedListing embeds the label texts l's server has in the index (its
// category, server and tools: they depend on its tools only) into the
// cache, and returns how many there are.
func (p *Proxy) embedListing(ctx context.Context, l *listing) (int, error) {
	texts, err := p.listingTexts(l)
	if err != nil || len(texts) == 0 {
		return 0, err
	}
	_, err = p.cache.Embed(ctx, texts)
	return len(texts), err
}

// listingTexts are the label texts l's server has in the index.
func (p *Proxy) listingTexts(l *listing) ([]string, error) {
	cat, _, err := buildCatalog(mcpsrc.Snapshot{Servers: []mcpsrc.ServerState{l.state}})
	if errors.Is(err, errNoTools) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var texts []string
	for _, lb := range labels.Labels(cat) {
		texts = append(texts, lb.Texts...)
	}
	return texts, nil
}

// readySnapshot is the servers whose listing is indexed, in the order
// first seen (configuration order), bounded to MaxToolsIndexed tools
// with a warning for each server cut; and the servers still waiting for
// their first index.
func (p *Proxy) readySnapshot() (mcpsrc.Snapshot, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var snap mcpsrc.Snapshot
	total := 0
	for _, name := range p.order {
		b := p.backends[name]
		if b.ready == nil {
			continue
		}
		st := b.ready.state
		if room := MaxToolsIndexed - total; len(st.Tools) > room {
			room = max(room, 0)
			if p.cut[name] != len(st.Tools)-room {
				p.cfg.Logger.Warn("proxy: more tools than the proxy indexes; the rest of this server's are left out",
					"server", name, "max", MaxToolsIndexed, "left_out", len(st.Tools)-room)
			}
			p.cut[name] = len(st.Tools) - room
			st.Tools = st.Tools[:room]
		} else {
			delete(p.cut, name)
		}
		total += len(st.Tools)
		snap.Servers = append(snap.Servers, st)
	}
	return snap, p.indexingLocked()
}

// indexingLocked lists the servers that have listed but whose first index
// is not ready (p.mu held).
func (p *Proxy) indexingLocked() []string {
	var out []string
	for _, name := range p.order {
		if b := p.backends[name]; b.want != nil && b.ready == nil && b.failed == "" {
			out = append(out, name)
		}
	}
	return out
}

// Indexing lists the servers that have listed tools whose first index is
// not ready yet: their tools are not searchable.
func (p *Proxy) Indexing() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.indexingLocked())
	for _, name := range p.order {
		if b := p.backends[name]; b.assembling && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// serverKey is what one server's index depends on: its tools.
func serverKey(st mcpsrc.ServerState) string {
	return toolsKey(mcpsrc.Snapshot{Servers: []mcpsrc.ServerState{{Name: st.Name, Tools: st.Tools}}})
}

// Indexed reports whether an index over some server's tools serves.
func (p *Proxy) Indexed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live != nil
}
