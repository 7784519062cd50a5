// Package reload is what replaces the index the daemon serves: on SIGHUP,
// when the --index file changes, or, with --mcp-config, when the live
// tools of the MCP servers change (the index rebuilt from them, vectors of
// unchanged texts cached). A new index that does not load or fit the
// model is refused and the old one keeps serving.
package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
)

// MCPHealthService is the health service name that reports the MCP
// servers of --mcp-config: NOT_SERVING while any is degraded. The daemon
// itself ("" and classifier.v1.ClassifierService) stays SERVING: it still
// answers, over the degraded servers' last known tools.
const MCPHealthService = "classifierd.McpServers"

// Config is how the daemon follows changes of what it serves.
type Config struct {
	// MCPConfig is an MCP client configuration; the index is built from
	// its servers' live tools and rebuilt when they change.
	MCPConfig string
	// Catalog is the base catalog merged with the live tools (categories,
	// descriptions and examples; see mcpsrc.Catalog).
	Catalog string
	// Interval is how often the index file (or, with MCPConfig, the
	// catalog) is checked for a change; 0 checks only on SIGHUP.
	Interval time.Duration
	// MCPTimeout bounds connecting to a server and each tools/list.
	MCPTimeout time.Duration
	// MCPRefresh, if positive, lists every server's tools at this interval
	// besides following list_changed.
	MCPRefresh time.Duration
	// Debounce gathers changes of several servers into one rebuild.
	Debounce time.Duration
}

// Options is what a Reloader reloads: the flags of what the daemon serves.
type Options struct {
	Index  string              // --index ("" with --mcp-config)
	Model  string              // --model, for messages
	Reload Config              // --mcp-config, --catalog, --reload-interval...
	Load   index.LoadOptions   // how index files are read
	Domain server.DomainConfig // limits and shortlist of each new domain
	// ServesIdentified says the servers of --mcp-config are what the
	// daemon's call_tool reaches for identified callers (no
	// --mcp-servers, MCP served, tokens or client certificates on):
	// SharedOnly then wants each entry's isolation said.
	ServesIdentified bool
}

// Validate reports the first unusable setting; index is --index.
func (c *Config) Validate(index string) error {
	switch {
	case index == "" && c.MCPConfig == "":
		return errors.New("--index or --mcp-config is required")
	case c.Catalog != "" && c.MCPConfig == "":
		return errors.New("--catalog needs --mcp-config (without it, build an index with gen-index)")
	case c.Interval < 0 || c.MCPRefresh < 0 || c.Debounce < 0:
		return errors.New("--reload-interval, --mcp-refresh and --mcp-debounce must not be negative")
	case c.MCPConfig != "" && c.MCPTimeout <= 0:
		return errors.New("--mcp-timeout must be positive")
	}
	return nil
}

// Reloader loads the index the daemon serves and replaces it when asked
// (SIGHUP), when the watched file changes, or when MCP tools change. A
// new index that cannot be used is refused: the old one keeps serving.
type Reloader struct {
	cfg    Options
	eng    *embed.Engine
	log    *slog.Logger
	domain server.DomainConfig
	// learner gives each new index its view of what was learned (nil:
	// learning off).
	learner *learn.Learner
	hup     chan os.Signal

	pool  *mcpsrc.Pool
	cache *indexbuild.Cache
	// emb is what served domains embed with (the engine, measured by the
	// metrics); onLoad, if set, hears of every swapped-in index (Use).
	emb    server.Embedder
	onLoad LoadObserver
	// ids maps MCP server names to their ids in the served index.
	ids atomic.Pointer[map[string]string]
	// catSHA is the catalog the served MCP index was built from.
	catSHA string
	// watched are the files checked every Interval, with what each was
	// last: the index, or the catalog and the MCP config.
	watched map[string]fileStamp
	// budget is the texts a rebuild for changed MCP tools may embed now
	// (RebuildEmbedBurst at most), as of budgetAt; retry fires when a
	// rebuild that waits for it is due.
	budget   float64
	budgetAt time.Time
	retry    *time.Timer
}

