// Package mcpproxy is classifierd's MCP filtering proxy. It sits between an
// agent and the real MCP servers of a hub-style configuration (their live
// tools come from mcpsrc): each agent session sees the meta tools
// (search_tools, call_tool, hub__analyze_prompt) plus the tools
// of the categories (one per server) its exposure holds.
// hub__analyze_prompt widens or replaces that exposure from a prompt and,
// only when it changed, the session's tool list changes and the SDK sends
// notifications/tools/list_changed. search_tools ranks every live tool,
// exposed or not, and call_tool forwards a call to the right server,
// so the agent can call what it was not shown.
//
// The index over the live tools is rebuilt (indexbuild.Build) whenever a
// server's tools change, each server's listing indexed in the background
// on its own and bounded (indexer.go, catalog.go); exposures live in a
// session.Store, and every answer comes from the same server.Server the
// gRPC API uses.
package mcpproxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/classifierd/classifierd/calibrate"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/internal/mcpplaces"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
	"github.com/classifierd/classifierd/session"
)

// Meta tool names.
const (
	ToolSearch  = "search_tools"
	ToolCall    = "call_tool"
	ToolAnalyze = "hub__analyze_prompt"
)

var errNoTools = errors.New("mcpproxy: no server has listed tools yet")

// ToolScope is the token scope (server/auth) a call of tool needs: route
// to rank tools and change one's own tool list (search_tools,
// hub__analyze_prompt); call for call_tool and every server tool the proxy
// shows, which do whatever the real tools do. A name it does not know
// needs call.
func ToolScope(tool string) string {
	switch tool {
	case ToolSearch, ToolAnalyze:
		return auth.ScopeRoute
	}
	return auth.ScopeCall
}

// Source is where the live tools come from and calls go to: an
// *mcpsrc.Pool.
type Source interface {
	Snapshot() mcpsrc.Snapshot
	CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
}

// Embedder embeds texts: the model engine.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Config configures a Proxy.
type Config struct {
	Source   Source
	Embedder Embedder
	// LabelEmbedder embeds the live tools' label texts at index time
	// (embed.Engine.Labels: a model's passage prefix); nil: Embedder.
	LabelEmbedder Embedder
	Model         labels.Model
	Limits        request.Limits
	// Sessions configures the exposure store (TTL, limits, default
	// exposure); AllCategories is set by the proxy. Its MaxSessions and
	// MaxPerOwner also bound the live agent sessions, in all and per
	// owner (server.Caller.Quota), counted from a session's start to its
	// end (NewSessionServer).
	Sessions session.Config
	// ServerNames are every configured server's name: the categories a
	// session can be exposed to.
	ServerNames []string
	// Timeout bounds each tool call (0: none); Debounce is how long the
	// proxy waits for more changes before rebuilding (default 100ms).
	Timeout, Debounce time.Duration
	// MinReindex is the least time between two indexes of one server's
	// listing (default MinReindexInterval).
	MinReindex time.Duration
	Version    string
	Logger     *slog.Logger
	// Caller says who makes a tool call and whether it may, from the HTTP
	// request's header (nil over stdio), as mcpserver.Config.Caller; the
	// scope a tool needs is ToolScope's. Nil: every call is
	// server.Anonymous.
	Caller func(tool string, header http.Header) (server.Caller, error)
	// Identify says who makes a request that is not a tool call, as
	// mcpserver.Config.Identify (nil: server.Anonymous).
	Identify func(header http.Header) (server.Caller, error)
	// Admit, if set, admits each request before it runs, as
	// mcpserver.Config.Admit (the proxy admits the tool calls that run
	// its model, search_tools and hub__analyze_prompt, and every request
	// that is not a tool call, such as tools/list, by caller; the
	// forwarded calls for their own CPU, the place given back while the
	// backend works: mcpserver.Forward).
	Admit func(ctx context.Context, method, tool string, size int) (context.Context, func(), error)
	// Metrics, when set, gets the proxy's series (metrics.go): live
	// sessions, sessions refused, forwarded tool calls.
	Metrics prometheus.Registerer
	// Learner, when set, learns from the calls the proxy forwards: each
	// session's calls since its last hub__analyze_prompt (or, before
	// one, its first search_tools) are reported for that request
	// (learn.View.Report; a later call replaces the report with one
	// naming every call so far). Nil: no learning.
	Learner *learn.Learner
}

