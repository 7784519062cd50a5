// Package security is who may use a listener of classifierd and how it is
// reached, shared by the daemon and classifierd proxy: TLS (one
// configuration for every listener, its certificate swapped on SIGHUP),
// the bearer-token file and their SIGHUP reloaders, who makes an MCP call
// (the client-certificate header, tokens, tool scopes), the gate in front
// of the MCP SDK (401/403, sessions bound to their identity), the guards
// of the HTTP listeners, and the refusal of an unauthenticated MCP
// listener beyond loopback.
package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
)

// Config is who may use a listener and how it is reached: TLS,
// client certificates (mTLS) and bearer tokens. The daemon (OpsConfig)
// and classifierd proxy (ProxyConfig) share it, each with its own flag
// help.
type Config struct {
	TLSCert     string
	TLSKey      string
	TLSClientCA string
	TokenFile   string
}

func (c Config) Validate() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	return nil
}

// identifies reports whether callers are identified (by a token or a
// client certificate) rather than all anonymous.
func (c Config) Identifies() bool { return c.TokenFile != "" || c.TLSClientCA != "" }

// security is what Config opens: the tokens, the TLS
// configuration, and their reloaders for SIGHUP.
type Security struct {
	cfg       Config
	Tokens    *auth.Tokens
	TLS       *tls.Config
	Reloaders []Reloader
	// OnAuthenticated, if set, is told the local and remote addresses of
	// the connection of each request the HTTP guards (RPCGuard, MCPGuard)
	// authenticate by a token or a client certificate, as
	// server.AuthConfig.OnAuthenticated is of each gRPC call: the
	// connection limiter's Authenticated, so such a connection is never
	// evicted for a new one. Set it before serving.
	OnAuthenticated func(local, remote string)
	// Bodies, if set, bounds the request bytes the MCP listeners
	// (MCPGuard) hold at once, in all and per caller; the daemon shares
	// it with its other listeners. Set it before serving.
	Bodies *httpguard.Budget
	// MCPRequests, if set, holds each caller's requests on the MCP
	// listeners (MCPGuard) to its rate, refused 429 before the SDK reads
	// them (--mcp-requests-per-second). Set it before serving.
	MCPRequests *httpguard.RequestRate
	// BadBodies, if set, holds each caller's request bodies refused once
	// read to a rate (httpguard.RefusedBodies) on the MCP listeners
	// (MCPGuard); the daemon shares it with --http-listen. Set it
	// before serving.
	BadBodies *httpguard.RefusedBodies
	// BodyRate, if set, holds each caller's request bodies to a rate of
	// bytes (httpguard.NewBodyRate) on the MCP listeners, shared as
	// BadBodies is. Set it before serving.
	BodyRate *httpguard.RefusedBodies
}

// authenticated tells OnAuthenticated of r's connection when c, r's
// caller, is identified.
func (s *Security) authenticated(r *http.Request, c server.Caller) {
	rapidreset.MarkAuthenticated(r.Context())
	if s.OnAuthenticated == nil || !c.Identified() {
		return
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		s.OnAuthenticated(la.String(), r.RemoteAddr)
	}
}

// Reloader is one thing SIGHUP reloads (ReloadOnHUP).
type Reloader struct {
	Name   string
	Reload func() error
}