// The budget of the rebuilds for changed MCP tools (not the first build,
// SIGHUP or a changed file): the texts they embed that are not cached.
// A rebuild that would embed more than the budget holds waits until it
// holds them (then builds from the latest tools): a server sending
// notifications/tools/list_changed with new descriptions without end (the
// thirteenth hostile pass: 200 tools of 2 KB every second) costs at most
// RebuildEmbedPerMinute texts a minute, about 8 s of a core at the
// default model's 256-token worst case. Rebuilds embed in batches of
// rebuildBatch, so the callers' embeddings interleave.
const (
	RebuildEmbedBurst     = 2048
	RebuildEmbedPerMinute = 120
	rebuildBatch          = 8
)

// errBudget defers a rebuild until the embedding budget holds its texts.
type errBudget struct {
	texts int
	wait  time.Duration
}

func (e errBudget) Error() string {
	return fmt.Sprintf("%d new texts wait %v for the embedding budget", e.texts, e.wait)
}

// spend takes n texts from the budget and returns 0, or how long until it
// holds n, taking nothing.
func (r *Reloader) spend(n int, now time.Time) time.Duration {
	if r.budgetAt.IsZero() {
		r.budget = RebuildEmbedBurst
	} else {
		r.budget = min(RebuildEmbedBurst, r.budget+now.Sub(r.budgetAt).Minutes()*RebuildEmbedPerMinute)
	}
	r.budgetAt = now
	need := min(float64(n), RebuildEmbedBurst)
	if r.budget >= need {
		r.budget -= need
		return 0
	}
	return time.Duration((need - r.budget) / RebuildEmbedPerMinute * float64(time.Minute))
}

// New starts listening for SIGHUP (so a SIGHUP during start-up
// does not kill the daemon) and, with --mcp-config, connecting to the
// servers. Close stops both.
func New(cfg Options, eng *embed.Engine, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{cfg: cfg, eng: eng, log: log, hup: make(chan os.Signal, 1),
		domain: cfg.Domain}
	r.watched = map[string]fileStamp{}
	if cfg.Reload.MCPConfig == "" {
		r.watched[cfg.Index] = fileStamp{}
	}
	if cfg.Reload.MCPConfig != "" {
		mc, err := mcpsrc.LoadConfig(cfg.Reload.MCPConfig)
		if err != nil {
			return nil, err
		}
		if err := SharedOnly(mc, "--mcp-config", cfg.ServesIdentified); err != nil {
			return nil, err
		}
		for _, s := range mc.Servers {
			log.Info("mcp server configured", "server", s)
		}
		r.watched[cfg.Reload.MCPConfig] = fileStamp{}
		if cfg.Reload.Catalog != "" {
			r.watched[cfg.Reload.Catalog] = fileStamp{}
		}
		r.cache = indexbuild.NewCache(eng.Labels(), eng.Fingerprint())
		r.pool = mcpsrc.Open(mc, mcpsrc.Options{Timeout: cfg.Reload.MCPTimeout, Refresh: cfg.Reload.MCPRefresh})
	}
	for path := range r.watched {
		r.watched[path], _ = stampFile(path)
	}
	signal.Notify(r.hup, syscall.SIGHUP)
	return r, nil
}

// LoadObserver hears of every index swapped in (the metrics).
type LoadObserver interface {
	IndexLoaded(idx *index.Index, path string, generation uint64)
}

// Use has new domains embed with emb (the engine measured by the
// metrics) and tells obs (if not nil) of every index swapped in.
func (r *Reloader) Use(emb server.Embedder, obs LoadObserver) { r.emb, r.onLoad = emb, obs }

// Learn gives each new index its view of what l learned (nil: learning
// off).
func (r *Reloader) Learn(l *learn.Learner) { r.learner = l }

// Close stops listening for SIGHUP and closes the MCP connections.
func (r *Reloader) Close() error {
	signal.Stop(r.hup)
	if r.pool != nil {
		return r.pool.Close()
	}
	return nil
}

// source names where the index comes from, for GetIndexInfo.
func (r *Reloader) source() string {
	if r.pool == nil {
		return "file " + r.cfg.Index
	}
	if r.cfg.Reload.Catalog != "" {
		return "mcp " + r.cfg.Reload.MCPConfig + " + catalog " + r.cfg.Reload.Catalog
	}
	return "mcp " + r.cfg.Reload.MCPConfig
}

