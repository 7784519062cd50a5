package main

import (
	"flag"
	"time"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/ops"
	"github.com/classifierd/classifierd/server"
)

// OpsConfig is the operational side of the daemon: metrics, TLS,
// authentication, admission and file limits (package ops,
// docs/operations.md).
type OpsConfig = ops.Config

// addOpsFlags registers the operational flags into c.
func addOpsFlags(fs *flag.FlagSet, c *OpsConfig) {
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
	fs.IntVar(&c.MaxQueue, "max-waiting", ops.DefaultMaxWaiting, "model calls that may wait for a place, all callers together; past it the caller holding the most waiting work gives up its newest call (RESOURCE_EXHAUSTED)")
	fs.Int64Var(&c.MaxWaitingBytes, "max-waiting-bytes", server.DefaultAdmissionMaxQueueBytes, "request bytes the waiting model calls may hold, all callers together (0: no bound but --max-waiting)")
	fs.DurationVar(&c.MaxWaitingTime, "max-waiting-time", server.DefaultAdmissionMaxWait, "for a model call without a deadline of its own: refuse it at once (RESOURCE_EXHAUSTED) when the work ahead of it would keep it from a place longer than this; applies once calls have waited without a break for 100ms, until the queue has been empty for 1s (before: a burst may queue up to 100ms of waiting) (0: --max-waiting only)")
	fs.Float64Var(&c.DeadlineShare, "deadline-share", server.DefaultAdmissionDeadlineShare, "a model call with a deadline waits only if its expected wait plus service fit in this share of the time it has left; else RESOURCE_EXHAUSTED at once, with a retry delay (0 < share <= 1)")
	fs.StringVar(&c.AdmissionWeights, "admission-weights", "", "weights of callers in the fair shares of the model when busy and of --all-body-bytes-per-second when past, NAME=WEIGHT,... by token name, cert:CN or anonymous (default 1 each)")
	fs.DurationVar(&c.MinDeadline, "min-deadline", 2*time.Millisecond, "refuse model calls with less than this left of their deadline (DEADLINE_EXCEEDED) before any work")
	fs.Int64Var(&c.MaxIndexBytes, "max-index-bytes", index.DefaultMaxFileBytes, "largest index file accepted, in bytes")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", listeners.DefaultIdleTimeout, "close a connection that has had no call in flight (gRPC) or no request (HTTP/JSON, MCP) for this long; its client reconnects when it next calls")
	fs.DurationVar(&c.RecvTimeout, "recv-timeout", server.DefaultRecvTimeout, "end a gRPC call (DEADLINE_EXCEEDED) whose request message has not arrived this long after its headers, freeing what of it had arrived")
	fs.DurationVar(&c.WriteStallTimeout, "write-stall-timeout", server.DefaultWriteStallTimeout, "close a gRPC connection whose client leaves its answers unread: one that owed answers this whole time and wrote under 16 KiB of them (an emulated write deadline; its calls end UNAVAILABLE on the client). A caller with 16 MiB of answers unread on all its connections gets RESOURCE_EXHAUSTED for new calls")
	fs.IntVar(&c.MaxStreams, "max-concurrent-streams", server.DefaultMaxConcurrentStreams, "most gRPC calls one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; a client queues the rest); what their requests hold while they arrive counts against --max-body-bytes-in-flight")
	fs.Int64Var(&c.BodyBudget, "max-body-bytes-in-flight", httpguard.DefaultBodyBudget, "most request bytes being received at once, one budget for --listen, --http-listen and --mcp-listen: an HTTP body is counted as read and until answered and gets 429 RESOURCE_EXHAUSTED before more is read past it (a body costs about ten times its size while its call runs); on --listen the calls still receiving on a connection over its fair share end CANCELLED when it is full")
	fs.Int64Var(&c.BodyBudgetPerClient, "max-body-bytes-in-flight-per-client", httpguard.DefaultBodyBudgetPerClient, "most of --max-body-bytes-in-flight one caller (identity, or peer host when anonymous; on --listen, one connection) may hold; while others hold bodies, the last quarter of the budget is kept for callers holding at most a sixteenth of it")
	fs.Float64Var(&c.MCPRequestsPerSecond, "mcp-requests-per-second", httpguard.DefaultMCPRequestsPerSecond, "most MCP requests (POSTs: requests, notifications, a batch's messages each; GETs and DELETEs, one each) one caller (identity, or peer host when anonymous) may make a second on --mcp-listen, after --mcp-request-burst; past it a request gets 429 and a JSON-RPC error RESOURCE_EXHAUSTED (-32029) under its id before its body is read or decoded, and on HTTP/1.1 its connection is closed (0: no bound). An agent makes a few a second")
	fs.IntVar(&c.MCPRequestBurst, "mcp-request-burst", httpguard.DefaultMCPRequestBurst, "MCP requests one caller may make at once before --mcp-requests-per-second holds it back (an agent's start, a hub opening sessions)")
	fs.Int64Var(&c.RefusedBodyBytesPerSecond, "refused-body-bytes-per-second", httpguard.DefaultRefusedBodyBytesPerSecond, "bytes of request bodies refused after they were read (400, 413, 415, 422: JSON that does not parse, too many values...) one caller (identity, or peer host when anonymous) may send a second on --http-listen, --mcp-listen and --listen together (gRPC: refused INVALID_ARGUMENT), after --refused-body-burst; past it its requests with a body get 429 with Retry-After before their bodies are read (gRPC: RESOURCE_EXHAUSTED at the headers); each value a body holds (a JSON value, a protobuf field) weighs 16 bytes more (0: no bound)")
	fs.Int64Var(&c.RefusedBodyBurst, "refused-body-burst", httpguard.DefaultRefusedBodyBurst, "bytes of refused request bodies one caller may send at once before --refused-body-bytes-per-second holds it back")
	fs.Int64Var(&c.BodyBytesPerSecond, "body-bytes-per-second", httpguard.DefaultBodyBytesPerSecond, "bytes of request bodies, whatever their answer, one caller (identity, or peer host when anonymous) may send a second on --http-listen, --mcp-listen and --listen together, after --body-burst; past it its requests with a body get 429 with Retry-After before their bodies are read (gRPC: RESOURCE_EXHAUSTED at the headers); each value a body holds (a JSON value, a protobuf field) weighs 16 bytes more (0: no bound)")
	fs.Int64Var(&c.AllBodyBytesPerSecond, "all-body-bytes-per-second", httpguard.DefaultAllBodyBytesPerSecond, "bytes of request bodies every caller together may send a second on --http-listen, --mcp-listen and --listen, after twice --body-burst; past it a caller that sent more than its fair share of it lately (the max-min share of the callers' recent rates) gets 429 with Retry-After before its body is read (gRPC: RESOURCE_EXHAUSTED at the headers), the others go on (0: no bound)")
	fs.Int64Var(&c.BodyBurst, "body-burst", httpguard.DefaultBodyBurst, "bytes of request bodies one caller may send at once before --body-bytes-per-second holds it back")
	fs.IntVar(&c.MaxConnsPerPeer, "max-conns-per-peer", listeners.DefaultMaxConnsPerPeer, "most connections one peer (an IPv4 address, an IPv6 /64) may hold open on all the listeners together (--listen, --http-listen, --mcp-listen, --metrics-listen); past it a new one is closed as soon as accepted (0: no per-peer cap). On loopback every local client is one peer")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most connections open on all the listeners together; past it a new one is closed as soon as accepted (0: the descriptor limit, RLIMIT_NOFILE, less an eighth of it and at least 256 kept for the daemon's own files)")
	fs.Int64Var(&c.MemoryLimit, "memory-limit", 0, "most bytes of memory the Go heap should keep to: the collector works harder near it (GOMEMLIMIT; the environment variable wins). 0: 90% of the container's memory limit (cgroup), none without one; -1: no limit")
	fs.BoolVar(&c.IndexMmap, "index-mmap", false, "score from a read-only mapping of the index file instead of a copy in memory (large indexes); only if the file is replaced by rename, as gen-index does: a mapped file rewritten in place (cp over it) kills the daemon")
}
