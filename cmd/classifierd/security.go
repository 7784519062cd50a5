package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
)

// SecurityConfig is who may use a listener and how it is reached: TLS,
// client certificates (mTLS) and bearer tokens. The daemon (OpsConfig)
// and classifierd proxy (ProxyConfig) share it, each with its own flag
// help.
type SecurityConfig struct {
	TLSCert     string
	TLSKey      string
	TLSClientCA string
	TokenFile   string
}

func (c SecurityConfig) validate() error {
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
func (c SecurityConfig) identifies() bool { return c.TokenFile != "" || c.TLSClientCA != "" }

// security is what SecurityConfig opens: the tokens, the TLS
// configuration, and their reloaders for SIGHUP.
type security struct {
	cfg       SecurityConfig
	tokens    *auth.Tokens
	tlsConf   *tls.Config
	reloaders []hupReloader
}

// hupReloader is one thing SIGHUP reloads (reloadOnHUP).
type hupReloader struct {
	name   string
	reload func() error
}

func openSecurity(cfg SecurityConfig) (*security, error) {
	s := &security{cfg: cfg}
	var err error
	if cfg.TokenFile != "" {
		if s.tokens, err = auth.Load(cfg.TokenFile); err != nil {
			return nil, err
		}
		s.reloaders = append(s.reloaders, hupReloader{"auth tokens", s.tokens.Reload})
	}
	if cfg.TLSCert != "" {
		if s.tlsConf, err = s.openTLS(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openTLS loads the certificate (swapped on SIGHUP) and the client CA.
func (s *security) openTLS() (*tls.Config, error) {
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
	s.reloaders = append(s.reloaders, hupReloader{"TLS certificate", load})
	conf := &tls.Config{MinVersion: tls.VersionTLS12,
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

// listenerTLS is the TLS configuration of the HTTP/JSON or MCP listener
// (plain: --plaintext-listeners names it): a copy of the gRPC listener's,
// so the same certificate (swapped on SIGHUP) and client CA; nil without
// --tls-cert or when plain. Each listener gets its own copy, as an HTTP
// server adds its protocols (h2, http/1.1) to the one it is given.
func (s *security) listenerTLS(plain bool) *tls.Config {
	if s.tlsConf == nil || plain {
		return nil
	}
	return s.tlsConf.Clone()
}

// clientCerts reports whether the TLS layer requires and verifies client
// certificates.
func (s *security) clientCerts() bool { return s.tlsConf != nil && s.tlsConf.ClientCAs != nil }

// mcpCertHeader carries the subject common name of the verified client
// certificate of an MCP request over HTTP from mcpClientCert to
// mcpIdentity: the MCP SDK hands a tool call only its request's header.
// mcpClientCert deletes whatever value a client sent, so only the TLS
// layer sets it.
var mcpCertHeader = http.CanonicalHeaderKey("X-Classifierd-Client-Cert-CN")

// mcpClientCert is the middleware of the MCP listener that puts the
// request's verified client certificate into mcpCertHeader, and removes
// that header from every other request (plain text, TLS without a client
// certificate).
func mcpClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context()) // a handler does not change the request it was given
		r.Header.Del(mcpCertHeader)
		if cert := server.VerifiedCert(r.TLS); cert != nil {
			r.Header.Set(mcpCertHeader, cert.Subject.CommonName)
		}
		next.ServeHTTP(w, r)
	})
}

// mcpIdentity is who makes an MCP request over HTTP, by the rules of the
// gRPC edge (server.AuthConfig): without a token file or client CA every
// request is anonymous; with a token file it needs a bearer token of the
// file (a client certificate is only the transport's then); with only a
// client CA the caller is the verified client certificate of the request
// (mcpCertHeader, which only mcpClientCert sets), and a request without
// one, as on a listener of --plaintext-listeners, or whose certificate has
// no common name (server.CertCaller), is UNAUTHENTICATED. A
// request over stdio (h nil) comes from the local process that started
// classifierd, trusted as its owner.
func (s *security) mcpIdentity(h http.Header) (server.Caller, error) {
	anon := server.Caller{Name: server.Anonymous, Quota: "mcp", Scopes: auth.AllScopes}
	if (s.tokens == nil && !s.clientCerts()) || h == nil {
		return anon, nil
	}
	if s.tokens != nil {
		return server.TokenCaller(s.tokens, h.Values("Authorization"))
	}
	cn, ok := h[mcpCertHeader]
	if !ok || len(cn) != 1 {
		return server.Caller{}, status.Error(codes.Unauthenticated, "client certificate required")
	}
	return server.CertCaller(cn[0])
}

// toolCaller returns the check of an MCP server's tool calls
// (mcpserver.Config.Caller): the caller is mcpIdentity's, and it must
// hold the scope scopeOf gives the tool, else PERMISSION_DENIED.
func (s *security) toolCaller(scopeOf func(tool string) string) func(string, http.Header) (server.Caller, error) {
	return func(tool string, h http.Header) (server.Caller, error) {
		c, err := s.mcpIdentity(h)
		if err != nil {
			return c, err
		}
		if scope := scopeOf(tool); !slices.Contains(c.Scopes, scope) {
			return server.Caller{}, status.Errorf(codes.PermissionDenied, "%s needs scope %q", tool, scope)
		}
		return c, nil
	}
}

// mcpCaller checks a tool call of the daemon's MCP server.
func (s *security) mcpCaller(tool string, h http.Header) (server.Caller, error) {
	return s.toolCaller(daemonToolScope)(tool, h)
}

// daemonToolScope is the scope a tool of the daemon's MCP server needs:
// call for call_tool, which calls tools of the real servers; terminal for
// the terminal tools; route for the rest.
func daemonToolScope(tool string) string {
	switch {
	case tool == mcpserver.ToolCall:
		return auth.ScopeCall
	case strings.Contains(tool, "input"): // detect_input_prompt, infer_expected_input, track_input_event
		return auth.ScopeTerminal
	}
	return auth.ScopeRoute
}

// mcpGate stands in front of an MCP listener: its guard (mcpGuard)
// authenticates every request before the MCP SDK reads it, by
// mcpIdentity's rules, bounds its body by maxBody, and puts its caller in
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
// placeholder token (mcpIdentity reads no token without a token file).
func (s *security) mcpGate(next http.Handler, maxBody int64, anyOf ...string) http.Handler {
	bound := sdkauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		c := server.CallerFrom(ctx)
		return &sdkauth.TokenInfo{UserID: c.Name, Scopes: c.Scopes}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return mcpClientCert(s.mcpGuard(maxBody, anyOf...).wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.identifies() {
			// Everyone is anonymous: nothing to bind a session to. Their
			// share of sessions is counted by address, as the gRPC edge
			// counts anonymous callers (server.AuthConfig), so one
			// client cannot take every session.
			c := server.CallerFrom(r.Context()) // the guard's
			c.Quota = "peer:" + server.AddrHost(r.RemoteAddr)
			next.ServeHTTP(w, r.WithContext(server.WithCaller(r.Context(), c)))
			return
		}
		if s.tokens == nil {
			r.Header.Set("Authorization", "Bearer client-certificate") // r is mcpClientCert's copy
		}
		bound.ServeHTTP(w, r)
	})))
}