// Initial is the index the daemon starts with: the --index file (loaded
// is that file, already read), else one built from the MCP servers once
// each has been tried.
func (r *Reloader) Initial(ctx context.Context, loaded *index.Index) (*index.Index, string, error) {
	if loaded != nil {
		if err := loaded.CheckModel(r.eng.Fingerprint(), r.eng.Dims()); err != nil {
			return nil, "", fmt.Errorf("index %s does not match model %s: %w", r.cfg.Index, r.cfg.Model, err)
		}
		return loaded, "file " + r.cfg.Index, nil
	}
	wctx, cancel := context.WithTimeout(ctx, 2*r.cfg.Reload.MCPTimeout+time.Second)
	defer cancel()
	snap, err := r.pool.WaitReady(wctx)
	if err != nil && ctx.Err() != nil {
		return nil, "", ctx.Err()
	}
	r.logServers(snap)
	idx, _, err := r.buildMCP(ctx, snap, false)
	if err != nil {
		return nil, "", fmt.Errorf("build the index from %s: %w", r.cfg.Reload.MCPConfig, err)
	}
	return idx, r.source(), nil
}

// loadFile loads the --index file and checks it fits the model.
func (r *Reloader) loadFile() (*index.Index, error) {
	idx, err := index.LoadWith(r.cfg.Index, r.cfg.Load)
	if err != nil {
		return nil, fmt.Errorf("load index %s: %w", r.cfg.Index, err)
	}
	if err := idx.CheckModel(r.eng.Fingerprint(), r.eng.Dims()); err != nil {
		return nil, fmt.Errorf("index %s does not match model %s: %w", r.cfg.Index, r.cfg.Model, err)
	}
	return idx, nil
}

// buildMCP builds an index from the snapshot's tools and the base
// catalog. Vectors of unchanged texts come from the cache. budgeted: a
// rebuild for changed tools, whose new texts must fit the budget (else
// errBudget) and are embedded in small batches.
func (r *Reloader) buildMCP(ctx context.Context, snap mcpsrc.Snapshot, budgeted bool) (*index.Index, *catalog.Catalog, error) {
	var base *catalog.Catalog
	if r.cfg.Reload.Catalog != "" {
		var err error
		if base, err = catalog.Load(r.cfg.Reload.Catalog); err != nil {
			return nil, nil, err
		}
	}
	cat, warnings, err := mcpsrc.Catalog(base, snap)
	for _, w := range warnings {
		r.log.Warn("mcp tools", "warning", w)
	}
	if err != nil {
		return nil, nil, err
	}
	batch := 0 // labels' default
	if budgeted {
		var texts []string
		for _, l := range labels.Labels(cat) {
			texts = append(texts, l.Texts...)
		}
		n := r.cache.Missing(texts)
		if wait := r.spend(n, time.Now()); wait > 0 {
			return nil, nil, errBudget{texts: n, wait: wait}
		}
		batch = rebuildBatch
	}
	start := time.Now()
	man := r.eng.Manifest()
	idx, err := indexbuild.Build(ctx, cat, r.cache, labels.Model{Name: man.Name, Fingerprint: r.eng.Fingerprint(), Dims: r.eng.Dims()},
		indexbuild.Options{Embedding: labels.Options{Generator: "classifierd --mcp-config", BatchSize: batch}})
	hits, misses := r.cache.Prune()
	if err != nil {
		return nil, nil, err
	}
	ids := mcpsrc.ServerIDs(cat)
	r.ids.Store(&ids)
	r.catSHA = cat.SHA256()
	r.log.Info("index built from mcp tools", "servers", len(cat.Servers), "tools", len(idx.LabelsOf(index.KindTool)),
		"embedded", misses, "cached", hits, "took", time.Since(start).Round(time.Millisecond))
	return idx, cat, nil
}

// Sources reports the MCP servers for GetIndexInfo (nil without --mcp-config).
func (r *Reloader) Sources() []server.SourceStatus {
	if r.pool == nil {
		return nil
	}
	ids := map[string]string{}
	if p := r.ids.Load(); p != nil {
		ids = *p
	}
	var out []server.SourceStatus
	for _, st := range r.pool.Snapshot().Servers {
		out = append(out, server.SourceStatus{Name: st.Name, ID: ids[st.Name], Tools: len(st.Tools), Degraded: st.Degraded,
			Connected: st.Connected, LastError: st.LastError, LastSync: st.LastSync})
	}
	return out
}

