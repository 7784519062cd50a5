package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/mcpplaces"
	"github.com/classifierd/classifierd/internal/ops"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/internal/reload"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/internal/telemetry"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
)

// version is reported to MCP clients as the server's version.
const version = "0.1.0"

// mcpEdge is what the daemon's MCP servers take from the rest of the
// daemon, opened by run from the flags (values, none of them a flag).
type mcpEdge struct {
	// sec says who makes a tool call and gates --mcp-listen (nil: every
	// caller anonymous, only the client-certificate header set, as in
	// tests that build the handler alone).
	sec *security.Security
	// metrics exports the live MCP sessions of --mcp-listen and counts
	// the refused ones (nil: not exported).
	metrics *server.Metrics
	// tracer traces MCP calls as the gRPC server traces its calls (nil:
	// off).
	tracer *telemetry.Tracer
	// tls is --mcp-listen's (nil: plain text).
	tls *tls.Config
	// admission admits MCP tool calls that run the model under the gRPC
	// calls' admission (nil: none, as in tests that build the MCP server
	// alone).
	admission *server.Admission
	// conns counts --mcp-listen's connections with the daemon's other
	// listeners' (nil: no caps).
	conns *listeners.Limiter
	// resets counts --mcp-listen's requests abandoned before their answer
	// with the daemon's other listeners' (nil: not counted).
	resets *rapidreset.Peers
}

// newMCPServer is the daemon's MCP server: the classifier tools over the
// same server.Server the gRPC API uses, and the terminal tools when
// --terminal is on.
func newMCPServer(cfg Config, edge mcpEdge, svc *server.Server, term *server.TerminalServer, idx *index.Index, calls mcpserver.Caller, log *slog.Logger) (*mcp.Server, error) {
	// The served index is read per call: hot reloads and live MCP tools
	// swap it under the daemon (server.Server.Swap).
	backend := func() mcpserver.Backend { return mcpserver.Backend{Classifier: svc, Index: svc.Index()} }
	var caller func(string, http.Header) (server.Caller, error) // nil: anonymous
	var identify func(http.Header) (server.Caller, error)
	if edge.sec != nil {
		caller, identify = edge.sec.MCPCaller, edge.sec.MCPIdentity
	}
	s, err := mcpserver.New(mcpserver.Config{Backend: backend, Terminal: term, Timeout: cfg.Timeout, Version: version, Logger: log,
		Caller: caller, Identify: identify, Admit: ops.MCPAdmit(edge.admission)})
	if err != nil {
		return nil, err
	}
	if calls != nil {
		mcpserver.AddCallTool(s, backend, calls)
	}
	if edge.tracer != nil {
		s.AddReceivingMiddleware(edge.tracer.MCPMiddleware())
	}
	return s, nil
}

// openCaller connects to the servers of --mcp-servers. Without it, the
// servers of --mcp-config, whose live tools the daemon serves, are the ones
// call_tool reaches (live, nil without either).
func openCaller(cfg Config, live mcpserver.Caller, log *slog.Logger) (mcpserver.Caller, func(), error) {
	if cfg.MCPServers == "" {
		return live, func() {}, nil
	}
	mc, err := mcpsrc.LoadConfig(cfg.MCPServers)
	if err != nil {
		return nil, nil, err
	}
	if err := reload.SharedOnly(mc, "--mcp-servers", cfg.Ops.Identifies()); err != nil {
		return nil, nil, err
	}
	pool := mcpsrc.Open(mc, mcpsrc.Options{Stderr: os.Stderr, ClientName: "classifierd", ClientVersion: version})
	log.Info("call_tool forwards to the configured MCP servers", "servers", len(mc.Servers))
	return pool, func() { _ = pool.Close() }, nil
}

