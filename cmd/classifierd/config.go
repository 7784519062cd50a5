package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/internal/reload"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/internal/state"
	"github.com/classifierd/classifierd/internal/telemetry"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/terminal"
)

// SecurityConfig is --tls-cert, --tls-key, --tls-client-ca and
// --auth-token-file (package security).
type SecurityConfig = security.Config

// OTelConfig is --otel-* (package telemetry).
type OTelConfig = telemetry.Config

// addOTelFlags registers --otel-* into c.
func addOTelFlags(fs *flag.FlagSet, c *OTelConfig) {
	fs.StringVar(&c.Endpoint, "otel-endpoint", "", "send OpenTelemetry traces over OTLP/gRPC to this collector HOST:PORT (off when empty: no exporter, no network)")
	fs.BoolVar(&c.Insecure, "otel-insecure", false, "with --otel-endpoint: plain gRPC to the collector (default: TLS, system roots)")
	fs.Float64Var(&c.SampleRatio, "otel-sample-ratio", 1, "with --otel-endpoint: share of new traces recorded, 0 to 1; a call that carries a traceparent follows its caller's decision")
	fs.StringVar(&c.ServiceName, "otel-service-name", "classifierd", "with --otel-endpoint: service.name of the spans")
}

// ReloadConfig is how the daemon follows changes of what it serves
// (package reload).
type ReloadConfig = reload.Config

// registerReloadFlags registers the flags of what the daemon follows.
func registerReloadFlags(fs *flag.FlagSet, c *ReloadConfig) {
	fs.StringVar(&c.MCPConfig, "mcp-config", "", `MCP client config ({"mcpServers": ...} or VS Code's {"servers": ...}): index the servers' live tools and follow their changes (--index then optional)`)
	fs.StringVar(&c.Catalog, "catalog", "", "with --mcp-config: catalog whose categories, descriptions and examples are merged with the live tools")
	fs.DurationVar(&c.Interval, "reload-interval", 2*time.Second, "check the --index file (with --mcp-config: the MCP config and the --catalog file) for changes this often; 0: only on SIGHUP")
	fs.DurationVar(&c.MCPTimeout, "mcp-timeout", 10*time.Second, "with --mcp-config: bound on connecting to a server and on each tools/list")
	fs.DurationVar(&c.MCPRefresh, "mcp-refresh", 0, "with --mcp-config: also list every server's tools this often (for servers that send no list_changed); 0: off")
	fs.DurationVar(&c.Debounce, "mcp-debounce", 100*time.Millisecond, "with --mcp-config: wait this long after a change for others before rebuilding")
}

// Config is everything the daemon is started with.
type Config struct {
	Index        string
	Model        string
	Manifest     string
	Listen       string
	HTTPListen   string
	MCPListen    string
	MCPStdio     bool
	MCPServers   string
	ORTLib       string
	Threads      int
	Concurrency  int
	MaxQueue     int
	BatchSize    int
	BatchWindow  time.Duration
	MaxQueueWait time.Duration
	MaxTextBytes int
	MaxBatch     int
	MaxMessages  int
	Shortlist    int // --shortlist-from
	MaxRecvBytes int
	Timeout      time.Duration
	ShutdownWait time.Duration
	NoMatch      string
	SessionTTL   time.Duration
	MaxSessions  int
	State        string // --state: "" (memory) or a Redis URL; may hold a password, never logged
	Exposure     string
	Minimal      string
	Terminal     bool
	TermLogs     string
	TermDB       string
	TermStore    terminal.StoreConfig
	LogFormat    string
	LogLevel     slog.Level
	Reload       ReloadConfig
	Learn        LearnConfig // learning from use (package learning)
	Ops          OpsConfig   // metrics, TLS, auth, admission, file limits (ops.go)
	OTel         OTelConfig  // OpenTelemetry tracing (otel.go)

	// InsecureMCPListen lets --mcp-listen offer call_tool beyond loopback
	// with no caller identified (--insecure-mcp-listen).
	InsecureMCPListen bool
}