// Run follows SIGHUP, the watched file and the MCP servers until ctx ends,
// swapping each new index into srv. hs, if set, gets MCPHealthService.
func (r *Reloader) Run(ctx context.Context, srv *server.Server, hs *health.Server) {
	var tick <-chan time.Time
	if r.cfg.Reload.Interval > 0 {
		t := time.NewTicker(r.cfg.Reload.Interval)
		defer t.Stop()
		tick = t.C
	}
	var mcpChanged <-chan struct{}
	r.retry = time.NewTimer(time.Hour)
	r.retry.Stop()
	defer r.retry.Stop()
	if r.pool != nil {
		snap := r.pool.Snapshot()
		mcpChanged = snap.Changed
		r.setHealth(hs, snap)
		// The index was built from a snapshot at start; what changed since
		// (a slow server's first listing) is picked up now.
		r.reload(ctx, srv, "mcp tools changed")
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.hup:
			r.log.Info("SIGHUP: reloading")
			r.reload(ctx, srv, "sighup")
		case <-tick:
			changed := false
			for path, seen := range r.watched {
				if st, err := stampFile(path); err == nil && st != seen {
					r.watched[path], changed = st, true
				}
			}
			if changed {
				r.reload(ctx, srv, "file changed")
			}
		case <-r.retry.C:
			// A rebuild waited for the embedding budget: the latest tools.
			r.reload(ctx, srv, "mcp tools changed")
		case <-mcpChanged:
			// Let changes of several servers (or several notifications of
			// one) arrive, then rebuild once.
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.cfg.Reload.Debounce):
			}
			snap := r.pool.Snapshot()
			mcpChanged = snap.Changed
			r.setHealth(hs, snap)
			r.reload(ctx, srv, "mcp tools changed")
		}
	}
}

// reload builds or loads the new index and swaps it in, or refuses it and
// keeps the old one.
func (r *Reloader) reload(ctx context.Context, srv *server.Server, reason string) {
	var idx *index.Index
	var err error
	if r.pool == nil {
		idx, err = r.loadFile()
	} else {
		if reason != "mcp tools changed" {
			// SIGHUP or a changed file: follow the MCP config's servers
			// (unchanged ones keep their connections and tools).
			if err = r.updateServers(); err != nil {
				r.log.Error("reload refused; the previous index keeps serving", "reason", reason, "err", err)
				srv.Refused(fmt.Sprintf("%s: %v", reason, err))
				return
			}
		}
		snap := r.pool.Snapshot()
		if reason == "mcp tools changed" && (!snap.Ready() || !r.toolsChanged(snap)) {
			return
		}
		r.logServers(snap)
		idx, _, err = r.buildMCP(ctx, snap, reason == "mcp tools changed")
		var eb errBudget
		if errors.As(err, &eb) {
			r.log.Info("mcp tools changed: the rebuild waits for the embedding budget; the previous index keeps serving",
				"texts", eb.texts, "wait", eb.wait.Round(time.Second))
			if r.retry != nil {
				r.retry.Reset(eb.wait)
			}
			return
		}
	}
	var dom server.Domain
	if err == nil {
		emb := r.emb
		if emb == nil {
			emb = r.eng
		}
		start := time.Now()
		dcfg := r.domain
		dcfg.Learned = r.learner.View(idx)
		if dom, err = server.NewDomainConfig(idx, emb, dcfg); err == nil {
			LogShortlist(r.log, dom, start)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		r.log.Error("reload refused; the previous index keeps serving", "reason", reason, "err", err)
		srv.Refused(fmt.Sprintf("%s: %v", reason, err))
		return
	}
	old := srv.Load()
	if prev, now := categoryIDs(srv.Index()), categoryIDs(idx); !slices.Equal(prev, now) {
		r.log.Warn("the new index has other categories; hub sessions keep the categories the daemon started with until it restarts",
			"before", len(prev), "now", len(now))
	}
	l := srv.Swap(dom, r.source(), reason)
	if r.onLoad != nil {
		path := r.cfg.Index
		if r.pool != nil {
			path = "" // built from live tools: no file
		}
		r.onLoad.IndexLoaded(idx, path, l.Generation)
	}
	r.log.Info("index reloaded", "reason", reason, "generation", l.Generation, "previous", old.Generation,
		"categories", len(idx.LabelsOf(index.KindCategory)), "servers", len(idx.LabelsOf(index.KindServer)),
		"tools", len(idx.LabelsOf(index.KindTool)))
}

// updateServers reads the MCP config again and has the pool follow it.
func (r *Reloader) updateServers() error {
	mc, err := mcpsrc.LoadConfig(r.cfg.Reload.MCPConfig)
	if err != nil {
		return err
	}
	if err := SharedOnly(mc, "--mcp-config", r.cfg.ServesIdentified); err != nil {
		return err
	}
	r.pool.Update(mc)
	return nil
}

// toolsChanged reports whether the snapshot's tools (with the base
// catalog) differ from what the served index was built from.
func (r *Reloader) toolsChanged(snap mcpsrc.Snapshot) bool {
	var base *catalog.Catalog
	if r.cfg.Reload.Catalog != "" {
		var err error
		if base, err = catalog.Load(r.cfg.Reload.Catalog); err != nil {
			return true // let the build report it
		}
	}
	cat, _, err := mcpsrc.Catalog(base, snap)
	return err != nil || cat.SHA256() != r.catSHA
}

// logServers logs each degraded server once per change.
func (r *Reloader) logServers(snap mcpsrc.Snapshot) {
	for _, st := range snap.Servers {
		if st.Degraded {
			r.log.Warn("mcp server degraded; its last known tools are kept", "server", st.Name, "tools", len(st.Tools), "err", st.LastError)
		}
	}
}

func (r *Reloader) setHealth(hs *health.Server, snap mcpsrc.Snapshot) {
	if hs == nil {
		return
	}
	status := healthpb.HealthCheckResponse_SERVING
	for _, st := range snap.Servers {
		if st.Degraded {
			status = healthpb.HealthCheckResponse_NOT_SERVING
		}
	}
	hs.SetServingStatus(MCPHealthService, status)
}

// fileStamp is what tells a changed file: its size and modification
// time. Writers should replace the file with a rename (gen-index --out to
// a temporary name, then mv); a file caught half-written is refused as
// invalid and loaded at the next check once its stamp changes again.
type fileStamp struct {
	size int64
	mod  int64
}

func stampFile(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: st.Size(), mod: st.ModTime().UnixNano()}, nil
}

