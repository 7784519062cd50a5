package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/server/auth"
)

// Anonymous is the identity of every call when the daemon runs without a
// token file or client CA: all clients share it, as before authentication
// existed.
const Anonymous = "anonymous"

// Caller is who a call comes from: Name owns the sessions it creates;
// Quota is the key its share of sessions is counted under (Name when
// authenticated, else the peer's address, so one anonymous client cannot
// take every session).
type Caller struct {
	Name   string
	Quota  string
	Scopes []string
}

type callerKey struct{}

// CallerFrom returns the caller the auth interceptor put in ctx; without
// one (tests that skip the interceptor) it is an unnamed caller, which
// owns and may use only unnamed sessions.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// WithCaller returns ctx carrying c. The vectors the call leaves in the
// embedder's cache are c's alone (rank.WithCacheScope, by c.Quota): no
// caller can time an answer to learn whether another sent a text.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return rank.WithCacheScope(context.WithValue(ctx, callerKey{}, c), c.Quota)
}

// AuthConfig says how calls are authenticated.
type AuthConfig struct {
	// Tokens, when set, makes a bearer token (authorization: Bearer T)
	// required on every call but health checks; its name is the caller
	// and its scopes what it may call.
	Tokens *auth.Tokens
	// ClientCerts is set when the TLS layer requires and verifies client
	// certificates (mTLS): without Tokens, the certificate's subject
	// common name is the caller, with every scope.
	ClientCerts bool
	// OnAuthenticated, if set, is told the local and remote addresses of
	// the connection of each call authenticated by a token or a client
	// certificate (listeners.Limiter.Authenticated: such a connection is
	// never evicted for a new one).
	OnAuthenticated func(local, remote string)
}

// methodScopes maps full method names and service prefixes to the scope
// they need; health needs none, reflection any authenticated caller, and
// anything unlisted admin.
var methodScopes = map[string]string{
	"/classifier.v1.ClassifierService/Classify":       auth.ScopeRoute,
	"/classifier.v1.ClassifierService/Route":          auth.ScopeRoute,
	"/classifier.v1.ClassifierService/Embed":          auth.ScopeRoute,
	"/classifier.v1.ClassifierService/GetIndexInfo":   auth.ScopeRoute,
	"/classifier.v1.ClassifierService/AnalyzePrompt":  auth.ScopeRoute,
	"/classifier.v1.ClassifierService/DetectContexts": auth.ScopeRoute,
	"/classifier.v1.ClassifierService/CreateSession":  auth.ScopeSessions,
	"/classifier.v1.ClassifierService/GetSession":     auth.ScopeSessions,
	"/classifier.v1.ClassifierService/DeleteSession":  auth.ScopeSessions,
	"/classifier.v1.ClassifierService/UpdateExposure": auth.ScopeSessions,
	"/classifier.v1.ClassifierService/ListTools":      auth.ScopeSessions,
	"/classifier.v1.ClassifierService/WatchExposure":  auth.ScopeSessions,
	"/classifier.v1.ClassifierService/GetStats":       auth.ScopeAdmin,
	"/classifier.v1.ClassifierService/ReportUse":      auth.ScopeReport,
	"/classifier.v1.ClassifierService/ExportLearning": auth.ScopeAdmin,
	"/classifier.v1.ClassifierService/ResetLearning":  auth.ScopeAdmin,
	"/terminal.v1.TerminalService/":                   auth.ScopeTerminal,
	"/grpc.health.v1.Health/":                         scopeNone,
	"/grpc.reflection.v1.ServerReflection/":           scopeAny,
	"/grpc.reflection.v1alpha.ServerReflection/":      scopeAny,
}

const (
	scopeNone = "-" // no authentication at all
	scopeAny  = "*" // any authenticated caller
)

func scopeOf(method string) string {
	if s, ok := methodScopes[method]; ok {
		return s
	}
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		if s, ok := methodScopes[method[:i+1]]; ok {
			return s
		}
	}
	return auth.ScopeAdmin
}