// recvOverhead is room in a gRPC message for a request's other fields
// beside its longest text.
const recvOverhead = 64 << 10

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	switch {
	case c.Model == "":
		return errors.New("--model is required")
	case c.Listen == "":
		return errors.New("--listen is required")
	case c.HTTPListen != "" && (c.HTTPListen == c.Listen || c.HTTPListen == c.MCPListen):
		return errors.New("--http-listen must differ from --listen and --mcp-listen")
	case c.Threads < 1 || c.Concurrency < 1:
		return errors.New("--threads and --concurrency must be at least 1")
	case c.MaxQueue < 1 || c.BatchSize < 1 || c.BatchWindow < 0 || c.MaxQueueWait < 0:
		return errors.New("--max-queue and --batch-size must be at least 1, --batch-window and --max-queue-wait 0 or more")
	case c.MaxTextBytes < 1 || c.MaxBatch < 1 || c.MaxMessages < 1 || c.MaxRecvBytes < 1024:
		return errors.New("limits must be positive (--max-recv-bytes at least 1024)")
	case c.Shortlist < 0:
		return errors.New("--shortlist-from must be 0 (never) or more")
	case c.MaxRecvBytes < c.MaxTextBytes+recvOverhead:
		return fmt.Errorf("--max-recv-bytes %d cannot carry one text of --max-text-bytes %d (need %d more for the rest of a request)", c.MaxRecvBytes, c.MaxTextBytes, recvOverhead)
	case c.Timeout <= 0 || c.ShutdownWait <= 0:
		return errors.New("--timeout and --shutdown-wait must be positive")
	}
	if err := c.Reload.Validate(c.Index); err != nil {
		return err
	}
	if err := c.Learn.Validate(); err != nil {
		return err
	}
	switch c.NoMatch {
	case "none", "meta", "all":
	default:
		return fmt.Errorf("--on-no-match %q is not none, meta or all", c.NoMatch)
	}
	switch c.Exposure {
	case "zero", "meta-only", "minimal", "all":
	default:
		return fmt.Errorf("--default-exposure %q is not zero, meta-only, minimal or all", c.Exposure)
	}
	if c.Terminal && (c.TermLogs == "" || c.TermDB == "") {
		return errors.New("--terminal-logs and --terminal-db must not be empty")
	}
	if c.TermStore.MaxAge <= 0 || c.TermStore.MaxPerSession < 1 || c.TermStore.MaxEvents < 1 {
		return errors.New("--terminal-retention, --terminal-max-session-events and --terminal-max-events must be positive")
	}
	if c.TermStore.MaxPerOwner < 0 {
		return errors.New("--terminal-max-events-per-identity must not be negative")
	}
	if c.State != "" {
		if _, err := state.Options(c.State); err != nil {
			return err
		}
	}
	if c.SessionTTL <= 0 || c.MaxSessions < 1 {
		return errors.New("--session-ttl and --max-sessions must be positive")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("--log-format %q is not text or json", c.LogFormat)
	}
	if err := c.OTel.Validate(); err != nil {
		return err
	}
	if err := c.Ops.Validate(c.Concurrency); err != nil {
		return err
	}
	return c.checkOpenMCP()
}

// checkOpenMCP refuses what classifierd proxy refuses: an MCP listener
// beyond loopback that offers call_tool and identifies no caller, so
// anyone who reaches it could call every tool of the servers, unless
// --insecure-mcp-listen says otherwise.
func (c *Config) checkOpenMCP() error {
	if c.MCPListen == "" || !c.offersCallTool() {
		return nil
	}
	return security.CheckOpenListen(c.MCPListen, c.Ops.Config, "--insecure-mcp-listen", c.InsecureMCPListen)
}