func Open(cfg Config) (*Security, error) {
	s := &Security{cfg: cfg}
	var err error
	if cfg.TokenFile != "" {
		if s.Tokens, err = auth.Load(cfg.TokenFile); err != nil {
			return nil, err
		}
		s.Reloaders = append(s.Reloaders, Reloader{Name: "auth tokens", Reload: s.Tokens.Reload})
	}
	if cfg.TLSCert != "" {
		if s.TLS, err = s.openTLS(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// tls12AEAD are the TLS 1.2 cipher suites every listener offers (TLS
// 1.3's are all allowed): those HTTP/2 allows (RFC 9113 9.2.2). net/http
// refused HTTP/2 over the others itself, until its HTTP/2 listeners
// served HTTP/2 on connections it does not see as TLS (the listeners'
// serveTLS, to read their frames): the twentieth hostile pass was
// served over ECDHE-ECDSA-AES128-SHA. gRPC is HTTP/2 too.
var tls12AEAD = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// openTLS loads the certificate (swapped on SIGHUP) and the client CA.
func (s *Security) openTLS() (*tls.Config, error) {
	var cert atomic.Pointer[tls.Certificate]
	load := func() error {
		c, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cert.Store(&c)
		return nil
	}
	if err := load(); err != nil {
		return nil, err
	}
	s.Reloaders = append(s.Reloaders, Reloader{Name: "TLS certificate", Reload: load})
	conf := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: tls12AEAD,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil }}
	if s.cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(s.cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificates", s.cfg.TLSClientCA)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// ListenerTLS is the TLS configuration of the HTTP/JSON or MCP listener
// (plain: --plaintext-listeners names it): a copy of the gRPC listener's,
// so the same certificate (swapped on SIGHUP) and client CA; nil without
// --tls-cert or when plain. Each listener gets its own copy, as an HTTP
// server adds its protocols (h2, http/1.1) to the one it is given.
func (s *Security) ListenerTLS(plain bool) *tls.Config {
	if s.TLS == nil || plain {
		return nil
	}
	return s.TLS.Clone()
}

// clientCerts reports whether the TLS layer requires and verifies client
// certificates.
func (s *Security) ClientCerts() bool { return s.TLS != nil && s.TLS.ClientCAs != nil }

// CertHeader carries the subject common name of the verified client
// certificate of an MCP request over HTTP from ClientCertHeader to
// MCPIdentity: the MCP SDK hands a tool call only its request's header.
// ClientCertHeader deletes whatever value a client sent, so only the TLS
// layer sets it.
var CertHeader = http.CanonicalHeaderKey("X-Classifierd-Client-Cert-CN")

// ClientCertHeader is the middleware of the MCP listener that puts the
// request's verified client certificate into CertHeader, and removes
// that header from every other request (plain text, TLS without a client
// certificate).
func ClientCertHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context()) // a handler does not change the request it was given
		r.Header.Del(CertHeader)
		if cert := server.VerifiedCert(r.TLS); cert != nil {
			r.Header.Set(CertHeader, cert.Subject.CommonName)
		}
		next.ServeHTTP(w, r)
	})
}

// MCPIdentity is who makes an MCP request over HTTP, by the rules of the
// gRPC edge (server.AuthConfig): without a token file or client CA every
// request is anonymous; with a token file it needs a bearer token of the
// file (a client certificate is only the transport's then); with only a
// client CA the caller is the verified client certificate of the request
// (CertHeader, which only ClientCertHeader sets), and a request without
// one, as on a listener of --plaintext-listeners, or whose certificate has
// no common name (server.CertCaller), is UNAUTHENTICATED. A
// request over stdio (h nil) comes from the local process that started
// classifierd, trusted as its owner.
func (s *Security) MCPIdentity(h http.Header) (server.Caller, error) {
	anon := server.Caller{Name: server.Anonymous, Quota: "mcp", Scopes: auth.AllScopes}
	if (s.Tokens == nil && !s.ClientCerts()) || h == nil {
		return anon, nil
	}
	if s.Tokens != nil {
		return server.TokenCaller(s.Tokens, h.Values("Authorization"))
	}
	cn, ok := h[CertHeader]
	if !ok || len(cn) != 1 {
		return server.Caller{}, status.Error(codes.Unauthenticated, "client certificate required")
	}
	return server.CertCaller(cn[0])
}

// ToolCaller returns the check of an MCP server's tool calls
// (mcpserver.Config.Caller): the caller is MCPIdentity's, and it must
// hold the scope scopeOf gives the tool, else PERMISSION_DENIED.
func (s *Security) ToolCaller(scopeOf func(tool string) string) func(string, http.Header) (server.Caller, error) {
	return func(tool string, h http.Header) (server.Caller, error) {
		c, err := s.MCPIdentity(h)
		if err != nil {
			return c, err
		}
		if scope := scopeOf(tool); !slices.Contains(c.Scopes, scope) {
			return server.Caller{}, status.Errorf(codes.PermissionDenied, "%s needs scope %q", tool, scope)
		}
		// A report is about a routed request: its caller routes too, as
		// for ReportUse over gRPC.
		if tool == mcpserver.ToolReportUse && !slices.Contains(c.Scopes, auth.ScopeRoute) {
			return server.Caller{}, status.Errorf(codes.PermissionDenied, "%s needs scope %q as well as %q", tool, auth.ScopeRoute, auth.ScopeReport)
		}
		return c, nil
	}
}

// MCPCaller checks a tool call of the daemon's MCP server.
func (s *Security) MCPCaller(tool string, h http.Header) (server.Caller, error) {
	return s.ToolCaller(DaemonToolScope)(tool, h)
}

