// Package ops is the operational side of the daemon, opened from its
// flags: the metrics registry and what it exports (admission, sessions,
// watches, the index in use), the admission of model calls, the gRPC
// server's credentials and edge interceptors, the guard of --http-listen
// counting its refusals, the TLS of each listener as logged at start, and
// --metrics-listen. TLS and tokens are package security's.
package ops

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// Config is the operational side of the daemon: metrics, TLS,
// authentication, admission and file limits (docs/operations.md).
type Config struct {
	security.Config      // --tls-cert, --tls-key, --tls-client-ca, --auth-token-file
	MetricsListen        string
	PlaintextListeners   string // --plaintext-listeners: http, mcp
	MaxSessionsPerClient int
	MaxInFlight          int
	MaxQueue             int
	MaxWaitingTime       time.Duration
	MaxWaitingBytes      int64
	DeadlineShare        float64
	AdmissionWeights     string // --admission-weights: NAME=WEIGHT,...
	MinDeadline          time.Duration
	MaxIndexBytes        int64
	IndexMmap            bool
	// MemoryLimit is --memory-limit: the Go runtime's soft memory limit
	// (package memlimit; 0: from the container's, -1: none).
	MemoryLimit int64
	// IdleTimeout closes a connection no call or request has used for
	// this long, on every listener (--idle-timeout).
	IdleTimeout time.Duration
	// RecvTimeout bounds how long a gRPC call's request may take to
	// arrive (--recv-timeout); MaxStreams is the most calls one gRPC
	// connection may have open (--max-concurrent-streams).
	RecvTimeout time.Duration
	MaxStreams  int
	// WriteStallTimeout closes a gRPC connection that has left its
	// answers unread this long (--write-stall-timeout).
	WriteStallTimeout time.Duration
	// BodyBudget and BodyBudgetPerClient bound the request bytes being
	// received at once on every listener, gRPC, HTTP/JSON and MCP
	// (--max-body-bytes-in-flight...).
	BodyBudget, BodyBudgetPerClient int64
	// MCPRequestsPerSecond and MCPRequestBurst hold each caller's
	// requests on --mcp-listen to a rate, refused before the SDK reads
	// them (--mcp-requests-per-second, --mcp-request-burst; 0: none).
	MCPRequestsPerSecond float64
	MCPRequestBurst      int
	// RefusedBodyBytesPerSecond and RefusedBodyBurst hold each caller's
	// request bodies refused after they were read (400, 413, 415, 422)
	// to a rate on --http-listen and --mcp-listen together
	// (httpguard.RefusedBodies; --refused-body-bytes-per-second,
	// --refused-body-burst; 0: none).
	RefusedBodyBytesPerSecond, RefusedBodyBurst int64
	// BodyBytesPerSecond and BodyBurst hold each caller's request bodies,
	// whatever their answer, to a rate on the same listeners
	// (httpguard.NewBodyRate; --body-bytes-per-second, --body-burst; 0:
	// none).
	BodyBytesPerSecond, BodyBurst int64
	// AllBodyBytesPerSecond holds every caller's request bodies together
	// to a rate, past which a caller sending more than its fair share of
	// it is refused (httpguard.NewBodyRate; --all-body-bytes-per-second;
	// 0: none).
	AllBodyBytesPerSecond int64

	// MaxConnsPerPeer and MaxConns bound the connections open on all the
	// listeners, per peer address and in all (--max-conns-per-peer,
	// --max-conns; 0 for MaxConns: derived from RLIMIT_NOFILE); past
	// either, a connection is closed as soon as accepted
	// (listeners.Limiter).
	MaxConnsPerPeer, MaxConns int

	// MaxWatches, MaxWatchesPerClient and MaxWatchesPerSession bound the
	// WatchExposure streams open at once (--max-watches...).
	MaxWatches, MaxWatchesPerClient, MaxWatchesPerSession int

	// PlainHTTP and PlainMCP are what Validate read from
	// PlaintextListeners.
	PlainHTTP, PlainMCP bool
	// weights is what Validate read from AdmissionWeights (and bodyWeights
	// keys by server.CallerKey).
	weights map[string]float64
}