// authenticate finds the caller of ctx and checks it may call method.
func (a AuthConfig) authenticate(ctx context.Context, method string) (Caller, error) {
	p, _ := peer.FromContext(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	c, err := a.caller(method, scopeOf(method), md.Get("authorization"), func() *x509.Certificate { return verifiedCert(p) }, peerHost(p))
	if err == nil && a.OnAuthenticated != nil && c.Identified() && p != nil && p.Addr != nil && p.LocalAddr != nil {
		a.OnAuthenticated(p.LocalAddr.String(), p.Addr.String())
	}
	return c, err
}

// Identified reports whether c was authenticated by a token or a client
// certificate: not anonymous (no authentication configured, or a health
// check) nor unnamed.
func (c Caller) Identified() bool { return c.Name != "" && c.Name != Anonymous }

// HTTPCaller is the caller of an HTTP request to path by authenticate's
// rules: the bearer token of its Authorization header, or the client
// certificate the TLS layer verified (cs), and the scope the gRPC method
// path names ("/pkg.Service/Method", as Connect, gRPC-Web and the REST
// rules of our protos spell it); a path that names no method (the hub
// REST shape's /tools..., any other) needs only an authenticated caller,
// and the gRPC edge checks the scope of the call it becomes. The HTTP/JSON
// listener calls it before it reads a request's body, so a caller who may
// not make the call is refused (UNAUTHENTICATED, PERMISSION_DENIED) before
// the body costs anything.
func (a AuthConfig) HTTPCaller(path string, h http.Header, cs *tls.ConnectionState, remoteAddr string) (Caller, error) {
	need := scopeAny
	if methodPath(path) {
		need = scopeOf(path)
	}
	return a.caller(path, need, h.Values("Authorization"), func() *x509.Certificate { return VerifiedCert(cs) }, AddrHost(remoteAddr))
}

// methodPath reports whether an HTTP path names a gRPC method:
// "/pkg.Service/Method".
func methodPath(path string) bool {
	svc, m, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(svc, ".") && m != "" && !strings.Contains(m, "/")
}

// caller is authenticate's rule for a call to method that needs scope
// need, made with the authorization values, by the client certificate
// cert returns (nil: none), from host (anonymous callers are counted by
// it).
func (a AuthConfig) caller(method, need string, authorization []string, cert func() *x509.Certificate, host string) (Caller, error) {
	if a.Tokens == nil && !a.ClientCerts {
		return Caller{Name: Anonymous, Quota: "peer:" + host, Scopes: auth.AllScopes}, nil
	}
	if need == scopeNone {
		return Caller{Name: Anonymous, Quota: "peer:" + host}, nil
	}
	var c Caller
	if a.Tokens != nil {
		var err error
		if c, err = TokenCaller(a.Tokens, authorization); err != nil {
			return c, err
		}
	} else {
		crt := cert()
		if crt == nil {
			return c, status.Error(codes.Unauthenticated, "client certificate required")
		}
		var err error
		if c, err = CertCaller(crt.Subject.CommonName); err != nil {
			return c, err
		}
	}
	if need != scopeAny && !hasScope(c.Scopes, need) {
		return c, status.Errorf(codes.PermissionDenied, "%s needs scope %q", shortMethod(method), need)
	}
	return c, nil
}

func hasScope(scopes []string, s string) bool {
	for _, x := range scopes {
		if x == s {
			return true
		}
	}
	return false
}

// TokenCaller is the caller whose bearer token is among authorization
// (the values of an "authorization" header or metadata key), checked
// against tokens: UNAUTHENTICATED when there is none or it is unknown.
// gRPC, HTTP/JSON and MCP over HTTP all authenticate with it.
func TokenCaller(tokens *auth.Tokens, authorization []string) (Caller, error) {
	tok, ok := bearer(authorization)
	if !ok {
		return Caller{}, status.Error(codes.Unauthenticated, "missing bearer token (authorization: Bearer TOKEN)")
	}
	id, ok := tokens.Lookup(tok)
	if !ok {
		return Caller{}, status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	return Caller{Name: id.Name, Quota: "token:" + id.Name, Scopes: id.Scopes}, nil
}

// CertCaller is the caller a verified client certificate with subject
// common name cn makes when there is no token file: "cert:" + cn, with
// every scope. gRPC, HTTP/JSON and MCP over HTTP all name certificate
// callers with it. A certificate without a common name (one that names
// its holder only in its subject alternative names, as SPIFFE
// certificates do) names no one: it is UNAUTHENTICATED, as otherwise every
// such certificate would be the one caller "cert:" and could use the
// others' sessions.
func CertCaller(cn string) (Caller, error) {
	if cn == "" {
		return Caller{}, status.Error(codes.Unauthenticated, "client certificate has no subject common name to name the caller")
	}
	name := "cert:" + cn
	return Caller{Name: name, Quota: name, Scopes: auth.AllScopes}, nil
}

func bearer(authorization []string) (string, bool) {
	for _, v := range authorization {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:]), true
		}
	}
	return "", false
}

