package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
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
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// OpsConfig is the operational side of the daemon: metrics, TLS,
// authentication, admission and file limits (docs/operations.md).
type OpsConfig struct {
	SecurityConfig       // --tls-cert, --tls-key, --tls-client-ca, --auth-token-file (security.go)
	MetricsListen        string
	PlaintextListeners   string // --plaintext-listeners: http, mcp
	MaxSessionsPerClient int
	MaxInFlight          int
	MaxQueue             int
	MaxWaitingTime       time.Duration
	MinDeadline          time.Duration
	MaxIndexBytes        int64
	IndexMmap            bool
	// IdleTimeout closes a connection no call or request has used for
	// this long, on every listener (--idle-timeout).
	IdleTimeout time.Duration

	// MaxWatches, MaxWatchesPerClient and MaxWatchesPerSession bound the
	// WatchExposure streams open at once (--max-watches...).
	MaxWatches, MaxWatchesPerClient, MaxWatchesPerSession int

	// plainHTTP and plainMCP are what validate read from
	// PlaintextListeners.
	plainHTTP, plainMCP bool
}

// indexLoad is how index files are read, at start and on every reload.
func (c *OpsConfig) indexLoad() index.LoadOptions {
	return index.LoadOptions{MaxBytes: c.MaxIndexBytes, Mmap: c.IndexMmap}
}

func (c *OpsConfig) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "serve Prometheus metrics on HOST:PORT/metrics (off when empty)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve TLS with this PEM certificate chain (with --tls-key) on every listener: --listen, --http-listen and --mcp-listen (not --metrics-listen); reloaded on SIGHUP")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", "", "require client certificates signed by this PEM CA bundle (mTLS) on every TLS listener; without --auth-token-file the subject CN is the caller")
	fs.StringVar(&c.PlaintextListeners, "plaintext-listeners", "", "with --tls-cert: serve these listeners in plain text all the same (comma-separated: http, mcp), for a TLS-terminating proxy in front of them; client certificates cannot be checked there (default: none, TLS on every listener)")
	fs.StringVar(&c.TokenFile, "auth-token-file", "", "require bearer tokens from this file (lines: NAME SCOPES TOKEN; mode 0600); reloaded on SIGHUP")
	fs.IntVar(&c.MaxSessionsPerClient, "max-sessions-per-client", 1000, "most hub sessions one caller (identity, or peer address when anonymous) may hold; with --mcp-listen, also the most MCP sessions it may hold there, counted apart (HTTP 429 past it)")
	fs.IntVar(&c.MaxWatches, "max-watches", server.DefaultMaxWatches, "most WatchExposure streams open at once; more get RESOURCE_EXHAUSTED (each costs a goroutine and its buffers)")
	fs.IntVar(&c.MaxWatchesPerClient, "max-watches-per-client", server.DefaultMaxWatchesPerClient, "most WatchExposure streams one caller (identity, or peer address when anonymous) may hold open; more get RESOURCE_EXHAUSTED")
	fs.IntVar(&c.MaxWatchesPerSession, "max-watches-per-session", server.DefaultMaxWatchesPerSession, "most WatchExposure streams open on one session; more get RESOURCE_EXHAUSTED (a hub needs one, and a moment's overlap when it reconnects)")
	fs.IntVar(&c.MaxInFlight, "max-inflight", 0, "model calls admitted at once (default: 2 x --concurrency)")
	fs.IntVar(&c.MaxQueue, "max-waiting", 0, "model calls that may wait for a place; more get RESOURCE_EXHAUSTED at once (default: 64 x --concurrency)")
	fs.DurationVar(&c.MaxWaitingTime, "max-waiting-time", server.DefaultAdmissionMaxWait, "refuse a model call at once (RESOURCE_EXHAUSTED) when the calls ahead of it would keep it from a place longer than this, from the recent rate places came free; applies once calls have waited without a break for 100ms, until the queue has been empty for 1s (before: a burst may queue up to 100ms of waiting) (0: --max-waiting only)")
	fs.DurationVar(&c.MinDeadline, "min-deadline", 2*time.Millisecond, "refuse model calls with less than this left of their deadline (DEADLINE_EXCEEDED) before any work")
	fs.Int64Var(&c.MaxIndexBytes, "max-index-bytes", index.DefaultMaxFileBytes, "largest index file accepted, in bytes")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", listeners.DefaultIdleTimeout, "close a connection that has had no call in flight (gRPC) or no request (HTTP/JSON, MCP) for this long; its client reconnects when it next calls")
	fs.BoolVar(&c.IndexMmap, "index-mmap", false, "score from a read-only mapping of the index file instead of a copy in memory (large indexes); only if the file is replaced by rename, as gen-index does: a mapped file rewritten in place (cp over it) kills the daemon")
}

func (c *OpsConfig) validate(concurrency int) error {
	if err := c.SecurityConfig.Validate(); err != nil {
		return err
	}
	c.plainHTTP, c.plainMCP = false, false
	for _, l := range splitList(c.PlaintextListeners) {
		switch l {
		case "http":
			c.plainHTTP = true
		case "mcp":
			c.plainMCP = true
		default:
			return fmt.Errorf("--plaintext-listeners: %q is not http or mcp (the gRPC listener has no opt-out)", l)
		}
	}
	if (c.plainHTTP || c.plainMCP) && c.TLSCert == "" {
		return errors.New("--plaintext-listeners needs --tls-cert and --tls-key (without them every listener is plain text)")
	}
	if c.MaxSessionsPerClient < 1 || c.MaxInFlight < 0 || c.MaxQueue < 0 || c.MaxWaitingTime < 0 || c.MinDeadline < 0 || c.MaxIndexBytes < 1 || c.IdleTimeout <= 0 {
		return errors.New("--max-sessions-per-client, --max-index-bytes and --idle-timeout must be positive; --max-inflight, --max-waiting, --max-waiting-time and --min-deadline not negative")
	}
	if c.MaxWatches < 1 || c.MaxWatchesPerClient < 1 || c.MaxWatchesPerSession < 1 {
		return errors.New("--max-watches, --max-watches-per-client and --max-watches-per-session must be positive")
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 2 * concurrency
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 64 * concurrency
	}
	return nil
}

