// Package proxyrun assembles classifierd proxy: the filtering proxy
// (mcpproxy) over the configured MCP servers (mcpsrc, per-identity
// backends when callers are identified), the model, the security of
// --mcp-listen (package security), its session places (mcpplaces) and
// metrics, served over stdio or streamable HTTP until the context ends.
package proxyrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/learning"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/mcpplaces"
	"github.com/classifierd/classifierd/internal/memlimit"
	"github.com/classifierd/classifierd/internal/ops"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/mcpproxy"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
	"github.com/classifierd/classifierd/session"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is what classifierd proxy is started with.
type Config struct {
	// Learn is the --learn flags: the proxy learns from the calls it
	// forwards (no --state, so --learn-db or memory).
	Learn     learning.Config
	MCPConfig string
	Model     string
	Manifest  string
	ORTLib    string
	// MemoryLimit is --memory-limit (package memlimit).
	MemoryLimit int64
	Threads     int
	Concurrency int
	MCPListen   string
	Timeout     time.Duration
	Connect     time.Duration
	Wait        time.Duration
	SessionTTL  time.Duration
	MaxSessions int
	// MaxSessionsPerClient is the most sessions one caller may hold
	// (--max-sessions-per-client).
	MaxSessionsPerClient int
	Exposure             string
	LogFormat            string
	LogLevel             slog.Level
	// Security is --tls-cert, --tls-key, --tls-client-ca and
	// --auth-token-file, applied to --mcp-listen as the daemon applies them.
	Security security.Config
	// InsecureListen lets --mcp-listen serve a non-loopback address with
	// no one identified (--insecure-listen).
	InsecureListen bool
	// MetricsListen serves Prometheus metrics at HOST:PORT/metrics in
	// plain HTTP, as the daemon's --metrics-listen (off when empty).
	MetricsListen string
	// MaxBackends, MaxBackendsPerClient and BackendIdle bound the backends
	// of per-identity servers (--max-backends, --max-backends-per-client,
	// --backend-idle-timeout; mcpsrc.IsolatedOptions).
	MaxBackends, MaxBackendsPerClient int
	BackendIdle                       time.Duration
	// MaxConnsPerPeer and MaxConns bound the connections open on
	// --mcp-listen and --metrics-listen together, per peer address and
	// in all (--max-conns-per-peer, --max-conns; listeners.Limiter).
	MaxConnsPerPeer, MaxConns int
	// MCPRequestsPerSecond and MCPRequestBurst hold each caller's
	// requests on --mcp-listen to a rate, refused before the SDK reads
	// them (--mcp-requests-per-second, --mcp-request-burst; 0: none).
	MCPRequestsPerSecond float64
	MCPRequestBurst      int
}

// defaultIsolation is the isolation of a server whose entry sets none:
// per-identity when the proxy authenticates its callers (tokens or client
// certificates), so one caller's data in a stateful server never reaches
// another; shared otherwise, when every caller is one identity anyway.
func (c *Config) defaultIsolation() string {
	if c.Security.Identifies() {
		return mcpsrc.IsolationPerIdentity
	}
	return mcpsrc.IsolationShared
}

// ValidateListen checks the security flags against --mcp-listen: they
// apply to it only, and a listener beyond loopback must identify its
// callers (a token file or a client CA) unless --insecure-listen says
// otherwise.
func (c *Config) ValidateListen() error {
	if err := c.Security.Validate(); err != nil {
		return err
	}
	if c.MCPListen == "" {
		if c.Security != (security.Config{}) || c.InsecureListen {
			return errors.New("--tls-cert, --tls-client-ca, --auth-token-file and --insecure-listen apply to --mcp-listen; over stdio the proxy serves the process that started it")
		}
		return nil
	}
	return security.CheckOpenListen(c.MCPListen, c.Security, "--insecure-listen", c.InsecureListen)
}