func verifiedCert(p *peer.Peer) *x509.Certificate {
	if p == nil {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return VerifiedCert(&ti.State)
}

// VerifiedCert is the client certificate the TLS layer verified on a
// connection in state cs, or nil (no TLS, no verified chain). gRPC and
// the MCP listeners over HTTP read the caller's certificate with it.
func VerifiedCert(cs *tls.ConnectionState) *x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

// peerHost is the host part of a peer's address: a client's share of
// sessions should not grow with the ports it opens. Unix socket peers
// share "unix".
func peerHost(p *peer.Peer) string {
	if p == nil || p.Addr == nil {
		return "unknown"
	}
	if p.Addr.Network() == "unix" {
		return "unix"
	}
	return AddrHost(p.Addr.String())
}

// AddrHost is the host part of a peer's "host:port" address (the whole
// address when it has no port): anonymous callers are counted by it, on
// gRPC and on the MCP listeners alike.
func AddrHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// authInterceptors authenticate every call and put its Caller in the
// context. AnalyzePrompt with a session_id changes a session, so it also
// needs the sessions scope; ReportUse needs route as well as report.
func (a AuthConfig) interceptors(onDenied func(method string, code codes.Code)) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		c, err := a.authenticate(ctx, info.FullMethod)
		if err == nil {
			if ap, ok := req.(*pb.AnalyzePromptRequest); ok && ap.GetSessionId() != "" && !hasScope(c.Scopes, auth.ScopeSessions) {
				err = status.Error(codes.PermissionDenied, "AnalyzePrompt with a session_id needs scope \"sessions\"")
			}
			// A report is about a routed request: its caller routes too.
			if _, ok := req.(*pb.ReportUseRequest); ok && !hasScope(c.Scopes, auth.ScopeRoute) {
				err = status.Error(codes.PermissionDenied, "ReportUse needs scope \"route\" as well as \"report\"")
			}
		}
		if err != nil {
			onDenied(info.FullMethod, status.Code(err))
			return nil, err
		}
		return h(WithCaller(ctx, c), req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		c, err := a.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			onDenied(info.FullMethod, status.Code(err))
			return err
		}
		return h(srv, &ctxStream{ServerStream: ss, ctx: WithCaller(ss.Context(), c)})
	}
	return unary, stream
}

// tap authenticates a call as soon as its headers arrive, by
// authenticate's rules, before grpc-go reads any of its message: grpc-go
// reads a unary request's whole message (up to --max-recv-bytes) before any
// interceptor runs, and allows unlimited streams per connection, so without
// it a caller with no token could make the daemon hold 4 MiB per stream,
// as many streams as it liked, for as long as it kept them open. The
// interceptors still authenticate (and put the Caller in the context); this
// only refuses earlier. It runs under the transport's lock, so it only
// looks up the token.
func (a AuthConfig) tap(onDenied func(method string, code codes.Code)) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		p, _ := peer.FromContext(ctx)
		c, err := a.caller(info.FullMethodName, scopeOf(info.FullMethodName), info.Header.Get("authorization"),
			func() *x509.Certificate { return verifiedCert(p) }, peerHost(p))
		if err != nil {
			onDenied(tapLabel(info.FullMethodName), status.Code(err))
			return ctx, err
		}
		return context.WithValue(ctx, tapCallerKey{}, c), nil // for the admission's tap
	}
}

// tapCaller is the caller of a call in the tap, for admission: the one
// the authentication tap found, or, without one (no token file, no
// client certificates), the anonymous caller of the call's peer.
func (a AuthConfig) tapCaller(ctx context.Context, info *tap.Info) Caller {
	if c, ok := ctx.Value(tapCallerKey{}).(Caller); ok {
		return c
	}
	p, _ := peer.FromContext(ctx)
	c, _ := a.caller(info.FullMethodName, scopeOf(info.FullMethodName), info.Header.Get("authorization"),
		func() *x509.Certificate { return verifiedCert(p) }, peerHost(p))
	return c
}

// ourMethods are the full names of the methods of our services.
var ourMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, sd := range []grpc.ServiceDesc{pb.ClassifierService_ServiceDesc, terminalpb.TerminalService_ServiceDesc} {
		for _, x := range sd.Methods {
			m["/"+sd.ServiceName+"/"+x.MethodName] = true
		}
		for _, x := range sd.Streams {
			m["/"+sd.ServiceName+"/"+x.StreamName] = true
		}
	}
	return m
}()

// tapLabel is the metric label of a call the tap refuses: the tap sees
// every method name a client sends, served or not (the interceptors only
// served ones), and a client must not mint label values.
func tapLabel(method string) string {
	if ourMethods[method] {
		return method
	}
	return "unknown"
}

// ctxStream is a ServerStream with another context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