// DaemonToolScope is the scope a tool of the daemon's MCP server needs:
// call for call_tool, which calls tools of the real servers; report for
// report_use (with route, ToolCaller); terminal for the terminal tools;
// route for the rest.
func DaemonToolScope(tool string) string {
	switch {
	case tool == mcpserver.ToolCall:
		return auth.ScopeCall
	case tool == mcpserver.ToolReportUse:
		return auth.ScopeReport
	case strings.Contains(tool, "input"): // detect_input_prompt, infer_expected_input, track_input_event
		return auth.ScopeTerminal
	}
	return auth.ScopeRoute
}

// MCPGate stands in front of an MCP listener: its guard (MCPGuard)
// authenticates every request before the MCP SDK reads it, by
// MCPIdentity's rules, bounds its body by maxBody, and puts its caller in
// the request's context (server.CallerFrom), an anonymous one with its
// peer address as its Quota (whose share of sessions it counts against).
// A request without a valid token (or, with only a client CA, a client
// certificate) is answered 401, one whose caller holds none of the scopes
// anyOf 403, one whose body is too large 413; each carries a JSON-RPC
// error saying why, which the SDK's client reports.
//
// When callers are identified, the caller also reaches the SDK as an
// auth.TokenInfo whose UserID is its name: the SDK binds a new session to
// that user and answers any other caller's request for the session (by
// its Mcp-Session-Id) 403 "session user mismatch". Only the SDK's
// RequireBearerToken puts a TokenInfo in a request, and only from a
// bearer token, so a certificate caller's request reaches it with a
// placeholder token (MCPIdentity reads no token without a token file).
func (s *Security) MCPGate(next http.Handler, maxBody int64, anyOf ...string) http.Handler {
	bound := sdkauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		c := server.CallerFrom(ctx)
		return &sdkauth.TokenInfo{UserID: c.Name, Scopes: c.Scopes}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return ClientCertHeader(s.MCPGuard(maxBody, anyOf...).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Identifies() {
			// Everyone is anonymous: nothing to bind a session to. Their
			// share of sessions is counted by address, as the gRPC edge
			// counts anonymous callers (server.AuthConfig), so one
			// client cannot take every session.
			c := server.CallerFrom(r.Context()) // the guard's
			c.Quota = "peer:" + server.AddrHost(r.RemoteAddr)
			next.ServeHTTP(w, r.WithContext(server.WithCaller(r.Context(), c)))
			return
		}
		if s.Tokens == nil {
			r.Header.Set("Authorization", "Bearer client-certificate") // r is ClientCertHeader's copy
		}
		bound.ServeHTTP(w, r)
	})))
}

// ErrOpenListen is the refusal to serve every tool of the servers to
// anyone who reaches a non-loopback address.
var ErrOpenListen = errors.New("unauthenticated listener beyond loopback")

// OpenListen reports whether an MCP listener at addr that can call every
// tool of the servers would serve anyone who reaches it: beyond loopback,
// with no caller identified by sec.
func OpenListen(addr string, sec Config) (bool, error) {
	loopback, err := LoopbackListen(addr)
	if err != nil {
		return false, fmt.Errorf("--mcp-listen %q: %w", addr, err)
	}
	return !loopback && !sec.Identifies(), nil
}

// CheckOpenListen refuses such a listener (OpenListen) unless the flag
// optOut (--insecure-listen, --insecure-mcp-listen) is set, as optedOut
// says.
func CheckOpenListen(addr string, sec Config, optOut string, optedOut bool) error {
	open, err := OpenListen(addr, sec)
	if err != nil || !open || optedOut {
		return err
	}
	return fmt.Errorf("%w: --mcp-listen %s would let anyone who reaches it call every tool of the servers; "+
		"add --auth-token-file (with --tls-cert and --tls-key) or --tls-client-ca, or listen on 127.0.0.1; "+
		"%s serves it unauthenticated all the same", ErrOpenListen, addr, optOut)
}

// WarnOpenListen says, at every start, that the listener at addr serves
// anyone who reaches it because optOut says so.
func WarnOpenListen(log *slog.Logger, addr, optOut string) {
	log.Warn(optOut+": MCP listener beyond loopback WITHOUT authentication: anyone who reaches it may call every tool of the servers; "+
		"add --auth-token-file or --tls-client-ca unless a proxy in front authenticates", "addr", addr)
}

