package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/reload"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// version is reported to MCP clients as the server's version.
const version = "0.1.0"

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
		s.AddReceivingMiddleware(cfg.tracer.MCPMiddleware())
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
	if err := reload.SharedOnly(mc, "--mcp-servers"); err != nil {
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
	count := newMCPSessions(s, cfg.MaxSessions, cfg.Ops.MaxSessionsPerClient, log)
	if cfg.mcpObserve != nil {
		count.refused = cfg.mcpObserve(func() float64 { n, _ := count.places.Count(""); return float64(n) })
	}
	h := newMCPHandler(func(*http.Request) *mcp.Server { return s }, cfg, log, count.handler)
	if cfg.mcpGate != nil {
		h = cfg.mcpGate(h)
	} else {
		h = security.ClientCertHeader(httpguard.PlainMCP(int64(cfg.MaxRecvBytes)).Wrap(h))
	}
	return listeners.ServeMCP(lis, cfg.mcpTLS, h, cfg.ShutdownWait, cfg.Ops.IdleTimeout, log), nil
}

// newMCPHandler is the streamable HTTP handler at listeners.MCPPath. Request bodies
// are bounded by --max-recv-bytes, as gRPC messages are; idle sessions end
// after --session-ttl. around, if set, wraps the SDK's handler.
func newMCPHandler(getServer func(*http.Request) *mcp.Server, cfg Config, log *slog.Logger, around func(http.Handler) http.Handler) http.Handler {
	var h http.Handler = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: log,
		MaxRequestBodyBytes: int64(cfg.MaxRecvBytes), SessionTimeout: cfg.SessionTTL})
	if around != nil {
		h = around(h)
	}
	mux := http.NewServeMux()
	mux.Handle(listeners.MCPPath, h)
	return mux
}

// mcpSessionHeader is the streamable HTTP header that names a request's
// MCP session; the SDK sets it on the answer to the initialize that
// started one.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpSessions counts the live MCP sessions of --mcp-listen, in all
// (--max-sessions) and per caller (--max-sessions-per-client, by the
// server.Caller.Quota mcpGate sets): the same limits as hub sessions, with
// a count of their own. All sessions share one SDK server, which starts a
// session for every POST without an Mcp-Session-Id, so each such request
// takes a place before the SDK reads it. The place is the session's, known
// by the id the SDK answers an initialize with, until the session ends (a
// DELETE, or the idle timeout of --session-ttl); an
// answer without one gives it back (the SDK ends a session that no
// initialize started with its request).
type mcpSessions struct {
	srv            *mcp.Server
	places         *session.Places
	max, perClient int
	log            *slog.Logger
	// refused counts a refusal by the limit reached ("per_client",
	// "total"); nil: not counted.
	refused func(limit string)

	mu   sync.Mutex
	held map[string]*mcpPlace // by MCP session id
}

// mcpPlace is the place one session holds.
type mcpPlace struct {
	id, quota string
	give      sync.Once
}

func newMCPSessions(srv *mcp.Server, max, perClient int, log *slog.Logger) *mcpSessions {
	return &mcpSessions{srv: srv, places: session.NewPlaces(max, perClient), max: max, perClient: perClient, log: log,
		held: map[string]*mcpPlace{}}
}

// handler counts the sessions next (the SDK's handler) starts. A request
// past a limit is answered as refuseSession says, and the SDK never sees
// it.
func (m *mcpSessions) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(mcpSessionHeader)
		switch {
		case r.Method == http.MethodPost && id == "":
			quota := server.CallerFrom(r.Context()).Quota // mcpGate's
			if err := m.places.Take(quota); err != nil {
				if limit := session.LimitReached(err); m.refused != nil && limit != "" {
					m.refused(limit)
				}
				refuseSession(w, r, err, m.max, m.perClient, m.log)
				return
			}
			// When the SDK sends the answer's header, it names the session
			// it started (an initialize), before the client can know the
			// id (and DELETE it): the place is that session's. An answer
			// that names none (a request before an initialize, such as
			// the official client's server/discover probe, or a refusal)
			// leaves no session past its request: the place is given
			// back before the client sees it, so its next request, the
			// initialize, finds it free.
			var p *mcpPlace
			sw := &sessionIDWriter{ResponseWriter: w, named: func(id string) {
				if id == "" {
					m.places.Give(quota)
					return
				}
				p = &mcpPlace{id: id, quota: quota}
				m.mu.Lock()
				m.held[id] = p
				m.mu.Unlock()
			}}
			next.ServeHTTP(sw, r)
			sw.sent()
			if p == nil {
				return
			}
			if ss := m.live(p); ss != nil {
				go func() { _ = ss.Wait(); m.give(p) }()
			} else {
				m.give(p) // it failed to initialize, or ended already
			}
		case r.Method == http.MethodDelete && id != "":
			next.ServeHTTP(w, r)
			// Go's HTTP server sends the answer when the handler returns:
			// the session's place is free by then.
			m.ended(id)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// ended gives back the place of session id now if the session has ended,
// as once a DELETE for it has been served, rather than when the goroutine
// awaiting its end runs, so its client can start another at once. A
// session still live (its DELETE refused) or unknown is left alone.
func (m *mcpSessions) ended(id string) {
	m.mu.Lock()
	p := m.held[id]
	m.mu.Unlock()
	if p != nil && m.live(p) == nil {
		m.give(p)
	}
}

// give gives back p, once.
func (m *mcpSessions) give(p *mcpPlace) {
	p.give.Do(func() {
		m.mu.Lock()
		if m.held[p.id] == p {
			delete(m.held, p.id)
		}
		m.mu.Unlock()
		m.places.Give(p.quota)
	})
}

// live is the server's live session that holds p, or nil. It looks
// through every session (the SDK keeps no index by id): once per session
// started or DELETE served, not per request.
func (m *mcpSessions) live(p *mcpPlace) *mcp.ServerSession {
	for ss := range m.srv.Sessions() {
		if ss.ID() == p.id {
			return ss
		}
	}
	return nil
}

// sessionIDWriter calls named once, with the Mcp-Session-Id of the answer
// ("" for none), when the answer's header is sent, or at the latest when
// sent is called after the handler. The SDK flushes through
// http.ResponseController, which finds FlushError.
type sessionIDWriter struct {
	http.ResponseWriter
	named func(id string)
	once  sync.Once
}

func (w *sessionIDWriter) sent() {
	w.once.Do(func() { w.named(w.Header().Get(mcpSessionHeader)) })
}

func (w *sessionIDWriter) WriteHeader(code int) {
	w.sent()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionIDWriter) Write(b []byte) (int, error) {
	w.sent()
	return w.ResponseWriter.Write(b)
}

func (w *sessionIDWriter) FlushError() error {
	w.sent()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *sessionIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