// Run connects to the configured servers, indexes their tools with
// the model and serves the filtered view until ctx ends (or, on stdio,
// the agent closes the connection).
func Run(ctx context.Context, cfg Config, version string, log *slog.Logger) (err error) {
	limit, from := memlimit.Apply(cfg.MemoryLimit)
	log.Info("memory limit", "bytes", limit, "from", from)
	mcfg, err := mcpsrc.LoadConfig(cfg.MCPConfig)
	if err != nil {
		return err
	}
	listing, perIdentity, err := mcfg.Isolate(cfg.defaultIsolation())
	if err != nil {
		return err
	}
	// The token file and certificates are read first: a bad one fails
	// before the model loads.
	sec, err := security.Open(cfg.Security)
	if err != nil {
		return err
	}
	if len(sec.Reloaders) > 0 {
		hupCtx, stopHUP := context.WithCancel(ctx)
		waitHUP := security.ReloadOnHUP(hupCtx, log, sec.Reloaders)
		defer func() { stopHUP(); waitHUP() }()
	}
	man, err := models.Resolve(cfg.Model, cfg.Manifest)
	if err != nil {
		return err
	}
	rt, err := embed.InitRuntime(cfg.ORTLib)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	eng, err := embed.Open(rt, embed.Config{ModelDir: cfg.Model, Manifest: man, IntraOpThreads: cfg.Threads,
		MaxConcurrent: cfg.Concurrency, MaxBatch: 1024})
	if err != nil {
		return fmt.Errorf("load model %s: %w", cfg.Model, err)
	}
	defer func() { err = errors.Join(err, eng.Close()) }()

	learner, err := learning.Open(ctx, cfg.Learn, nil, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, learner.Close()) }()

	poolOpts := mcpsrc.Options{Timeout: cfg.Connect, Stderr: os.Stderr, ClientName: "classifierd-proxy", ClientVersion: version}
	pool := mcpsrc.Open(listing, poolOpts)
	defer func() { err = errors.Join(err, pool.Close()) }()
	var names []string
	for _, s := range mcfg.Servers {
		names = append(names, s.Name)
	}
	reg := listeners.NewRegistry()
	conns, err := listeners.NewLimiter(listeners.ConnLimits{PerPeer: cfg.MaxConnsPerPeer, Total: cfg.MaxConns,
		EvictUnauthenticated: cfg.Security.Identifies()}, reg, log)
	if err != nil {
		return err
	}
	sec.OnAuthenticated = conns.Authenticated
	// Requests abandoned before their answer (HTTP/2 rapid resets over
	// TLS) counted per peer, as the daemon's listeners count them: the
	// thirteenth hostile pass cost the proxy 7.9 s of CPU in 10 s.
	resets := rapidreset.New()
	resets.Log(log)
	if err := listeners.Counters(reg,
		listeners.Counter{Name: "classifierd_proxy_early_reset_closes_total", Help: "MCP connections closed for abandoning most of their requests before their answer (an HTTP/2 rapid reset).", F: resets.HTTPCloses},
		listeners.Counter{Name: "classifierd_proxy_throttled_reads_total", Help: "Reads of HTTP/2 MCP connections (over TLS) held back because their client sent frames that carry no request or large body past their rate (see classifierd_http2_throttled_reads_total).", F: resets.Throttled},
		listeners.Counter{Name: "classifierd_proxy_reset_penalties_total", Help: "Peers penalized for abandoning many requests before their answer across their connections (each penalty lasts 30s).", F: resets.Penalties},
		listeners.Counter{Name: "classifierd_proxy_penalized_connections_held_total", Help: "New connections of penalized peers held back before their TLS handshake (a burst of 4, then 2 a second, are served in order); the local peer's 200 ms at most, then served.", F: resets.Held},
		listeners.Counter{Name: "classifierd_proxy_penalized_connections_refused_total", Help: "New connections of penalized peers closed unserved: past the 64 held back per peer, or held 10s (a burst of 4, then 2 a second, are served in order).", F: resets.Refused},
	); err != nil {
		return err
	}
	// The proxy's request bodies in flight, bounded as the daemon's are
	// (--max-body-bytes-in-flight's defaults): each body is bounded by
	// MaxMessage, their sum was not (100 connections: +530 MB).
	sec.Bodies = httpguard.NewBudget(httpguard.DefaultBodyBudget, httpguard.DefaultBodyBudgetPerClient)
	// Each caller's requests at a rate, refused at the gate before the
	// SDK reads them (httpguard.RequestRate): its tools/list flood cost
	// the proxy 5 times its client's CPU (the eighteenth hostile pass).
	sec.MCPRequests = httpguard.NewRequestRate(cfg.MCPRequestsPerSecond, cfg.MCPRequestBurst)
	// Bodies refused once read, at a rate per caller (httpguard.RefusedBodies).
	sec.BadBodies = httpguard.NewRefusedBodies(httpguard.DefaultRefusedBodyBytesPerSecond, httpguard.DefaultRefusedBodyBurst)
	sec.BodyRate = httpguard.NewBodyRate(httpguard.DefaultBodyBytesPerSecond, httpguard.DefaultBodyBurst, httpguard.DefaultAllBodyBytesPerSecond)
	// The tools that run the model (search_tools, hub__analyze_prompt)
	// share it by caller as the daemon's do, with the daemon's defaults;
	// the forwarded calls for the proxy's own CPU (ops.MCPAdmit), not
	// while their backends work.
	adm := server.NewAdmission(server.AdmissionConfig{MaxInFlight: 2 * cfg.Concurrency, MaxQueue: ops.DefaultMaxWaiting,
		MaxQueueBytes: server.DefaultAdmissionMaxQueueBytes, MaxWait: server.DefaultAdmissionMaxWait,
		StandingAfter: server.DefaultAdmissionStandingAfter, IdleAfter: server.DefaultAdmissionIdleAfter, MinDeadline: 2 * time.Millisecond,
		Cores: runtime.GOMAXPROCS(0)})
	if err := listeners.Counters(reg, listeners.Counter{Name: "classifierd_proxy_refused_past_rate_total",
		Help: "MCP requests refused (429, JSON-RPC -32029) past their caller's --mcp-requests-per-second before the SDK read them, and calls refused past their caller's rate of refusals (20 a second after a burst of 64): on HTTP/1.1 each answer closes its connection (Connection: close).",
		F:    func() int64 { return adm.RefusalsPastRate() + sec.MCPRequests.Refused() }},
		listeners.Counter{Name: "classifierd_proxy_refused_bodies_past_rate_total",
			Help: "MCP requests with a body refused (429) from their heads because their caller's bodies were refused (400, 413, 415, 422) after they were read more than 1 MiB a second, after 8 MiB.",
			F:    func() int64 { return sec.BadBodies.Refused() }},
		listeners.Counter{Name: "classifierd_proxy_body_bytes_past_rate_total",
			Help: "MCP requests with a body refused (429) from their heads because their caller sent more than 16 MiB of request bodies a second, after 64 MiB, or more than its fair share of 32 MiB a second while all callers together sent more.",
			F:    func() int64 { return sec.BodyRate.Refused() }}); err != nil {
		return err
	}
	src, closeSrc, err := isolate(pool, perIdentity, cfg, poolOpts, reg, log)
	if err != nil {
		return err
	}
	defer closeSrc() // before the pool
	px, err := mcpproxy.New(ctx, mcpproxy.Config{Source: src, Embedder: eng, LabelEmbedder: eng.Labels(),
		Model:  labels.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()},
		Limits: request.Limits{}, ServerNames: names, Timeout: cfg.Timeout, Version: version, Logger: log,
		Sessions: session.Config{TTL: cfg.SessionTTL, MaxSessions: cfg.MaxSessions, MaxPerOwner: cfg.MaxSessionsPerClient,
			DefaultExposure: session.Exposure(cfg.Exposure)},
		Caller: sec.ToolCaller(mcpproxy.ToolScope), Identify: sec.MCPIdentity, Admit: ops.MCPAdmit(adm, mcpproxy.ToolAnalyze), Metrics: reg, Learner: learner})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, px.Close()) }()
	metricsCtx, stopMetrics := context.WithCancel(context.Background())
	waitMetrics, err := listeners.ServeMetrics(metricsCtx, cfg.MetricsListen, reg, conns, listeners.DefaultIdleTimeout, log)
	if err != nil {
		stopMetrics()
		return err
	}
	defer func() { stopMetrics(); waitMetrics() }()
	// The index is built in the background (px.Run), each server's
	// listing on its own and bounded (mcpproxy's MaxToolsPerServer...):
	// the proxy serves once every server has listed and been indexed, or
	// at --startup-wait, whichever comes first, and a server indexed
	// later is searchable from then on (search_tools says which are not
	// yet). A backend of 2,000 tools of 1 KB kept the listener shut for
	// over 9 minutes when the index was built first (the thirteenth
	// hostile pass).
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); px.Run(runCtx) }()
	defer func() { stopRun(); <-ran }() // before the engine closes
	waitCtx, cancel := context.WithTimeout(ctx, cfg.Wait)
	snap, werr := pool.WaitReady(waitCtx)
	if werr != nil {
		log.Warn("proxy: not every server answered in time; serving what is known", "wait", cfg.Wait)
	}
	for _, st := range snap.Servers {
		if st.Degraded {
			log.Warn("proxy: server not available", "server", st.Name, "err", st.LastError)
		}
	}
	if werr == nil && px.WaitIndexed(waitCtx, snap) != nil && ctx.Err() == nil {
		log.Warn("proxy: serving while indexing; these servers' tools are searchable once indexed", "servers", px.Indexing(), "wait", cfg.Wait)
	}
	cancel()
	if ix := px.Indexing(); len(ix) == 0 && !px.Indexed() && ctx.Err() == nil {
		log.Warn("proxy: no tools indexed yet")
	}

	if cfg.MCPListen == "" {
		owner, _ := sec.MCPIdentity(nil) // the process that started the proxy
		s, served, err := px.NewSessionServer(owner)
		if err != nil {
			return err
		}
		defer served()
		log.Info("classifierd proxy serving MCP on stdio", "servers", len(names))
		err = s.Run(ctx, mcpserver.StdioTransport(os.Stdin, os.Stdout, MaxMessage, log))
		if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) {
			return nil
		}
		return err
	}
	lis, err := net.Listen("tcp", cfg.MCPListen)
	if err != nil {
		return fmt.Errorf("mcp listen: %w", err)
	}
	lis = conns.Wrap("mcp", lis)
	logProxyListen(log, cfg, sec)
	stopHTTP := listeners.ServeMCP(lis, sec.ListenerTLS(false), sec.MCPGate(proxyHandler(px, cfg, version, log), MaxMessage, auth.ScopeRoute, auth.ScopeCall), resets, 5*time.Second, listeners.DefaultIdleTimeout, log)
	defer stopHTTP()
	<-ctx.Done()
	return nil
}