// Proxy serves the filtered view of its source's tools.
type Proxy struct {
	cfg      Config
	sessions *session.Store
	prior    calibrate.Calibration

	// buildMu serialises rebuilds, so an older build never replaces a newer.
	buildMu sync.Mutex
	mu      sync.Mutex
	live    *live
	clients map[*client]bool
	// places holds a place for each live agent session (mcpplaces, the
	// mechanism the daemon's --mcp-listen uses too); inFlight each
	// caller's forwarded calls.
	places   *mcpplaces.Places
	inFlight mcpserver.CallSlots
	metrics  *metrics // nil without Config.Metrics

	// backends are the servers by name, order their names as first seen
	// (p.mu); cut is how many tools of each server MaxToolsIndexed left
	// out of the last index. progress is closed (and replaced) when a
	// backend's first index is ready or failed.
	backends map[string]*backend
	order    []string
	cut      map[string]int
	progress chan struct{}
	// gate lets callers' embeddings (query, through it) go before the
	// index's (cache, through it).
	gate    *embedGate
	query   Embedder
	cache   *vecCache
	workers sync.WaitGroup
	// sleep waits between two indexes of a backend (sleepCtx; tests
	// replace it).
	sleep func(ctx context.Context, d time.Duration) bool
	// burst and perMinute are each backend's embedding budget
	// (EmbedBurst, EmbedPerMinute; tests set others).
	burst, perMinute float64
}

// live is one build over the servers' tools; it is never modified.
type live struct {
	key     string
	backend mcpserver.Backend
	tools   map[string]liveTool
	// byLabel is each tool label's exposed name.
	byLabel map[int]string
}

// New returns a proxy; Run keeps its index in step with the source. It
// learns the calibration prior for the model once (indexbuild.ReferencePrior).
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.Source == nil || cfg.Embedder == nil || cfg.Logger == nil {
		return nil, errors.New("mcpproxy: source, embedder and logger are required")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 100 * time.Millisecond
	}
	if cfg.MinReindex <= 0 {
		cfg.MinReindex = MinReindexInterval
	}
	sc := cfg.Sessions
	ids, err := serverIDs(cfg.ServerNames)
	if err != nil {
		return nil, err
	}
	sc.AllCategories = ids
	st, err := session.NewStore(sc)
	if err != nil {
		return nil, err
	}
	if cfg.LabelEmbedder == nil {
		cfg.LabelEmbedder = cfg.Embedder
	}
	prior, err := indexbuild.ReferencePrior(ctx, cfg.LabelEmbedder, cfg.Model, nil)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	p := &Proxy{cfg: cfg, sessions: st, prior: prior, clients: map[*client]bool{}, backends: map[string]*backend{},
		cut: map[string]int{}, progress: make(chan struct{}), gate: newEmbedGate(), sleep: sleepCtx,
		burst: EmbedBurst, perMinute: EmbedPerMinute}
	p.query = p.gate.foreground(cfg.Embedder)
	p.cache = newVecCache(p.gate.background(cfg.LabelEmbedder), MaxCachedVectors)
	maxSessions, perOwner := sc.Limits()
	p.places = mcpplaces.New(maxSessions, perOwner, func() { p.metrics.sessionDisplaced() })
	if cfg.Metrics != nil {
		if p.metrics, err = newMetrics(cfg.Metrics, cfg.ServerNames, func() float64 {
			n, _ := p.places.Count("")
			return float64(n)
		}); err != nil {
			return nil, errors.Join(err, st.Close())
		}
	}
	return p, nil
}

// Close ends the sessions.
func (p *Proxy) Close() error { return p.sessions.Close() }

// Run indexes the source's tools and follows their changes, updating
// every session's tool list, until ctx ends; it returns once its indexing
// has stopped. Each server's listing is indexed in the background on its
// own (offer): one backend's large or changing listing delays neither the
// others' nor the callers'.
func (p *Proxy) Run(ctx context.Context) {
	go p.sessions.Run(ctx)
	defer p.workers.Wait()
	for {
		snap := p.cfg.Source.Snapshot()
		p.offer(ctx, snap)
		select {
		case <-ctx.Done():
			return
		case <-snap.Changed:
		}
		// Let a burst of changes settle.
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.Debounce):
		}
	}
}