// IndexLoad is how index files are read, at start and on every reload.
func (c *Config) IndexLoad() index.LoadOptions {
	return index.LoadOptions{MaxBytes: c.MaxIndexBytes, Mmap: c.IndexMmap}
}

// Validate reports the first unusable setting and fills in the defaults
// that depend on concurrency.
func (c *Config) Validate(concurrency int) error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	c.PlainHTTP, c.PlainMCP = false, false
	for _, l := range strings.Split(c.PlaintextListeners, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		switch l {
		case "http":
			c.PlainHTTP = true
		case "mcp":
			c.PlainMCP = true
		default:
			return fmt.Errorf("--plaintext-listeners: %q is not http or mcp (the gRPC listener has no opt-out)", l)
		}
	}
	if (c.PlainHTTP || c.PlainMCP) && c.TLSCert == "" {
		return errors.New("--plaintext-listeners needs --tls-cert and --tls-key (without them every listener is plain text)")
	}
	if c.MaxSessionsPerClient < 1 || c.MaxInFlight < 0 || c.MaxQueue < 0 || c.MaxWaitingTime < 0 || c.MinDeadline < 0 || c.MaxIndexBytes < 1 || c.IdleTimeout <= 0 {
		return errors.New("--max-sessions-per-client, --max-index-bytes and --idle-timeout must be positive; --max-inflight, --max-waiting, --max-waiting-time and --min-deadline not negative")
	}
	if c.RecvTimeout <= 0 || c.WriteStallTimeout <= 0 || c.MaxStreams < 1 || c.BodyBudget < 1 || c.BodyBudgetPerClient < 1 {
		return errors.New("--recv-timeout, --write-stall-timeout, --max-concurrent-streams, --max-body-bytes-in-flight and --max-body-bytes-in-flight-per-client must be positive")
	}
	if c.MCPRequestsPerSecond < 0 || c.MCPRequestBurst < 0 || c.MCPRequestsPerSecond > 0 && c.MCPRequestBurst < 1 {
		return errors.New("--mcp-requests-per-second must not be negative (0: no bound), and --mcp-request-burst must be positive with it")
	}
	if c.RefusedBodyBytesPerSecond < 0 || c.RefusedBodyBurst < 0 || c.RefusedBodyBytesPerSecond > 0 && c.RefusedBodyBurst < 1<<10 {
		return errors.New("--refused-body-bytes-per-second must not be negative (0: no bound), and --refused-body-burst at least 1024 with it")
	}
	if c.BodyBytesPerSecond < 0 || c.BodyBurst < 0 || c.BodyBytesPerSecond > 0 && c.BodyBurst < 1<<10 {
		return errors.New("--body-bytes-per-second must not be negative (0: no bound), and --body-burst at least 1024 with it")
	}
	if c.AllBodyBytesPerSecond < 0 {
		return errors.New("--all-body-bytes-per-second must not be negative (0: no bound)")
	}
	if c.MaxWatches < 1 || c.MaxWatchesPerClient < 1 || c.MaxWatchesPerSession < 1 {
		return errors.New("--max-watches, --max-watches-per-client and --max-watches-per-session must be positive")
	}
	if c.MaxConnsPerPeer < 0 || c.MaxConns < 0 {
		return errors.New("--max-conns-per-peer and --max-conns must not be negative")
	}
	if c.DeadlineShare <= 0 || c.DeadlineShare > 1 || c.MaxWaitingBytes < 0 {
		return errors.New("--deadline-share must be in (0, 1], --max-waiting-bytes not negative")
	}
	c.weights = nil
	for _, kv := range strings.Split(c.AdmissionWeights, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, v, ok := strings.Cut(kv, "=")
		w, err := strconv.ParseFloat(v, 64)
		if !ok || name == "" || err != nil || !(w > 0) || math.IsInf(w, 0) {
			return fmt.Errorf("--admission-weights: %q is not NAME=WEIGHT with a positive weight", kv)
		}
		if c.weights == nil {
			c.weights = map[string]float64{}
		}
		c.weights[name] = w
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 2 * concurrency
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxWaiting
	}
	return nil
}