// proxySource lists the live tools from the pool and calls them through
// calls (the per-identity backends, and the pool for shared servers).
type proxySource struct {
	*mcpsrc.Pool
	calls mcpsrc.Caller
}

func (s proxySource) CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return s.calls.CallTool(ctx, server, params)
}

// isolate returns where the proxy's tool calls go: the pool alone when
// every server is shared, else per-identity backends (mcpsrc.Isolated,
// bounded by --max-backends...) for the per-identity servers, exported as
// classifierd_proxy_backends. The returned func stops the backends.
func isolate(pool *mcpsrc.Pool, perIdentity []mcpsrc.ServerConfig, cfg Config, opts mcpsrc.Options, reg *prometheus.Registry, log *slog.Logger) (mcpproxy.Source, func(), error) {
	if len(perIdentity) == 0 {
		return pool, func() {}, nil
	}
	iso, err := mcpsrc.NewIsolated(pool, perIdentity, mcpsrc.IsolatedOptions{
		Identity:    func(ctx context.Context) string { return server.CallerFrom(ctx).Name },
		MaxBackends: cfg.MaxBackends, MaxPerIdentity: cfg.MaxBackendsPerClient, IdleTimeout: cfg.BackendIdle, Pool: opts})
	if err != nil {
		return nil, nil, err
	}
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "classifierd_proxy_backends",
		Help: "Backends of per-identity servers running (a stdio server's is a process), of --max-backends."},
		func() float64 { n, _ := iso.Backends(""); return float64(n) })); err != nil {
		_ = iso.Close()
		return nil, nil, err
	}
	var names []string
	for _, sc := range perIdentity {
		names = append(names, sc.Name)
		if sc.Transport == mcpsrc.TransportStdio && !sc.UsesIdentity() {
			log.Info("proxy: a per-identity server gets a process per identity, but its processes share any file or database it keeps; give each identity its own with "+
				mcpsrc.IdentityPlaceholder+" in its args or env", "server", sc.Name)
		}
	}
	log.Info("proxy: per-identity servers: each caller's calls go to a backend of its own", "servers", names,
		"max_backends", cfg.MaxBackends, "idle_timeout", cfg.BackendIdle)
	return proxySource{Pool: pool, calls: iso}, func() { _ = iso.Close() }, nil
}