// WaitIndexed waits until every server that had listed in snap has its
// first index ready (or failed), or ctx ends (its error then). Run does
// the indexing.
func (p *Proxy) WaitIndexed(ctx context.Context, snap mcpsrc.Snapshot) error {
	for {
		p.mu.Lock()
		done := true
		for _, st := range snap.Servers {
			if b := p.backends[st.Name]; st.Listed && (b == nil || b.ready == nil && b.failed == "") {
				done = false
			}
		}
		ch := p.progress
		p.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Rebuild indexes snap's tools now, each server's listing that differs
// from its indexed one (whatever MinReindex says), then brings every
// session's tool list in step.
func (p *Proxy) Rebuild(ctx context.Context, snap mcpsrc.Snapshot) error {
	for _, l := range p.listings(snap) {
		p.mu.Lock()
		b := p.backends[l.state.Name]
		if b.want == nil || b.want.key != l.key {
			b.want = l
		}
		indexed := b.ready != nil && b.ready.key == l.key
		p.mu.Unlock()
		if indexed {
			continue
		}
		if _, err := p.embedListing(ctx, l); err != nil {
			return err
		}
		p.mu.Lock()
		b.ready, b.failed, b.last = l, "", time.Now()
		p.mu.Unlock()
	}
	err := p.assemble(ctx)
	p.mu.Lock()
	p.progressLocked()
	p.mu.Unlock()
	return err
}

// progressLocked wakes WaitIndexed (p.mu held).
func (p *Proxy) progressLocked() {
	close(p.progress)
	p.progress = make(chan struct{})
}

// assemble indexes the listings of every backend indexed so far (their
// texts are in the cache: nothing new is embedded) if they differ from
// the current build's, then brings every session's tool list in step.
func (p *Proxy) assemble(ctx context.Context) error {
	p.buildMu.Lock()
	defer p.buildMu.Unlock()
	snap, _ := p.readySnapshot()
	key := toolsKey(snap)
	p.mu.Lock()
	cur := p.live
	p.mu.Unlock()
	if cur != nil && cur.key == key {
		return nil
	}
	cat, tools, err := buildCatalog(snap)
	if err != nil {
		return err
	}
	prior := p.prior
	idx, err := indexbuild.Build(ctx, cat, p.cache, p.cfg.Model, indexbuild.Options{ReferencePrior: &prior,
		Embedding: labels.Options{Generator: "classifierd proxy"}})
	if err != nil {
		return err
	}
	dom, err := server.NewDomainConfig(idx, p.query, server.DomainConfig{Limits: p.cfg.Limits, Learned: p.cfg.Learner.View(idx)})
	if err != nil {
		return err
	}
	svc, err := server.New(server.Config{Sessions: p.sessions, Learner: p.cfg.Learner}, dom, p.query, p.cfg.Logger)
	if err != nil {
		return err
	}
	l := &live{key: key, backend: mcpserver.Backend{Classifier: svc, Index: idx}, tools: tools, byLabel: map[int]string{}}
	for _, li := range idx.LabelsOf(index.KindTool) {
		lb := &idx.Labels[li]
		l.byLabel[li] = lb.Server + "__" + lb.Name
	}
	p.mu.Lock()
	p.live = l
	clients := make([]*client, 0, len(p.clients))
	for c := range p.clients {
		clients = append(clients, c)
	}
	p.mu.Unlock()
	p.cfg.Logger.Info("proxy: indexed live tools", "servers", len(cat.Servers), "tools", len(tools), "cached_vectors", p.cache.Len())
	for _, c := range clients {
		c.sync()
	}
	return nil
}

func (p *Proxy) current() (*live, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil {
		if ix := p.indexingLocked(); len(ix) > 0 {
			return nil, fmt.Errorf("UNAVAILABLE: the tools of %s are being indexed; try again shortly", serverList(ix))
		}
		return nil, errors.New("UNAVAILABLE: no MCP server has listed its tools yet; try again shortly")
	}
	return p.live, nil
}

// serverList names servers for a message, clipped.
func serverList(names []string) string {
	const most = 8
	var q []string
	for i, n := range names {
		if i == most {
			q = append(q, fmt.Sprintf("and %d more", len(names)-most))
			break
		}
		q = append(q, strconv.Quote(clip.String(n, 64)))
	}
	if len(names) == 1 {
		return "server " + q[0]
	}
	return "servers " + strings.Join(q, ", ")
}

// client is one agent session: its own MCP server (so its tool list is its
// own) and its exposure in the session store.
type client struct {
	p  *Proxy
	id string
	// key is the session's id in the store: session.ScopedID(owner, id),
	// where server.Server looks up the owner's session id.
	key   string
	place *mcpplaces.Place // the owner's (server.Caller.Quota), held while the session lives
	quota string           // the owner's server.Caller.Quota: its forwarded calls share MaxCallsPerCaller
	srv   *mcp.Server

	mu    sync.Mutex
	shown map[string]string // exposed backend tools now on srv: their definitions' digests (liveTool.def)
	// changes counts the syncs that changed srv's tools; notified is its
	// value when the session was last told so (notifyChanged).
	changes, notified uint64
	// task is the request id the session's calls are reported for
	// (Config.Learner); called and calledTools are the calls forwarded
	// since.
	task        string
	called      []string
	calledTools []*pb.ToolRef
}

// NewSessionServer returns the MCP server for one new agent session of
// owner, with its own exposure (the default exposure). The session's
// exposure is owner's: hub__analyze_prompt changes it only for a tool call
// whose caller (Config.Caller; server.Anonymous without one) has owner's
// name.
//
// The session takes one of the places Config.Sessions allows, in all
// and for owner.Quota (session.ErrOwnerLimit), before anything is made.
// When every place is taken, an owner holding fewer sessions than the
// busiest owner takes the place of that owner's least recently used
// session (by its last request, Used), which is closed and forgotten;
// an owner as busy as the busiest gets session.ErrLimit. Serve the server on
// one connection, then call served once the request or connection that
// was to start its session has been served, whatever came of it: the
// place is given back when the session ends (a DELETE, the transport's
// idle timeout; a dropped connection does not end a streamable HTTP
// session), or at once if none started (the SDK refused the request).
func (p *Proxy) NewSessionServer(owner server.Caller) (srv *mcp.Server, served func(), err error) {
	place, err := p.places.Take(owner.Quota)
	if err != nil {
		p.metrics.sessionRefused(err)
		return nil, nil, err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	c := &client{p: p, id: "mcp-" + hex.EncodeToString(b[:]), place: place, quota: owner.Quota, shown: map[string]string{}}
	c.key = session.ScopedID(owner.Name, c.id)
	if _, err := p.sessions.CreateFor(context.Background(), session.Owner{ID: owner.Name, Quota: owner.Quota}, c.key, ""); err != nil {
		place.Give()
		return nil, nil, err
	}
	// The store's entry goes first, so the store never holds more than
	// the places count.
	place.OnEnd(func() { p.drop(c) })
	c.srv = mcpserver.NewBare(mcpserver.Config{Timeout: p.cfg.Timeout, Version: p.cfg.Version, Logger: p.cfg.Logger,
		ProtocolVersions: SessionVersions(), Caller: p.cfg.Caller, Identify: p.cfg.Identify, Admit: p.cfg.Admit})
	c.addMetaTools()
	c.srv.AddSendingMiddleware(c.listChanged)
	// Every request of the session keeps its exposure alive: the
	// transport counts any request as activity, the store only exposure
	// reads and changes, so an agent that only called tools lost its
	// exposure at the TTL while its MCP session lived on.
	c.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			_, _ = p.sessions.Get(ctx, c.key)
			return next(ctx, method, req)
		}
	})
	p.mu.Lock()
	p.clients[c] = true
	p.mu.Unlock()
	c.sync()
	return c.srv, c.served, nil
}