// mcpRefusalReadWait bounds how long writeMCPError reads the body of a
// request it refuses, for the request's id.
const mcpRefusalReadWait = 5 * time.Second

// JSON-RPC error codes of mcpGate's answers and of refused sessions
// (refuseSession), in the range JSON-RPC leaves to implementations; the
// last digits echo the HTTP status (401, 403, 413, 415, 429, 503).
const (
	mcpCodeUnauthenticated     = -32001
	mcpCodePermissionDenied    = -32003
	mcpCodeTooLarge            = -32013
	mcpCodeUnsupportedEncoding = -32015
	mcpCodeResourceExhausted   = -32029
	mcpCodeUnavailable         = -32053
	// mcpCodeInvalidRequest is JSON-RPC's own: a body that could not be
	// read to its end.
	mcpCodeInvalidRequest = -32600
)

// writeMCPError answers r with the HTTP status and a JSON-RPC error whose
// message is err in mcpserver.ToolError's spelling ("UNAUTHENTICATED:
// missing bearer token ..."), under the id of the request in r's body
// when it has one, so the client can match it to its call.
// The body is read for at most mcpRefusalReadWait: a refused client that
// sends it slowly, or never ends it, does not hold its connection.
func writeMCPError(w http.ResponseWriter, r *http.Request, code int, rpcCode int64, err error) {
	var id jsonrpc.ID
	if r.Method == http.MethodPost && r.Body != nil {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(mcpRefusalReadWait))
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if req, ok := decodeRequest(body); ok {
			id = req.ID
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: rpcCode, Message: mcpserver.ToolError(err).Error()}}); err == nil {
		_, _ = w.Write(data)
	}
}

// writeMCPErrorNoID is writeMCPError for a request whose body is not read
// again (too large, compressed, cut short): the error has no id.
func writeMCPErrorNoID(w http.ResponseWriter, code int, rpcCode int64, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: rpcCode, Message: mcpserver.ToolError(err).Error()}}); err == nil {
		_, _ = w.Write(data)
	}
}

func decodeRequest(body []byte) (*jsonrpc.Request, bool) {
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil, false
	}
	req, ok := msg.(*jsonrpc.Request)
	return req, ok && req.ID.IsValid()
}

// errOpenListen is the refusal to serve every tool of the servers to
// anyone who reaches a non-loopback address.
var errOpenListen = errors.New("unauthenticated listener beyond loopback")

// openListen reports whether an MCP listener at addr that can call every
// tool of the servers would serve anyone who reaches it: beyond loopback,
// with no caller identified by sec.
func openListen(addr string, sec SecurityConfig) (bool, error) {
	loopback, err := loopbackListen(addr)
	if err != nil {
		return false, fmt.Errorf("--mcp-listen %q: %w", addr, err)
	}
	return !loopback && !sec.identifies(), nil
}

// checkOpenListen refuses such a listener (openListen) unless the flag
// optOut (--insecure-listen, --insecure-mcp-listen) is set, as optedOut
// says.
func checkOpenListen(addr string, sec SecurityConfig, optOut string, optedOut bool) error {
	open, err := openListen(addr, sec)
	if err != nil || !open || optedOut {
		return err
	}
	return fmt.Errorf("%w: --mcp-listen %s would let anyone who reaches it call every tool of the servers; "+
		"add --auth-token-file (with --tls-cert and --tls-key) or --tls-client-ca, or listen on 127.0.0.1; "+
		"%s serves it unauthenticated all the same", errOpenListen, addr, optOut)
}

// warnOpenListen says, at every start, that the listener at addr serves
// anyone who reaches it because optOut says so.
func warnOpenListen(log *slog.Logger, addr, optOut string) {
	log.Warn(optOut+": MCP listener beyond loopback WITHOUT authentication: anyone who reaches it may call every tool of the servers; "+
		"add --auth-token-file or --tls-client-ca unless a proxy in front authenticates", "addr", addr)
}

// loopbackListen reports whether a listen address HOST:PORT serves only
// this host: HOST is an IP literal of the loopback range (127.0.0.0/8,
// ::1) or "localhost". An empty host, 0.0.0.0 or :: and any other name
// (not resolved: the check is on what the operator wrote) count as
// reachable from elsewhere.
func loopbackListen(addr string) (bool, error) {
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