// offersCallTool reports whether the MCP server has call_tool: servers to
// call, from --mcp-servers or the live ones of --mcp-config.
func (c *Config) offersCallTool() bool { return c.MCPServers != "" || c.Reload.MCPConfig != "" }

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("classifierd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Index, "index", "", "index file built by gen-index (required unless --mcp-config); reloaded on SIGHUP and when it changes")
	fs.StringVar(&c.Model, "model", "", "model directory with model.onnx and tokenizer.json (required)")
	fs.StringVar(&c.Manifest, "manifest", "", "model manifest (default: DIR/manifest.json, else a known manifest)")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:50051", "gRPC listen address HOST:PORT")
	fs.StringVar(&c.HTTPListen, "http-listen", "", "HTTP/JSON listen address HOST:PORT: Connect JSON, the hub REST shape and the explain page at / (docs/http.md); empty: off")
	fs.StringVar(&c.MCPListen, "mcp-listen", "", "also serve MCP over streamable HTTP at HOST:PORT (path /mcp); empty: no MCP over HTTP")
	fs.BoolVar(&c.InsecureMCPListen, "insecure-mcp-listen", false, "let --mcp-listen offer call_tool (--mcp-servers or --mcp-config) on a non-loopback address without --auth-token-file or --tls-client-ca, so anyone who reaches it may call every tool of the servers (only behind a proxy that authenticates, or a container port published on loopback)")
	fs.StringVar(&c.MCPServers, "mcp-servers", "", "with MCP: an MCP client configuration (mcpServers) of the catalog's servers; adds call_tool, which calls any catalog tool on its server and with --auth-token-file needs scope call (default with --mcp-config: its live servers)")
	fs.StringVar(&c.ORTLib, "ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library (default: $ORT_LIB, else where make put it)")
	fs.IntVar(&c.Threads, "threads", 1, "ONNX Runtime intra-op threads per inference")
	fs.IntVar(&c.Concurrency, "concurrency", 2, "concurrent inferences")
	fs.IntVar(&c.MaxQueue, "max-queue", 1024, "most texts waiting for the model; a call that would take the queue past it gets RESOURCE_EXHAUSTED at once")
	fs.DurationVar(&c.MaxQueueWait, "max-queue-wait", 0, "also RESOURCE_EXHAUSTED when the texts already waiting would keep a call's texts from the model longer than this, from the recent time per text (0: off; e.g. 25ms behind a balancer with replicas to retry on)")
	fs.IntVar(&c.BatchSize, "batch-size", 32, "most texts of concurrent calls in one model run (a batch-dependent model, such as the default int8 one, always runs texts alone)")
	fs.DurationVar(&c.BatchWindow, "batch-window", time.Millisecond, "how long a model run that is not full waits for texts of other calls")
	fs.IntVar(&c.MaxTextBytes, "max-text-bytes", request.DefaultMaxTextBytes, "longest accepted text, prompt or message, in bytes")
	fs.IntVar(&c.MaxBatch, "max-batch", 64, "most texts in one Embed call")
	fs.IntVar(&c.MaxMessages, "max-messages", 64, "most messages in one Route call")
	fs.IntVar(&c.Shortlist, "shortlist-from", rank.DefaultShortlistFrom, "server and tool vectors from which a request is scored against a shortlist of labels (nearest inverted-file cells, lexical and BM25 hits) instead of every label; 0: always score every label (docs/scale.md)")
	fs.IntVar(&c.MaxRecvBytes, "max-recv-bytes", 4<<20, "largest accepted gRPC message, in bytes")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Second, "deadline applied to calls that carry none")
	fs.DurationVar(&c.ShutdownWait, "shutdown-wait", 10*time.Second, "how long graceful shutdown waits before closing connections")
	fs.StringVar(&c.NoMatch, "on-no-match", "none", "Route policy when nothing fits and the request does not say: none, meta or all")
	fs.DurationVar(&c.SessionTTL, "session-ttl", 30*time.Minute, "idle time after which a hub session expires, and an MCP session of --mcp-listen ends")
	fs.IntVar(&c.MaxSessions, "max-sessions", 10000, "most concurrent hub sessions (RESOURCE_EXHAUSTED past it); with --mcp-listen, also the most MCP sessions there, counted apart (HTTP 503 past it)")
	fs.StringVar(&c.State, "state", "", state.Usage)
	fs.StringVar(&c.Exposure, "default-exposure", "meta-only", "what a new session sees: zero, meta-only, minimal or all")
	fs.StringVar(&c.Minimal, "minimal-categories", "meta", "comma-separated categories of the minimal exposure")
	fs.BoolVar(&c.Terminal, "terminal", false, "serve terminal.v1.TerminalService (prompt detection over terminal logs); off, its RPCs answer UNIMPLEMENTED")
	fs.StringVar(&c.TermLogs, "terminal-logs", "var/terminal", "with --terminal: directory of terminal session logs (<session_id>.log; with tokens or client certificates <identity>/<session_id>.log) for DetectInputPrompt")
	fs.StringVar(&c.TermDB, "terminal-db", "var/terminal.db", "with --terminal: SQLite file for terminal input events and learned patterns (0600; a missing directory is created 0700); unused with --state redis://..., which keeps them in Redis")
	fs.DurationVar(&c.TermStore.MaxAge, "terminal-retention", terminal.DefaultMaxAge, "with --terminal: delete input events older than this")
	fs.IntVar(&c.TermStore.MaxPerSession, "terminal-max-session-events", terminal.DefaultMaxPerSession, "with --terminal: keep at most this many input events per terminal session (newest)")
	fs.IntVar(&c.TermStore.MaxEvents, "terminal-max-events", terminal.DefaultMaxEvents, "with --terminal: keep at most this many input events overall; past it the identity holding the most gives up its oldest; bounds the database at about 9 KiB per event")
	fs.IntVar(&c.TermStore.MaxPerOwner, "terminal-max-events-per-identity", 0, "with --terminal and tokens or client certificates: one identity's sessions keep at most this many events together (newest), so that one identity cannot push out the others' (0: a tenth of --terminal-max-events)")
	fs.BoolVar(&c.TermStore.ShareLearned, "terminal-share-learned", false, "with --terminal: suggest answers learned in one terminal session to every session of the same identity (a token or certificate; without either, every session) (off: a session is suggested only what it taught)")
	fs.StringVar(&c.TermStore.KeyFile, "terminal-key", "", "with --terminal: file holding the key of the hashes kept of secret answers (32 random bytes, made 0600 if missing; default --terminal-db with .key appended, also with --state redis://..., so the key stays on this host)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	addLearnFlags(fs, &c.Learn)
	addOpsFlags(fs, &c.Ops)
	addOTelFlags(fs, &c.OTel)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	registerReloadFlags(fs, &c.Reload)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: classifierd (--index FILE | --mcp-config FILE [--catalog FILE]) --model DIR --listen HOST:PORT [--ort-lib PATH]\n\nFlags:\n")
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
	return c, c.Validate()
}

// domain is the configuration of the classifier, router and analyzer.
func (c Config) domain() server.DomainConfig {
	from := c.Shortlist
	if from == 0 {
		from = -1 // the flag's 0 is "never"
	}
	return server.DomainConfig{Limits: request.Limits{MaxTextBytes: c.MaxTextBytes, MaxMessages: c.MaxMessages}, ShortlistFrom: from}
}