// DefaultMaxWaiting is --max-waiting's default: a bound on memory (a
// goroutine and a request each, with --max-waiting-bytes), not on
// waiting time, which the calls' deadlines and --max-waiting-time bound;
// room for 400 clients with long deadlines to wait rather than retry.
const DefaultMaxWaiting = 1024

// ops is what Config opens: the metrics registry, tokens, TLS, and the
// reloaders SIGHUP runs (security's).
type Ops struct {
	*security.Security
	cfg       Config
	log       *slog.Logger
	Registry  *prometheus.Registry
	Metrics   *server.Metrics
	Admission *server.Admission
	// Conns counts the connections of every listener of the daemon
	// (--max-conns-per-peer, --max-conns): wrap each with Conns.Wrap.
	Conns *listeners.Limiter
	// Recv bounds what the gRPC listener's connections hold while their
	// requests arrive, against Bodies, the budget every listener shares
	// (--max-body-bytes-in-flight): wrap the listener with
	// Recv.Listener.
	Recv *server.RecvGuard
}

// Open opens what cfg says: the security, the metrics registry, the
// admission and its gauges.
func Open(cfg Config, log *slog.Logger) (*Ops, error) {
	sec, err := security.Open(cfg.Config)
	if err != nil {
		return nil, err
	}
	o := &Ops{Security: sec, cfg: cfg, log: log, Registry: listeners.NewRegistry()}
	if o.Metrics, err = server.NewMetrics(o.Registry); err != nil {
		return nil, err
	}
	// One budget of request bytes being received for every listener:
	// --listen (Recv), --http-listen (HTTPGuard) and --mcp-listen
	// (security's MCPGuard).
	o.Bodies = httpguard.NewBudget(cfg.BodyBudget, cfg.BodyBudgetPerClient)
	o.Recv = server.NewRecvGuard(o.Bodies)
	sec.MCPRequests = httpguard.NewRequestRate(cfg.MCPRequestsPerSecond, cfg.MCPRequestBurst)
	sec.BadBodies = httpguard.NewRefusedBodies(cfg.RefusedBodyBytesPerSecond, cfg.RefusedBodyBurst)
	sec.BodyRate = httpguard.NewBodyRate(cfg.BodyBytesPerSecond, cfg.BodyBurst, cfg.AllBodyBytesPerSecond)
	// The shares of the shared rate of bodies by --admission-weights, as
	// the model's: a hub or a bulk client weighed more sends more beside
	// many others.
	sec.BodyRate.Weigh(bodyWeights(cfg.weights))
	o.Recv.StallTimeout = cfg.WriteStallTimeout
	if err := o.Metrics.Gauge("classifierd_request_bytes_in_flight", "Request bytes being received or held until answered, all listeners together (bounded by --max-body-bytes-in-flight).",
		func() float64 { return float64(o.Bodies.Used()) }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_grpc_unread_answer_bytes", "gRPC answer bytes handed to the transport and not yet written to their connections, all callers together (16 MiB of one caller's refuse its new calls).",
		func() float64 { return float64(o.Recv.UnreadTotal()) }); err != nil {
		return nil, err
	}
	o.Recv.Peers().Log(log)
	if err := listeners.Counters(o.Registry,
		listeners.Counter{Name: "classifierd_grpc_early_reset_closes_total", Help: "gRPC connections closed for resetting most of their calls before their message (an HTTP/2 rapid reset).", F: o.Recv.EarlyResetCloses},
		listeners.Counter{Name: "classifierd_http_early_reset_closes_total", Help: "HTTP/JSON and MCP connections closed for abandoning most of their requests before their answer (an HTTP/2 rapid reset).", F: o.Recv.Peers().HTTPCloses},
		listeners.Counter{Name: "classifierd_http2_throttled_reads_total", Help: "Reads of HTTP/2 connections (gRPC, and HTTP/JSON and MCP over TLS) held back because their client sent frames that carry no request or large body (control frames, DATA frames under 1 KiB; over TLS on HTTP/JSON and MCP also DATA frames whose body no handler reads, and each RST_STREAM the server answers) past their own budget (256, 5 more per request handled, one per 4 KiB answered or KiB of body read) and their peer's spare (2,000 a second), at their own rate (200 a second) and their turn in their peer's share of its connections' rates (10,000 a second in all): the connection is slowed; one that waited 30 s with no request, or whose turn is further, is closed.", F: o.Recv.Peers().Throttled},
		listeners.Counter{Name: "classifierd_grpc_unread_data_bytes_total", Help: "DATA bytes gRPC connections sent that no call read: the bodies of calls refused from their headers (a token past its rates, no token) and frames on streams already ended. Past 16 MiB, a peer's connections are read at 16 MiB a second of them in all (classifierd_grpc_unread_data_held_reads_total).", F: o.Recv.UnreadData},
		listeners.Counter{Name: "classifierd_grpc_unread_data_held_reads_total", Help: "Reads of gRPC connections held back for their turn in their peer's 16 MiB a second of DATA no call reads (after 16 MiB at once): the client is slowed, never cut; one whose turn is 30 s away is closed.", F: o.Recv.Peers().UnreadHeld},
		listeners.Counter{Name: "classifierd_grpc_health_flood_closes_total", Help: "gRPC connections closed for 8 health checks refused past their rate (each connection may check 5 times a second after 10, past that its peer 200 a second after 2000); the peer is not penalized.", F: o.Recv.HealthFloodCloses},
		listeners.Counter{Name: "classifierd_grpc_reset_penalties_total", Help: "Peers penalized for abandoning many requests before their answer (gRPC, HTTP/JSON and MCP together) across their connections (each penalty lasts 30s).", F: o.Recv.PenalizedPeers},
		listeners.Counter{Name: "classifierd_grpc_penalized_connections_held_total", Help: "New connections (every listener) of penalized peers held back before any TLS or HTTP/2 work (a burst of 4, then 2 a second, are served in order); the local peer's (loopback, Unix socket) 200 ms at most, then served.", F: o.Recv.Peers().Held},
		listeners.Counter{Name: "classifierd_grpc_penalized_connections_refused_total", Help: "New connections (every listener) of penalized peers closed unserved: past the 64 held back per peer, or held 10s (a burst of 4, then 2 a second, are served in order).", F: o.Recv.PenalizedConnsRefused},
		listeners.Counter{Name: "classifierd_grpc_stalled_connections_closed_total", Help: "gRPC connections closed for leaving their answers unread a whole --write-stall-timeout.", F: o.Recv.StalledClosed},
	); err != nil {
		return nil, err
	}
	if o.Conns, err = listeners.NewLimiter(listeners.ConnLimits{PerPeer: cfg.MaxConnsPerPeer, Total: cfg.MaxConns,
		EvictUnauthenticated: cfg.Identifies()}, o.Registry, log); err != nil {
		return nil, err
	}
	sec.OnAuthenticated = o.Conns.Authenticated
	o.Admission = server.NewAdmission(server.AdmissionConfig{MaxInFlight: cfg.MaxInFlight, MaxQueue: cfg.MaxQueue,
		MaxQueueBytes: cfg.MaxWaitingBytes, MaxWait: cfg.MaxWaitingTime, StandingAfter: server.DefaultAdmissionStandingAfter,
		IdleAfter: server.DefaultAdmissionIdleAfter, MinDeadline: cfg.MinDeadline, DeadlineShare: cfg.DeadlineShare, Weights: cfg.weights,
		Cores: runtime.GOMAXPROCS(0)})
	if err := listeners.Counters(o.Registry, listeners.Counter{Name: "classifierd_admission_refused_past_rate_total",
		Help: "Calls refused (RESOURCE_EXHAUSTED, 429) past their caller's rate of refusals (20 a second after a burst of 64), and MCP requests refused (429, JSON-RPC -32029) past their caller's --mcp-requests-per-second before the SDK read them: on HTTP/1.1 each answer closes its connection (Connection: close); none is an early reset.",
		F:    func() int64 { return o.Admission.RefusalsPastRate() + sec.MCPRequests.Refused() }}); err != nil {
		return nil, err
	}
	if err := listeners.Counters(o.Registry, listeners.Counter{Name: "classifierd_refused_bodies_past_rate_total",
		Help: "Requests with a body refused (429) from their heads, on --http-listen and --mcp-listen (and gRPC calls on --listen, RESOURCE_EXHAUSTED as their headers arrive), because their caller's bodies were refused (400, 413, 415, 422; INVALID_ARGUMENT) after they were read more than --refused-body-bytes-per-second after --refused-body-burst.",
		F:    func() int64 { return sec.BadBodies.Refused() }},
		listeners.Counter{Name: "classifierd_body_bytes_past_rate_total",
			Help: "Requests with a body refused (429) from their heads, on --http-listen and --mcp-listen (and gRPC calls on --listen, RESOURCE_EXHAUSTED as their headers arrive), because their caller sent more request body bytes than --body-bytes-per-second after --body-burst.",
			F:    func() int64 { return sec.BodyRate.Refused() }},
		listeners.Counter{Name: "classifierd_body_bytes_past_share_total",
			Help: "Of classifierd_body_bytes_past_rate_total, the requests refused because every caller together sent more request body bytes than --all-body-bytes-per-second (after twice --body-burst) and their caller more than its fair share of it lately.",
			F:    func() int64 { return sec.BodyRate.RefusedByShare() }}); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_queue_depth", "Model calls waiting for a place.",
		func() float64 { return float64(o.Admission.Queued()) }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_in_flight", "Model calls admitted and running.",
		func() float64 { return float64(o.Admission.InFlight()) }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_long_in_flight", "Long model calls running (expected to take 4x the cheapest calls or more): each holds a core, at most GOMAXPROCS, shared between the active callers.",
		func() float64 { return float64(o.Admission.LongInFlight()) }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_callers", "Active callers (identities): with model calls waiting or running, or one ended in the last 250ms; the fair shares are among them.",
		func() float64 { return float64(o.Admission.Flows()) }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_overloaded", "1 while the admission holds waiting calls to --max-waiting-time (a standing queue), else 0.",
		func() float64 { return b2f(o.Admission.Overloaded()) }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_expected_wait_seconds", "How long a model call that found every place taken would wait now, estimated.",
		func() float64 { return o.Admission.ExpectedWait().Seconds() }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_wait_scale", "Admitted calls' waits divided by the waits estimated when they queued (calls nobody overtook, recent ones weighted most; at least 1): the estimates are multiplied by it.",
		func() float64 { return o.Admission.WaitScale() }); err != nil {
		return nil, err
	}
	if err := o.Metrics.Gauge("classifierd_admission_return_margin_seconds", "Time kept free at the end of a call's own deadline for its answer's way back: twice the p90 of recent calls' dispatch delays (headers on the connection to the call's goroutine starting).",
		func() float64 { return o.Admission.ReturnMargin().Seconds() }); err != nil {
		return nil, err
	}
	return o, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// LogTLS says at start which listeners serve TLS and which plain text.
func (o *Ops) LogTLS(log *slog.Logger, stdio bool, httpListen, mcpListen string, httpTLS, mcpTLS *tls.Config) {
	var on, off []string
	add := func(name string, used, tls bool) {
		switch {
		case !used:
		case tls:
			on = append(on, name)
		default:
			off = append(off, name)
		}
	}
	add("grpc", !stdio, o.TLS != nil)
	add("http", httpListen != "" && !stdio, httpTLS != nil)
	add("mcp", mcpListen != "", mcpTLS != nil)
	if o.TLS == nil {
		log.Info("listeners in plain text (no --tls-cert)", "plaintext", strings.Join(off, ","))
		return
	}
	log.Info("listeners serving TLS", "tls", strings.Join(on, ","), "plaintext", strings.Join(off, ","),
		"client_certificates", o.TLS.ClientCAs != nil)
	if len(off) > 0 && o.TLS.ClientCAs != nil && o.Tokens == nil {
		log.Warn("no call on a plain text listener can authenticate: it carries no client certificate (add --auth-token-file)",
			"plaintext", strings.Join(off, ","))
	}
}

// Watches is the count of WatchExposure streams (--max-watches...),
// exported as classifierd_exposure_watches.
func (o *Ops) Watches() (*session.Watches, error) {
	w := session.NewWatches(o.cfg.MaxWatches, o.cfg.MaxWatchesPerClient, o.cfg.MaxWatchesPerSession)
	err := o.Metrics.Gauge("classifierd_exposure_watches", "WatchExposure streams open.", func() float64 {
		n, _, _ := w.Count("", "")
		return float64(n)
	})
	return w, err
}

// SessionOwnerLimit is the per-caller session quota for session.Config.
func (o *Ops) SessionOwnerLimit() int { return o.cfg.MaxSessionsPerClient }

// Embedder wraps the model so its calls are measured.
func (o *Ops) Embedder(e server.Embedder) server.Embedder { return o.Metrics.Embedder(e) }

// IndexLoaded records the index in use for the metrics.
func (o *Ops) IndexLoaded(idx *index.Index, path string, generation uint64) {
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	o.Metrics.SetIndex(idx, size, generation)
}

// WatchSessions exports the number of sessions held.
func (o *Ops) WatchSessions(st interface {
	Len(context.Context) (int, error)
}) error {
	return o.Metrics.Gauge("classifierd_sessions_active", "Hub sessions held.", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err := st.Len(ctx)
		if err != nil {
			return math.NaN() // the shared store is unreachable: no figure, not a false zero
		}
		return float64(n)
	})
}

