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
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
)

// version is reported to MCP clients as the server's version.
const version = "0.1.0"

// mcpPath is where --mcp-listen serves MCP.
const mcpPath = "/mcp"

// newMCPServer is the daemon's MCP server: the classifier tools over the
// same server.Server the gRPC API uses, and the terminal tools when
// --terminal is on.
func newMCPServer(cfg Config, svc *server.Server, term *server.TerminalServer, idx *index.Index, caller mcpserver.Caller, log *slog.Logger) (*mcp.Server, error) {
	// The served index is read per call: hot reloads and live MCP tools
	// swap it under the daemon (server.Server.Swap).
	backend := func() mcpserver.Backend { return mcpserver.Backend{Classifier: svc, Index: svc.Index()} }
	s, err := mcpserver.New(mcpserver.Config{Backend: backend, Terminal: term, Timeout: cfg.Timeout, Version: version, Logger: log,
		Caller: cfg.mcpAuth})
	if err != nil {
		return nil, err
	}
	if caller != nil {
		mcpserver.AddCallTool(s, backend, caller)
	}
	if cfg.tracer != nil {
		s.AddReceivingMiddleware(cfg.tracer.mcpMiddleware())
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
	pool := mcpsrc.Open(mc, mcpsrc.Options{Stderr: os.Stderr, ClientName: "classifierd", ClientVersion: version})
	log.Info("call_tool forwards to the configured MCP servers", "servers", len(mc.Servers))
	return pool, func() { _ = pool.Close() }, nil
}

// serveMCPStdio serves MCP on stdin/stdout (classifierd mcp) until the
// client closes stdin or ctx ends; with --mcp-listen it serves HTTP too.
// The log stays on stderr: stdout carries only MCP messages.
func serveMCPStdio(ctx context.Context, cfg Config, svc *server.Server, term *server.TerminalServer, idx *index.Index, live mcpserver.Caller, log *slog.Logger) error {
	caller, closeCaller, err := openCaller(cfg, live, log)
	if err != nil {
		return err
	}
	defer closeCaller()
	s, err := newMCPServer(cfg, svc, term, idx, caller, log)
	if err != nil {
		return err
	}
	stop, err := startMCPHTTPWith(cfg, svc, term, idx, caller, log)
	if err != nil {
		return err
	}
	defer stop()
	log.Info("classifierd serving MCP on stdio", "tools", len(idx.LabelsOf(index.KindTool)), "terminal", term != nil)
	err = s.Run(ctx, &mcp.StdioTransport{MaxLineLength: cfg.MaxRecvBytes}) // a message over --max-recv-bytes is refused before any work
	if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil // a signal, or the client went away: a normal end
	}
	return err
}

// startMCPHTTP serves MCP over streamable HTTP at cfg.MCPListen (if set)
// and returns the function that shuts it down within cfg.ShutdownWait.
func startMCPHTTP(cfg Config, svc *server.Server, term *server.TerminalServer, idx *index.Index, live mcpserver.Caller, log *slog.Logger) (stop func(), err error) {
	if cfg.MCPListen == "" {
		return func() {}, nil
	}
	caller, closeCaller, err := openCaller(cfg, live, log)
	if err != nil {
		return nil, err
	}
	stopHTTP, err := startMCPHTTPWith(cfg, svc, term, idx, caller, log)
	if err != nil {
		closeCaller()
		return nil, err
	}
	return func() { stopHTTP(); closeCaller() }, nil
}

func startMCPHTTPWith(cfg Config, svc *server.Server, term *server.TerminalServer, idx *index.Index, caller mcpserver.Caller, log *slog.Logger) (stop func(), err error) {
	if cfg.MCPListen == "" {
		return func() {}, nil
	}
	s, err := newMCPServer(cfg, svc, term, idx, caller, log)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.MCPListen)
	if err != nil {
		return nil, fmt.Errorf("mcp listen: %w", err)
	}
	h := newMCPHandler(func(*http.Request) *mcp.Server { return s }, cfg, log)
	if cfg.mcpGate != nil {
		h = cfg.mcpGate(h)
	} else {
		h = mcpClientCert(h)
	}
	return serveHTTP(lis, cfg.mcpTLS, h, cfg.ShutdownWait, log), nil
}

// newMCPHandler is the streamable HTTP handler at mcpPath. Request bodies
// are bounded by --max-recv-bytes, as gRPC messages are; idle sessions end
// after --session-ttl.
func newMCPHandler(getServer func(*http.Request) *mcp.Server, cfg Config, log *slog.Logger) http.Handler {
	h := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: log,
		MaxRequestBodyBytes: int64(cfg.MaxRecvBytes), SessionTimeout: cfg.SessionTTL})
	mux := http.NewServeMux()
	mux.Handle(mcpPath, h)
	return mux
}

// serveHTTP serves h on lis in the background, over TLS when tlsConf is
// set; the returned stop shuts the server down, closing what is still open
// after wait.
func serveHTTP(lis net.Listener, tlsConf *tls.Config, h http.Handler, wait time.Duration, log *slog.Logger) (stop func()) {
	// No ReadTimeout: it would end event streams (GET) and long tool
	// calls. IdleTimeout closes keep-alive connections no request uses,
	// as --http-listen does; mcpGate bounds the bodies it refuses.
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, TLSConfig: tlsConf,
		ErrorLog: serverErrorLog(log)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if tlsConf != nil {
			err = hs.ServeTLS(lis, "", "") // the certificate is the config's (GetCertificate)
		} else {
			err = hs.Serve(lis)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("MCP HTTP server failed", "err", err)
		}
	}()
	log.Info("classifierd serving MCP over streamable HTTP", "addr", lis.Addr().String(), "path", mcpPath, "tls", tlsConf != nil)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close()
		}
		<-done
	}
}
