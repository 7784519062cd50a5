package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/proxyrun"
)

func parseProxyFlags(args []string, stderr io.Writer) (ProxyConfig, error) {
	var c ProxyConfig
	fs := flag.NewFlagSet("classifierd proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.MCPConfig, "config", "", "MCP client configuration of the real servers (mcpServers, as Claude Desktop; or VS Code's servers) (required)")
	fs.StringVar(&c.Model, "model", "", "model directory with model.onnx and tokenizer.json (required)")
	fs.StringVar(&c.Manifest, "manifest", "", "model manifest (default: DIR/manifest.json, else a known manifest)")
	fs.StringVar(&c.ORTLib, "ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library (default: $ORT_LIB, else where make put it)")
	fs.IntVar(&c.Threads, "threads", 1, "ONNX Runtime intra-op threads per inference")
	fs.IntVar(&c.Concurrency, "concurrency", 2, "concurrent inferences")
	fs.StringVar(&c.MCPListen, "mcp-listen", "", "serve agents over streamable HTTP at HOST:PORT (path /mcp) instead of stdio")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "serve Prometheus metrics on HOST:PORT/metrics in plain HTTP, with or without --mcp-listen: sessions, sessions refused, forwarded tool calls by server (off when empty; bind it to an address only your scraper reaches)")
	fs.DurationVar(&c.Timeout, "timeout", 60*time.Second, "deadline of one tool call, forwarded ones included")
	fs.DurationVar(&c.Connect, "connect-timeout", 10*time.Second, "bound on connecting to one server and listing its tools")
	fs.DurationVar(&c.Wait, "startup-wait", 30*time.Second, "how long to wait at start for every server's first tools/list and index before serving (servers indexed later are searchable once indexed)")
	fs.DurationVar(&c.SessionTTL, "session-ttl", 30*time.Minute, "idle time after which an agent session's exposure is forgotten and, over --mcp-listen, the session ends (its place given back)")
	fs.IntVar(&c.MaxSessions, "max-sessions", 1000, "most concurrent agent sessions; more get HTTP 503 RESOURCE_EXHAUSTED")
	fs.IntVar(&c.MaxSessionsPerClient, "max-sessions-per-client", defaultProxySessionsPerClient,
		"most agent sessions one caller (a token's name or a client certificate; anonymous callers by address) may hold at once; more get HTTP 429 RESOURCE_EXHAUSTED. "+
			"At most --max-sessions; if unset, the smaller of 100 and --max-sessions: a tenth of the default --max-sessions, as the daemon's 1000 of 10000, so one caller cannot lock the others out")
	fs.IntVar(&c.MaxBackends, "max-backends", defaultMaxBackends, "most backends of per-identity servers at once, in all (a stdio server's backend is a process); when all run, an idle backend of the identity holding the most gives way to an identity holding at least two fewer, else a call that would start one more gets RESOURCE_EXHAUSTED")
	fs.IntVar(&c.MaxBackendsPerClient, "max-backends-per-client", 0, "most backends of per-identity servers one caller may have at once (default: one of each per-identity server)")
	fs.DurationVar(&c.BackendIdle, "backend-idle-timeout", 10*time.Minute, "stop a per-identity backend no call has used for this long (what it kept in memory goes with it); the caller's next call starts another")
	fs.Float64Var(&c.MCPRequestsPerSecond, "mcp-requests-per-second", httpguard.DefaultMCPRequestsPerSecond, "most MCP requests (POSTs: requests, notifications, a batch's messages each; GETs and DELETEs, one each) one caller (identity, or peer host when anonymous) may make a second on --mcp-listen, after --mcp-request-burst; past it a request gets 429 and a JSON-RPC error RESOURCE_EXHAUSTED (-32029) under its id before its body is read or decoded, and on HTTP/1.1 its connection is closed (0: no bound). An agent makes a few a second")
	fs.IntVar(&c.MCPRequestBurst, "mcp-request-burst", httpguard.DefaultMCPRequestBurst, "MCP requests one caller may make at once before --mcp-requests-per-second holds it back (an agent's start, a hub opening sessions)")
	fs.IntVar(&c.MaxConnsPerPeer, "max-conns-per-peer", listeners.DefaultMaxConnsPerPeer, "most connections one peer (an IPv4 address, an IPv6 /64) may hold open on --mcp-listen and --metrics-listen together; past it a new one is closed as soon as accepted (0: no per-peer cap). On loopback every local client is one peer")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most connections open on --mcp-listen and --metrics-listen together; past it a new one is closed as soon as accepted (0: the descriptor limit, RLIMIT_NOFILE, less an eighth of it and at least 256 kept for the proxy's own files and backends)")
	fs.StringVar(&c.Exposure, "default-exposure", "meta-only", "what a new session sees beside the meta tools: meta-only (nothing else) or all")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.Int64Var(&c.MemoryLimit, "memory-limit", 0, "most bytes of memory the Go heap should keep to: the collector works harder near it (GOMEMLIMIT; the environment variable wins). 0: 90% of the container's memory limit (cgroup), none without one; -1: no limit")
	fs.StringVar(&c.Security.TLSCert, "tls-cert", "", "serve --mcp-listen over TLS with this PEM certificate chain (with --tls-key); reloaded on SIGHUP")
	fs.StringVar(&c.Security.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.Security.TLSClientCA, "tls-client-ca", "", "require client certificates signed by this PEM CA bundle (mTLS) on --mcp-listen; without --auth-token-file the subject CN is the caller, with every scope")
	fs.StringVar(&c.Security.TokenFile, "auth-token-file", "", "require a bearer token from this file on every --mcp-listen request (lines: NAME SCOPES TOKEN; mode 0600): scope route for search_tools and hub__analyze_prompt, call for call_tool and the servers' tools; reloaded on SIGHUP")
	fs.BoolVar(&c.InsecureListen, "insecure-listen", false, "let --mcp-listen serve a non-loopback address without --auth-token-file or --tls-client-ca, so anyone who reaches it may call every tool of the servers (only in a container whose port is published on loopback, or behind a proxy that authenticates)")
	addLearnFlags(fs, &c.Learn)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: classifierd proxy --config mcp.json --model DIR [--mcp-listen HOST:PORT [--auth-token-file FILE] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]] [--metrics-listen HOST:PORT]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("--log-level: %w", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["max-sessions-per-client"] {
		c.MaxSessionsPerClient = min(c.MaxSessionsPerClient, c.MaxSessions)
	} else if c.MaxSessionsPerClient > c.MaxSessions {
		return c, fmt.Errorf("--max-sessions-per-client %d is more than --max-sessions %d", c.MaxSessionsPerClient, c.MaxSessions)
	}
	switch {
	case c.MCPConfig == "":
		return c, errors.New("--config is required")
	case c.Model == "":
		return c, errors.New("--model is required")
	case c.Threads < 1 || c.Concurrency < 1:
		return c, errors.New("--threads and --concurrency must be at least 1")
	case c.Timeout <= 0 || c.Connect <= 0 || c.Wait <= 0 || c.SessionTTL <= 0 || c.MaxSessions < 1 || c.MaxSessionsPerClient < 1:
		return c, errors.New("durations, --max-sessions and --max-sessions-per-client must be positive")
	case c.MCPRequestsPerSecond < 0 || c.MCPRequestBurst < 0 || c.MCPRequestsPerSecond > 0 && c.MCPRequestBurst < 1:
		return c, errors.New("--mcp-requests-per-second must not be negative (0: no bound), and --mcp-request-burst must be positive with it")
	case c.MaxConnsPerPeer < 0 || c.MaxConns < 0:
		return c, errors.New("--max-conns-per-peer and --max-conns must not be negative")
	case c.MaxBackends < 1 || c.MaxBackendsPerClient < 0 || c.BackendIdle <= 0:
		return c, errors.New("--max-backends and --backend-idle-timeout must be positive, --max-backends-per-client not negative")
	case c.Exposure != "meta-only" && c.Exposure != "all":
		return c, fmt.Errorf("--default-exposure %q is not meta-only or all", c.Exposure)
	case c.LogFormat != "text" && c.LogFormat != "json":
		return c, fmt.Errorf("--log-format %q is not text or json", c.LogFormat)
	}
	if err := c.Learn.Validate(); err != nil {
		return c, err
	}
	return c, c.ValidateListen()
}

// defaultProxySessionsPerClient is --max-sessions-per-client's default: a
// tenth of --max-sessions' default, as the daemon's 1000 of 10000.
const defaultProxySessionsPerClient = 100

// defaultMaxBackends is --max-backends' default. Per-identity is the
// default with authentication, so the bound must let a small team (ten
// identities using six servers) work without refusals; a stdio backend is
// a process (the memory server's, under Node.js, 68 MB RSS), so at the
// limit 64 of them hold about 4.4 GB. An identity has at most one backend
// per server, and idle ones stop after --backend-idle-timeout.
const defaultMaxBackends = 64

// ProxyConfig is what classifierd proxy is started with (package
// proxyrun).
type ProxyConfig = proxyrun.Config

// proxyMain runs classifierd proxy and returns the exit code.
func proxyMain(args []string) int {
	cfg, err := parseProxyFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "classifierd proxy:", err)
		return 2
	}
	log := newLogger(cfg.LogFormat, cfg.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := proxyrun.Run(ctx, cfg, version, log); err != nil {
		log.Error("classifierd proxy stopped", "err", err)
		fmt.Fprintln(os.Stderr, "classifierd proxy:", err)
		return 1
	}
	return 0
}