// ServerOptions are the gRPC server's transport credentials, codec and
// interceptors.
func (o *Ops) ServerOptions(log *slog.Logger, st *server.Stats, timeout time.Duration) []grpc.ServerOption {
	edge := server.Edge{Log: log, Stats: st, Timeout: timeout, Metrics: o.Metrics, Admission: o.Admission,
		Auth:        server.AuthConfig{Tokens: o.Tokens, ClientCerts: o.ClientCerts(), OnAuthenticated: o.OnAuthenticated},
		RecvTimeout: o.cfg.RecvTimeout, MaxConcurrentStreams: uint32(o.cfg.MaxStreams), Recv: o.Recv}
	// Set only when bounded: a nil *RefusedBodies in the interface
	// would install the tap for nothing.
	if o.BodyRate != nil {
		edge.BodyRate = o.BodyRate
	}
	if o.BadBodies != nil {
		edge.BadBodies = o.BadBodies
	}
	opts := edge.ServerOptions()
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(server.FrameCounting(credentials.NewTLS(o.TLS))))
	}
	return opts
}

// HTTPGuard is the guard of --http-listen (rpcGuard) counting the callers
// it refuses in classifierd_auth_denied_total, as the gRPC edge counts
// its own, under the method the path names when served is serving it,
// else "unknown" (a client cannot mint label values).
func (o *Ops) HTTPGuard(maxBody int64, served map[string]grpc.ServiceInfo) httpguard.Guard {
	g := o.RPCGuard(maxBody)
	g.Budget = o.Bodies
	g.BadBodies = o.BadBodies
	g.BodyRate = o.BodyRate
	refuse := g.Refuse
	g.Refuse = func(w http.ResponseWriter, r *http.Request, code int, err error) {
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			o.Metrics.Denied(servedMethod(r.URL.Path, served), status.Code(err))
		}
		refuse(w, r, code, err)
	}
	if o.Admission != nil {
		// Admission's refusals made before vanguard transcodes a call
		// (server.Admission.PrecheckHTTP), as the gRPC tap makes them
		// before a call's message is read.
		g.Admit = func(r *http.Request) error {
			m := servedMethod(r.URL.Path, served)
			timeout, ok := httpguard.RequestTimeout(r.Header)
			if m == "unknown" || !ok {
				return nil
			}
			return o.Admission.PrecheckHTTP(r.Context(), m, timeout)
		}
	}
	return g
}