func categoryIDs(idx *index.Index) []string {
	var out []string
	for _, li := range idx.LabelsOf(index.KindCategory) {
		out = append(out, idx.Labels[li].ID)
	}
	slices.Sort(out)
	return out
}

// Caller is what call_tool reaches with --mcp-config: the live servers
// the index is built from (nil without them).
func (r *Reloader) Caller() mcpserver.Caller {
	if r.pool == nil {
		return nil
	}
	return r.pool
}

// LogShortlist logs, once the domain's router shortlists (its inverted
// file is built in the background after a load), how many cells it has and
// how long the build took; nothing for catalogs under --shortlist-from.
func LogShortlist(log *slog.Logger, dom server.Domain, start time.Time) {
	go func() {
		<-dom.Router.ShortlistReady()
		if on, cells := dom.Router.Shortlists(); on {
			log.Info("shortlist ready", "cells", cells, "took", time.Since(start).Round(time.Millisecond))
		}
	}()
}

// SharedOnly refuses a configuration the daemon would serve less
// isolated than it says: the daemon's call_tool has one connection per
// server for every caller, so a server marked per-identity, or one using
// the identity placeholder, is served by classifierd proxy only. With
// callers identified (identified: --auth-token-file or --tls-client-ca),
// every entry must say "isolation": "shared": one caller's call would
// otherwise read what another's left in a stateful server (a memory
// server's graph), while the proxy, given the same entry, isolates.
func SharedOnly(mc *mcpsrc.Config, flag string, identified bool) error {
	_, perIdentity, err := mc.Isolate(mcpsrc.IsolationShared)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if identified {
		for _, sc := range mc.Servers {
			if sc.Isolation == "" {
				return fmt.Errorf("%s: server %q sets no \"isolation\": with --auth-token-file or --tls-client-ca the daemon's call_tool shares one connection per server between every caller, so what one caller leaves in the server another reads; set \"isolation\": %q if that is meant, or put the server behind classifierd proxy, which gives each identity its own backend (\"isolation\": %q, its default with authentication)",
					flag, sc.Name, mcpsrc.IsolationShared, mcpsrc.IsolationPerIdentity)
			}
		}
	}
	if len(perIdentity) > 0 {
		return fmt.Errorf("%s: server %q has \"isolation\": %q, which only classifierd proxy serves: the daemon's call_tool shares one connection per server between callers (set %q, or put the server behind the proxy)",
			flag, perIdentity[0].Name, mcpsrc.IsolationPerIdentity, mcpsrc.IsolationShared)
	}
	return nil
}