// served watches the session of c's server, which serves one: its end
// forgets c and gives its place back. Without one (never connected, or
// ended already) c is forgotten now.
func (c *client) served() {
	var id string
	for ss := range c.srv.Sessions() {
		id = ss.ID()
		break
	}
	c.place.Hold(c.srv, id)
}

// Used marks the session id used by a request of the caller quota
// (server.Caller.Quota), so that at --max-sessions its least recently
// used sessions make way first (NewSessionServer), and reports whether
// the session made way already and is closing: answer the request
// mcpplaces.Gone then.
func (p *Proxy) Used(id, quota string) (gone bool) { return p.places.Used(id, quota) }

// Ended forgets the session whose MCP session id is id now if it has
// ended, as once a DELETE for it has been served, rather than when the
// goroutine awaiting its end runs: its place is free before the DELETE is
// answered, so its client can start another at once. A session that is
// still live (a DELETE refused) or unknown is left alone.
func (p *Proxy) Ended(id string) { p.places.Ended(id) }

// SessionVersions are the MCP versions that have sessions (an initialize
// handshake): a session's own tool list and its tools/list_changed need
// one, so the proxy serves only these (2026-07-28 is sessionless).
func SessionVersions() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < "2026-07-28" {
			out = append(out, v)
		}
	}
	return out
}