// servedMethod is path when it names a method of served
// ("/pkg.Service/Method"), else "unknown".
func servedMethod(path string, served map[string]grpc.ServiceInfo) string {
	svc, name, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	for _, m := range served[svc].Methods {
		if m.Name == name {
			return path
		}
	}
	return "unknown"
}

// ServeMetrics serves /metrics until ctx ends; the returned func waits
// for it to stop.
func (o *Ops) ServeMetrics(ctx context.Context) (func(), error) {
	return listeners.ServeMetrics(ctx, o.cfg.MetricsListen, o.Registry, o.Conns, o.cfg.IdleTimeout, o.log)
}

// modelTools are the MCP tools of the daemon that run the model or cost
// CPU by their input (track_input_event judges and masks a 4 KB prompt,
// as TrackInputEvent does): they are admitted as the gRPC methods they
// call are (the others read sessions or forward to other servers).
func modelTools() []string {
	return []string{mcpserver.ToolSearch, mcpserver.ToolRoute, mcpserver.ToolAnalyzePrompt, mcpserver.ToolReportUse,
		mcpserver.ToolDetectInputPrompt, mcpserver.ToolInferExpected, mcpserver.ToolTrackInputEvent}
}

// MCPAdmit is the admission of MCP requests (mcpserver.Config.Admit) by
// a, under the caller the MCP server put in ctx, so an MCP caller has the
// same share as over gRPC: the calls of the model's tools (the daemon's,
// and more, such as the proxy's hub__analyze_prompt), and every request
// that is not a tool call (tools/list, initialize, ping, ...), whose
// answer is encoded in its place (server.Admission.AdmitCPU: it holds a
// core of the caller's share too). report_use is a model tool (a report
// by query routes the query). The other tools (call_tool, the proxy's
// forwarded calls) forward to other servers: they are admitted as
// AdmitCPU's too, under one name ("mcp/forward": the tool names are the
// callers'), for the SDK's check and decoding of their arguments and
// their encoding for the backend; mcpserver.Forward gives the place back
// while the backend works and takes one again for the answer (issue 27,
// the eighteenth pass: 59 % of the proxy's CPU under a flood of
// call_tool was there, outside any share). Nil without a.
func MCPAdmit(a *server.Admission, more ...string) func(context.Context, string, string, int) (context.Context, func(), error) {
	if a == nil {
		return nil
	}
	admitted := map[string]bool{}
	for _, tool := range append(modelTools(), more...) {
		admitted[tool] = true
	}
	return func(ctx context.Context, method, tool string, size int) (context.Context, func(), error) {
		if method != "tools/call" {
			return a.AdmitCPU(ctx, "mcp/"+method)
		}
		if !admitted[tool] {
			return a.AdmitCPU(ctx, "mcp/forward")
		}
		return a.Admit(ctx, "mcp/"+tool, int64(size))
	}
}

// bodyWeights is weights (by caller name, "anonymous" for a caller with
// none) keyed as the rates of request bodies key callers
// (server.CallerKey: "id:NAME", "peer:HOST"); nil with no weights.
func bodyWeights(weights map[string]float64) func(who string) float64 {
	if len(weights) == 0 {
		return nil
	}
	return func(who string) float64 {
		name, ok := strings.CutPrefix(who, "id:")
		if !ok {
			name = server.Anonymous
		}
		if w, ok := weights[name]; ok {
			return w
		}
		return 1
	}
}
