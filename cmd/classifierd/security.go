package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"

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
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			r.Header.Set(mcpCertHeader, r.TLS.VerifiedChains[0][0].Subject.CommonName)
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
// one, as on a listener of --plaintext-listeners, is UNAUTHENTICATED. A
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
	return server.CertCaller(cn[0]), nil
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