// drop forgets c's exposure (its place's OnEnd).
func (p *Proxy) drop(c *client) {
	p.mu.Lock()
	delete(p.clients, c)
	p.mu.Unlock()
	_ = p.sessions.Delete(context.Background(), c.key)
}

// sync makes the session's tool list the meta tools plus the tools of its
// exposed categories in the current build, and reports whether it
// changed. It adds and removes only what differs, so an unchanged exposure
// sends no list_changed; the SDK sends one (debounced, 10ms later) for a
// change, unless notifyChanged told the session first.
func (c *client) sync() (changed bool) {
	// The whole sync holds c.mu, so two syncs (a rebuild and an
	// analyze_prompt) cannot interleave and leave the older state.
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := c.p.current()
	if err != nil {
		return
	}
	exposed, err := c.p.sessions.Exposed(context.Background(), c.key)
	if err != nil {
		return // ended or expired
	}
	want := map[string]liveTool{}
	for _, li := range session.Tools(l.backend.Index, exposed) {
		if lt, ok := l.tools[l.byLabel[li]]; ok {
			want[lt.Exposed] = lt
		}
	}
	// A tool stays when its definition is unchanged, so a rebuild for
	// another server's change notifies no session that does not see it.
	var gone []string
	for name, def := range c.shown {
		if lt, ok := want[name]; !ok || lt.def != def {
			gone = append(gone, name)
			delete(c.shown, name)
		}
	}
	if len(gone) > 0 {
		c.srv.RemoveTools(gone...)
		changed = true
	}
	for name, lt := range want {
		if _, ok := c.shown[name]; ok {
			continue
		}
		// One definition for every session (buildCatalog): each holding
		// its own copy, and the JSON of each, grew the proxy 16 MB a
		// session for a backend of 400 tools with 20 KB schemas (the
		// fourteenth hostile pass).
		c.srv.AddTool(lt.shown, c.forward(lt.Server, lt.Tool.Name))
		c.shown[name] = lt.def
		changed = true
	}
	if changed {
		c.changes++
	}
	return changed
}

// notifyChangedKey marks the context of notifyChanged's notification.
type notifyChangedKey struct{}

// notifyChanged sends the session notifications/tools/list_changed now,
// in the context of the tool call ctx belongs to, before that call's
// result: a host invalidates its tool list before it acts on the answer
// of the call that changed it (hub__analyze_prompt), as the hub flow this
// replaces did. Over stdio the two share one stream; over streamable HTTP
// the notification goes on the call's own event stream, ahead of its
// response, where the SDK's own would go to the standalone stream 10ms
// later. The SDK has no call to send it, so it sends a progress
// notification that listChanged turns into this one.
func (c *client) notifyChanged(ctx context.Context, ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	c.mu.Lock()
	c.notified = c.changes
	c.mu.Unlock()
	if err := ss.NotifyProgress(context.WithValue(ctx, notifyChangedKey{}, true), &mcp.ProgressNotificationParams{}); err != nil {
		c.p.cfg.Logger.Debug("proxy: tools/list_changed not sent", "err", err)
	}
}