// LoopbackListen reports whether a listen address HOST:PORT serves only
// this host: HOST is an IP literal of the loopback range (127.0.0.0/8,
// ::1) or "localhost". An empty host, 0.0.0.0 or :: and any other name
// (not resolved: the check is on what the operator wrote) count as
// reachable from elsewhere.
func LoopbackListen(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// RPCGuard is the guard of --http-listen: callers are authenticated by the
// gRPC edge's rules (server.AuthConfig.HTTPCaller) before a body is read;
// bodies are bounded by --max-recv-bytes, as on gRPC, and by the values
// they hold (httpguard.MaxElements) before they are decoded; refusals are written
// in the request's protocol (writeRPCError).
func (s *Security) RPCGuard(maxBody int64) httpguard.Guard {
	ac := server.AuthConfig{Tokens: s.Tokens, ClientCerts: s.ClientCerts()}
	return httpguard.Guard{
		Auth: func(r *http.Request) (server.Caller, error) {
			c, err := ac.HTTPCaller(r.URL.Path, r.Header, r.TLS, r.RemoteAddr)
			if err == nil {
				s.authenticated(r, c)
			}
			return c, err
		},
		Public:      publicRead,
		MaxBody:     maxBody,
		CountValues: true,
		Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
			if code == http.StatusUnauthorized && s.Tokens != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="classifierd"`)
			}
			httpguard.WriteRPCError(w, r, code, err)
		},
	}
}

// publicRead reports whether r is served without authentication on
// --http-listen: a GET, HEAD or OPTIONS without a body of the explain
// page's files, not of an API route (GET /tools, /tools/metrics, an RPC's
// path), which is authenticated here before the transcoder parses its
// query (the twenty-fifth hostile pass had GET /tools?userId.x=1 answered
// 500 by the transcoder with no token, 132,000 times in 10 s).
func publicRead(r *http.Request) bool {
	p := r.URL.Path
	api := p == "/tools" || strings.HasPrefix(p, "/tools/") || strings.HasPrefix(p, "/classifier.") || strings.HasPrefix(p, "/grpc.")
	return httpguard.BodilessRead(r) && (!api || r.Method == http.MethodOptions)
}

// MCPGuard is the guard of an MCP listener (the daemon's --mcp-listen,
// classifierd proxy --mcp-listen): every request is authenticated by
// MCPIdentity's rules and must hold one of the scopes anyOf; bodies are
// bounded by maxBody (--max-recv-bytes) and by the values they hold
// (httpguard.MaxElements), and read within bodyReadWait;
// refusals are JSON-RPC errors (writeMCPError).
func (s *Security) MCPGuard(maxBody int64, anyOf ...string) httpguard.Guard {
	return httpguard.Guard{
		Auth: func(r *http.Request) (server.Caller, error) {
			c, err := s.MCPIdentity(r.Header)
			if err != nil {
				return c, err
			}
			if !hasAnyScope(c.Scopes, anyOf) {
				return c, status.Errorf(codes.PermissionDenied, "%s holds none of the scopes %s", c.Name, strings.Join(anyOf, ", "))
			}
			s.authenticated(r, c)
			return c, nil
		},
		MaxBody:     maxBody,
		ReadWait:    httpguard.BodyReadWait,
		CheckBody:   httpguard.CheckMCPBody,
		Messages:    httpguard.MCPMessages,
		CountValues: true,
		ValueCost:   httpguard.MCPValueCost,
		JSONOnly:    true,
		Budget:      s.Bodies,
		Rate:        s.MCPRequests,
		BadBodies:   s.BadBodies,
		BodyRate:    s.BodyRate,
		Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
			if code == http.StatusUnauthorized && s.Tokens != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="classifierd"`)
			}
			httpguard.RefuseMCP(w, r, code, err)
		},
	}
}

func hasAnyScope(scopes, anyOf []string) bool {
	for _, want := range anyOf {
		for _, s := range scopes {
			if s == want {
				return true
			}
		}
	}
	return false
}

// ReloadOnHUP runs every reloader on each SIGHUP until ctx ends; the
// returned func waits for it to stop. A failed reload is logged and leaves
// the old value in use.
func ReloadOnHUP(ctx context.Context, log *slog.Logger, rs []Reloader) (wait func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		reloadLoop(ctx, log, hup, rs)
	}()
	return func() { <-done }
}

func reloadLoop(ctx context.Context, log *slog.Logger, hup <-chan os.Signal, rs []Reloader) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			for _, r := range rs {
				if err := r.Reload(); err != nil {
					log.Error("reload failed; keeping the previous one", "what", r.Name, "err", err)
				} else {
					log.Info("reloaded", "what", r.Name)
				}
			}
		}
	}
}