// logProxyListen says at start who may use --mcp-listen, and warns when
// that is anyone who reaches it or when tokens cross the network in clear.
func logProxyListen(log *slog.Logger, cfg Config, sec *security.Security) {
	loopback, _ := security.LoopbackListen(cfg.MCPListen) // validated by parseProxyFlags
	switch {
	case !cfg.Security.Identifies() && !loopback:
		security.WarnOpenListen(log, cfg.MCPListen, "--insecure-listen")
	case !cfg.Security.Identifies():
		log.Warn("MCP listener without authentication: every local process may call every tool of the servers (add --auth-token-file or --tls-client-ca)",
			"addr", cfg.MCPListen)
	case sec.Tokens != nil && sec.TLS == nil && !loopback:
		log.Warn("bearer tokens cross the network in clear: add --tls-cert and --tls-key", "addr", cfg.MCPListen)
	}
	if cfg.Security.Identifies() {
		by := "tokens"
		if sec.Tokens == nil {
			by = "client certificates"
		}
		log.Info("MCP listener authenticates callers", "by", by, "tls", sec.TLS != nil)
	}
}

// MaxMessage bounds one MCP message from an agent (stdio line or
// HTTP body), as the daemon's default --max-recv-bytes does.
const MaxMessage = 4 << 20