// serveMCPStdio serves MCP on stdin/stdout (classifierd mcp) until the
// client closes stdin or ctx ends; with --mcp-listen it serves HTTP too.
// The log stays on stderr: stdout carries only MCP messages.
func serveMCPStdio(ctx context.Context, cfg Config, edge mcpEdge, svc *server.Server, term *server.TerminalServer, idx *index.Index, live mcpserver.Caller, log *slog.Logger) error {
	caller, closeCaller, err := openCaller(cfg, live, log)
	if err != nil {
		return err
	}
	defer closeCaller()
	s, err := newMCPServer(cfg, edge, svc, term, idx, caller, log)
	if err != nil {
		return err
	}
	stop, err := startMCPHTTPWith(cfg, edge, svc, term, idx, caller, log)
	if err != nil {
		return err
	}
	defer stop()
	log.Info("classifierd serving MCP on stdio", "tools", len(idx.LabelsOf(index.KindTool)), "terminal", term != nil)
	// A message over --max-recv-bytes, or one that is not JSON-RPC, is
	// answered with an error before any work, and the next one is read.
	err = s.Run(ctx, mcpserver.StdioTransport(os.Stdin, os.Stdout, cfg.MaxRecvBytes, log))
	if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil // a signal, or the client went away: a normal end
	}
	return err
}

// startMCPHTTP serves MCP over streamable HTTP at cfg.MCPListen (if set)
// and returns the function that shuts it down within cfg.ShutdownWait.
func startMCPHTTP(cfg Config, edge mcpEdge, svc *server.Server, term *server.TerminalServer, idx *index.Index, live mcpserver.Caller, log *slog.Logger) (stop func(), err error) {
	if cfg.MCPListen == "" {
		return func() {}, nil
	}
	caller, closeCaller, err := openCaller(cfg, live, log)
	if err != nil {
		return nil, err
	}
	stopHTTP, err := startMCPHTTPWith(cfg, edge, svc, term, idx, caller, log)
	if err != nil {
		closeCaller()
		return nil, err
	}
	return func() { stopHTTP(); closeCaller() }, nil
}

func startMCPHTTPWith(cfg Config, edge mcpEdge, svc *server.Server, term *server.TerminalServer, idx *index.Index, caller mcpserver.Caller, log *slog.Logger) (stop func(), err error) {
	if cfg.MCPListen == "" {
		return func() {}, nil
	}
	s, err := newMCPServer(cfg, edge, svc, term, idx, caller, log)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.MCPListen)
	if err != nil {
		return nil, fmt.Errorf("mcp listen: %w", err)
	}
	lis = edge.conns.Wrap("mcp", lis)
	// The MCP sessions of --mcp-listen: the same limits as hub sessions,
	// with a count of their own (mcpplaces).
	var refused mcpplaces.Refusals
	var displaced func()
	if edge.metrics != nil {
		refused, displaced = edge.metrics, edge.metrics.MCPSessionDisplaced
	}
	places := mcpplaces.New(cfg.MaxSessions, cfg.Ops.MaxSessionsPerClient, displaced)
	if edge.metrics != nil {
		live := func() float64 { n, _ := places.Count(""); return float64(n) }
		if err := edge.metrics.Gauge("classifierd_mcp_sessions", "MCP sessions held on --mcp-listen.", live); err != nil {
			log.Warn("metrics: MCP sessions not exported", "err", err)
		}
	}
	limit := places.Limit(s, cfg.MaxSessions, cfg.Ops.MaxSessionsPerClient, refused, log)
	h := listeners.MCPHandler(func(*http.Request) *mcp.Server { return s }, cfg.MaxRecvBytes, cfg.SessionTTL, log, limit)
	if edge.sec != nil {
		// Any scope of a daemon MCP tool opens a session; each tool call
		// then checks its own (security.DaemonToolScope).
		h = edge.sec.MCPGate(h, int64(cfg.MaxRecvBytes), auth.ScopeRoute, auth.ScopeTerminal, auth.ScopeCall)
	} else {
		h = security.ClientCertHeader(httpguard.PlainMCP(int64(cfg.MaxRecvBytes)).Wrap(h))
	}
	return listeners.ServeMCP(lis, edge.tls, h, edge.resets, cfg.ShutdownWait, cfg.Ops.IdleTimeout, log), nil
}