// ops is what OpsConfig opens: the metrics registry, tokens, TLS, and the
// reloaders SIGHUP runs (security's).
type ops struct {
	*security.Security
	cfg       OpsConfig
	log       *slog.Logger
	reg       *prometheus.Registry
	metrics   *server.Metrics
	admission *server.Admission
}

func openOps(cfg OpsConfig, log *slog.Logger) (*ops, error) {
	sec, err := security.Open(cfg.SecurityConfig)
	if err != nil {
		return nil, err
	}
	o := &ops{Security: sec, cfg: cfg, log: log, reg: listeners.NewRegistry()}
	if o.metrics, err = server.NewMetrics(o.reg); err != nil {
		return nil, err
	}
	o.admission = server.NewAdmission(server.AdmissionConfig{MaxInFlight: cfg.MaxInFlight, MaxQueue: cfg.MaxQueue,
		MaxWait: cfg.MaxWaitingTime, StandingAfter: server.DefaultAdmissionStandingAfter, IdleAfter: server.DefaultAdmissionIdleAfter,
		MinDeadline: cfg.MinDeadline})
	if err := o.metrics.Gauge("classifierd_admission_queue_depth", "Model calls waiting for a place.",
		func() float64 { return float64(o.admission.Queued()) }); err != nil {
		return nil, err
	}
	if err := o.metrics.Gauge("classifierd_admission_in_flight", "Model calls admitted and running.",
		func() float64 { return float64(o.admission.InFlight()) }); err != nil {
		return nil, err
	}
	if err := o.metrics.Gauge("classifierd_admission_overloaded", "1 while the admission holds waiting calls to --max-waiting-time (a standing queue), else 0.",
		func() float64 { return b2f(o.admission.Overloaded()) }); err != nil {
		return nil, err
	}
	if err := o.metrics.Gauge("classifierd_admission_expected_wait_seconds", "How long a model call that found every place taken would wait now, estimated.",
		func() float64 { return o.admission.ExpectedWait().Seconds() }); err != nil {
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

// logTLS says at start which listeners serve TLS and which plain text.
func (o *ops) logTLS(log *slog.Logger, cfg Config, httpTLS, mcpTLS *tls.Config) {
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
	add("grpc", !cfg.MCPStdio, o.TLS != nil)
	add("http", cfg.HTTPListen != "" && !cfg.MCPStdio, httpTLS != nil)
	add("mcp", cfg.MCPListen != "", mcpTLS != nil)
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

// watches is the count of WatchExposure streams (--max-watches...),
// exported as classifierd_exposure_watches.
func (o *ops) watches() (*session.Watches, error) {
	w := session.NewWatches(o.cfg.MaxWatches, o.cfg.MaxWatchesPerClient, o.cfg.MaxWatchesPerSession)
	err := o.metrics.Gauge("classifierd_exposure_watches", "WatchExposure streams open.", func() float64 {
		n, _, _ := w.Count("", "")
		return float64(n)
	})
	return w, err
}

// sessionOwnerLimit is the per-caller session quota for session.Config.
func (o *ops) sessionOwnerLimit() int { return o.cfg.MaxSessionsPerClient }

// embedder wraps the model so its calls are measured.
func (o *ops) embedder(e server.Embedder) server.Embedder { return o.metrics.Embedder(e) }

// IndexLoaded records the index in use for the metrics.
func (o *ops) IndexLoaded(idx *index.Index, path string, generation uint64) {
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	o.metrics.SetIndex(idx, size, generation)
}

// watchSessions exports the number of sessions held.
func (o *ops) watchSessions(st interface {
	Len(context.Context) (int, error)
}) error {
	return o.metrics.Gauge("classifierd_sessions_active", "Hub sessions held.", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err := st.Len(ctx)
		if err != nil {
			return math.NaN() // the shared store is unreachable: no figure, not a false zero
		}
		return float64(n)
	})
}

// serverOptions are the gRPC server's transport credentials, codec and
// interceptors.
func (o *ops) serverOptions(log *slog.Logger, st *server.Stats, timeout time.Duration) []grpc.ServerOption {
	edge := server.Edge{Log: log, Stats: st, Timeout: timeout, Metrics: o.metrics, Admission: o.admission,
		Auth: server.AuthConfig{Tokens: o.Tokens, ClientCerts: o.ClientCerts()}}
	opts := edge.ServerOptions()
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	return opts
}

// httpGuard is the guard of --http-listen (rpcGuard) counting the callers
// it refuses in classifierd_auth_denied_total, as the gRPC edge counts
// its own, under the method the path names when served is serving it,
// else "unknown" (a client cannot mint label values).
func (o *ops) httpGuard(maxBody int64, served map[string]grpc.ServiceInfo) httpguard.Guard {
	g := o.RPCGuard(maxBody)
	refuse := g.Refuse
	g.Refuse = func(w http.ResponseWriter, r *http.Request, code int, err error) {
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			o.metrics.Denied(servedMethod(r.URL.Path, served), status.Code(err))
		}
		refuse(w, r, code, err)
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

// serveMetrics serves /metrics until ctx ends; the returned func waits
// for it to stop.
func (o *ops) serveMetrics(ctx context.Context) (func(), error) {
	return listeners.ServeMetrics(ctx, o.cfg.MetricsListen, o.reg, o.log)
}