// sessionServerKey carries a new session's MCP server from proxyHandler
// to the SDK's getServer.
type sessionServerKey struct{}

// proxyHandler serves every agent session its own MCP server, so each has
// its own tool list, owned by the caller mcpGate (in front of it) found.
// The SDK asks getServer for a server on every request but uses it only to
// start a session (a request without Mcp-Session-Id); only those get a
// new one, and only while the caller's share of sessions
// (--max-sessions-per-client, else 429) and the proxy's (--max-sessions,
// else 503) have room: a refused session costs nothing.
func proxyHandler(px *mcpproxy.Proxy, cfg Config, version string, log *slog.Logger) http.Handler {
	// The SDK checks versions against this one on every request. It
	// serves no session: one the SDK starts on it (a request without a
	// session that isInitialize did not take for an initialize, such as a
	// batch holding one) is refused, so it neither lingers uncounted by
	// --max-sessions nor serves a tool list that is no one's.
	shared := mcp.NewServer(&mcp.Implementation{Name: "classifierd", Version: version},
		&mcp.ServerOptions{SupportedProtocolVersions: mcpproxy.SessionVersions()})
	shared.AddReceivingMiddleware(func(mcp.MethodHandler) mcp.MethodHandler {
		return func(context.Context, string, mcp.Request) (mcp.Result, error) {
			return nil, ErrNoSession
		}
	})
	inner := listeners.MCPHandler(func(r *http.Request) *mcp.Server {
		if s, ok := r.Context().Value(sessionServerKey{}).(*mcp.Server); ok {
			return s
		}
		return shared
	}, MaxMessage, cfg.SessionTTL, log, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(mcpplaces.SessionHeader)
		switch {
		case r.Method == http.MethodPost && id == "" && isInitialize(w, r):
			s, served, err := px.NewSessionServer(server.CallerFrom(r.Context())) // mcpGate's
			if err != nil {
				mcpplaces.Refuse(w, r, err, cfg.MaxSessions, cfg.MaxSessionsPerClient, log)
				return
			}
			defer served() // after the SDK has started the session, or not
			r = r.WithContext(context.WithValue(r.Context(), sessionServerKey{}, s))
		case id != "" && px.Used(id, server.CallerFrom(r.Context()).Quota):
			mcpplaces.Gone(w) // it made way for a quieter caller's
			return
		case r.Method == http.MethodDelete && id != "":
			// Go's HTTP server sends the answer when the handler returns:
			// the session's place is free by then.
			defer px.Ended(id)
		}
		inner.ServeHTTP(w, r)
	})
}

// ErrNoSession answers a message that reached no session's server.
var ErrNoSession = errors.New("start a session with a single initialize request (no batch)")

// isInitialize reports whether a POST body is an initialize request (the
// start of a session), leaving the body for the SDK to read. Only those
// get a session, so other requests without a session cannot fill the
// session store.
func isInitialize(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessage))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Method == "initialize"
}