// listChanged is the session server's sending middleware: it sends
// notifyChanged's notification as tools/list_changed, and drops the SDK's
// own debounced one when a notification has gone out since the last
// change (notifyChanged's, or an earlier debounced one), so a change is
// announced once. The SDK debounces each AddTool and RemoveTools by 10ms,
// so a sync descheduled for longer between two of them would otherwise
// announce one change twice; the first waits for the sync's end (c.mu),
// so it announces all of it.
func (c *client) listChanged(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch {
		case method == "notifications/progress" && ctx.Value(notifyChangedKey{}) != nil:
			ss, _ := req.GetSession().(*mcp.ServerSession)
			return next(ctx, "notifications/tools/list_changed",
				&mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: &mcp.ToolListChangedParams{}})
		case method == "notifications/tools/list_changed":
			c.mu.Lock()
			told := c.notified == c.changes
			c.notified = c.changes
			c.mu.Unlock()
			if told {
				return nil, nil
			}
		}
		return next(ctx, method, req)
	}
}

// exposedTool is a backend tool under its exposed name.
func exposedTool(lt liveTool) *mcp.Tool {
	t := *lt.Tool
	t.Name = lt.Exposed
	if t.InputSchema == nil {
		t.InputSchema = map[string]any{"type": "object"}
	}
	if t.Title == "" {
		t.Title = lt.Tool.Name
	}
	t.Description = fmt.Sprintf("[%s] %s", lt.Server, lt.Tool.Description)
	return &t
}

// forward calls tool on server with the agent's arguments, verbatim.
func (c *client) forward(server, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return c.call(ctx, server, tool, req.Params.Arguments)
	}
}

// call forwards a tool call and reports it for the session's task,
// within the owner's MaxCallsPerCaller: its place is given back when the
// call's request ends, which the SDK ends once the answer is written (an
// answer its client does not read holds it).
func (c *client) call(ctx context.Context, server, tool string, args any) (*mcp.CallToolResult, error) {
	release, ok := c.p.inFlight.Take(ctx, c.quota)
	if !ok {
		return mcpserver.SlotsExhausted(), nil
	}
	defer release()
	res, err := c.p.call(ctx, server, tool, args)
	c.report(ctx, server, tool)
	return res, err
}

// startTask makes request id the one later calls are reported for: a
// hub__analyze_prompt's always (a new prompt, a new task), a
// search_tools' only before any.
func (c *client) startTask(id string, byAnalyze bool) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !byAnalyze && c.task != "" {
		return
	}
	c.task, c.called, c.calledTools = id, nil, nil
}

// report reports the session's calls so far, with server's tool, for
// its task (none: nothing). A failed report costs only the learning.
func (c *client) report(ctx context.Context, server, tool string) {
	if c.p.cfg.Learner == nil {
		return
	}
	c.mu.Lock()
	if c.task == "" {
		c.mu.Unlock()
		return
	}
	if !slices.Contains(c.called, server) {
		c.called = append(c.called, server)
	}
	if !slices.ContainsFunc(c.calledTools, func(t *pb.ToolRef) bool { return t.GetServer() == server && t.GetName() == tool }) &&
		len(c.calledTools) < learn.MaxNames {
		c.calledTools = append(c.calledTools, &pb.ToolRef{Server: server, Name: tool})
	}
	req := &pb.ReportUseRequest{RequestId: c.task, Servers: slices.Clone(c.called), Tools: slices.Clone(c.calledTools)}
	c.mu.Unlock()
	if len(req.Servers) > learn.MaxNames {
		return
	}
	l, err := c.p.current()
	if err == nil {
		_, err = l.backend.Classifier.ReportUse(ctx, req)
	}
	if err != nil {
		c.p.cfg.Logger.Debug("proxy: report of a forwarded call not kept", "server", server, "err", err)
	}
}

func (p *Proxy) call(ctx context.Context, server, tool string, args any) (*mcp.CallToolResult, error) {
	start := time.Now()
	res := mcpserver.Forward(ctx, p.cfg.Source, server, tool, args)
	p.metrics.call(server, start, res == nil || res.IsError)
	return res, nil
}

// MaxForwardedAnswer and MaxCallsPerCaller are mcpserver's: the
// proxy's forwarded calls are bounded as the daemon's call_tool is.
const (
	MaxForwardedAnswer = mcpserver.MaxForwardedAnswer
	MaxCallsPerCaller  = mcpserver.MaxCallsPerCaller
)
