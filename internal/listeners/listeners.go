// Package listeners assembles the daemon's and the proxy's network
// listeners: --http-listen (vanguard's HTTP/JSON transcoder in front of
// the same grpc.Server, docs/http.md), the MCP streamable HTTP servers,
// the gRPC listener's Unix socket, --metrics-listen, and the error log
// every HTTP server writes to.
package listeners

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/classifierd/classifierd/internal/answerhold"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/web"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// HTTPConfig is what --http-listen is served with.
type HTTPConfig struct {
	Addr         string        // --http-listen
	MaxRecvBytes int           // --max-recv-bytes
	Timeout      time.Duration // --timeout: a body is read within it and 10s more
	IdleTimeout  time.Duration // --idle-timeout
	TLS          *tls.Config   // nil: plain text
	Conns        *Limiter      // --max-conns-per-peer, --max-conns (nil: no caps)
	// Resets counts each peer's requests abandoned before their answer
	// (HTTP/2 rapid resets) with the process's other listeners, and holds
	// back the new connections of penalized peers (nil: not counted).
	Resets *rapidreset.Peers
}

// HTTP is --http-listen: every gRPC service registered on gs, over
// HTTP/JSON, transcoded by vanguard to the same gRPC handlers (and so the
// same interceptors, limits and error mapping):
//   - POST /<package.Service>/<Method> with a JSON body: the REST rule
//     each unary RPC carries at its Connect path (plain curl), or the
//     Connect protocol itself when Connect-Protocol-Version: 1 is sent;
//     gRPC-Web and Connect streaming too;
//   - REST at the other google.api.http routes of the protos (GET /tools,
//     GET /tools/metrics, POST /tools/metrics/reset);
//   - the explain page (package web) at / for every other path.
type HTTP struct {
	srv    *http.Server
	lis    net.Listener
	resets *rapidreset.Peers
}

// NewHTTP listens on cfg.Addr, over TLS when cfg.TLS is
// set (HTTP/2 and HTTP/1.1 offered by ALPN; a client certificate the TLS
// layer verified reaches the gRPC interceptors through grpc.Server's
// ServeHTTP, as on --listen).
//
// g stands in front of the transcoder: it authenticates, bounds and reads
// every body before vanguard sees it (httpguard).
func NewHTTP(cfg HTTPConfig, gs *grpc.Server, g httpguard.Guard, log *slog.Logger) (*HTTP, error) {
	h, err := newTranscoder(gs,
		vanguard.WithCodec(newJSONCodec),
		vanguard.WithDefaultServiceOptions(
			// The request bound the gRPC listener has (--max-recv-bytes),
			// which the guard in front has applied already (413).
			vanguard.WithMaxMessageBufferBytes(uint32(min(cfg.MaxRecvBytes, math.MaxUint32))),
			// Hubs send query parameters we do not use; ignoring them is
			// what the REST shape they call did.
			vanguard.WithRESTUnmarshalOptions(vanguard.RESTUnmarshalOptions{DiscardUnknownQueryParams: true}),
		),
		vanguard.WithUnknownHandler(pageRate(web.Handler())),
	)
	if err != nil {
		return nil, fmt.Errorf("http transcoder: %w", err)
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	lis = cfg.Conns.Wrap("http", lis)
	srv := &http.Server{
		Handler:           loopbackHostOnly(g, g.Wrap(normalizeRequest(holdAnswers(h)))),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.Timeout + 10*time.Second, // bounds the time a body takes
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          ErrorLog(log),
		TLSConfig:         cfg.TLS,
		// Over TLS the listener speaks HTTP/2: as many requests open
		// on one connection as on the MCP listener and on gRPC (at
		// net/http's default of 250, the ninth hostile pass held
		// 15,000 streams on 60 connections), and a connection whose
		// client takes no bytes closed (h2Config).
		HTTP2: h2Config(),
	}
	return &HTTP{srv: srv, lis: lis, resets: cfg.Resets}, nil
}

// ErrorLog is an HTTP server's ErrorLog: what net/http reports, at
// warning level, except failed TLS handshakes (a port scan, a load
// balancer's TCP check, a client speaking plain HTTP to a TLS port), at
// debug level so they do not flood the log.
func ErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(errorLogWriter{log}, "", 0)
}

type errorLogWriter struct{ log *slog.Logger }

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, msg)
	return len(p), nil
}

// Addr is the address the server listens on.
func (s *HTTP) Addr() string { return s.lis.Addr().String() }

// URL is the explain page's address.
func (s *HTTP) URL() string {
	if s.srv.TLSConfig != nil {
		return "https://" + s.Addr() + "/"
	}
	return "http://" + s.Addr() + "/"
}

// Serve serves until Shutdown; a clean shutdown returns nil.
func (s *HTTP) Serve() error {
	if err := serveOn(s.srv, s.lis, s.resets); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// serveOn serves hs on lis until it is shut down, over TLS when hs has a
// TLSConfig (whose GetCertificate gives the certificate), its requests
// counted to resets (nil: not counted) and the new connections of the
// peers it penalizes held back before their handshake.
func serveOn(hs *http.Server, lis net.Listener, resets *rapidreset.Peers) error {
	if resets != nil {
		resets.Serve(hs)
		lis = resets.Listener(lis, nil)
	}
	if hs.TLSConfig != nil {
		return serveTLS(hs, lis)
	}
	return hs.Serve(limitHeadLines(hs, lis))
}

// Shutdown stops accepting, waits up to wait for requests in flight, then
// closes what is left.
func (s *HTTP) Shutdown(wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}

// normalizeRequest fixes up two requests the transcoder would answer
// with a 5xx although the fault is the caller's:
//   - a bodiless JSON POST (curl -X POST with no -d, a hub's POST
//     /tools/metrics/reset) reads as the empty message {} (the transcoder
//     would see no request message at all: INTERNAL);
//   - a query string that does not decode, is not UTF-8 once decoded (a
//     proto string field cannot hold it: UNKNOWN) or has a parameter with
//     an empty name ("empty field path": UNKNOWN) answers 400
//     invalid_argument.
func normalizeRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := checkQuery(r.URL.RawQuery); msg != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":3,"message":"`+msg+`","details":[]}`)
			return
		}
		ct := r.Header.Get("Content-Type")
		if isConnect(r, ct) {
			if v := r.Header.Values("Connect-Timeout-Ms"); len(v) > 1 || len(v) == 1 && !validConnectTimeout(v[0]) {
				// The transcoder answered a plain-text Go error (strconv.ParseInt: ...).
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"code":"invalid_argument","message":"malformed Connect-Timeout-Ms header (1 to 10 digits)"}`)
				return
			}
			// Not a Connect header: the transcoder handed a malformed one to
			// gRPC, which answered 500 internal (the fourteenth hostile pass).
			if v := r.Header.Values("Grpc-Timeout"); len(v) > 1 || len(v) == 1 && !validGRPCTimeout(v[0]) {
				r.Header.Del("Grpc-Timeout")
			}
		} else if v := r.Header.Get("Connect-Timeout-Ms"); len(v) > maxTimeoutEcho {
			// Malformed (a valid one has at most 10 digits): the transcoder
			// refuses it 400 quoting it, so it is cut first (60 KB came
			// back twice over, the thirteenth hostile pass).
			r.Header.Set("Connect-Timeout-Ms", v[:maxTimeoutEcho])
		}
		if v := r.Header.Values("Grpc-Timeout"); len(v) > 0 && isREST(r, ct) && (len(v) > 1 || !validGRPCTimeout(v[0])) {
			// The transcoder hands it to gRPC, which answered a REST caller
			// 500 INTERNAL for it.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"code":3,"message":"malformed Grpc-Timeout header (1 to 8 digits and a unit: H, M, S, m, u or n)","details":[]}`)
			return
		}
		if r.Method == http.MethodPost && r.ContentLength == 0 && (ct == "" || ct == "application/json") {
			r.Body = io.NopCloser(strings.NewReader("{}"))
			r.ContentLength = 2
			r.Header.Set("Content-Type", "application/json")
		}
		next.ServeHTTP(w, r)
	})
}

// maxTimeoutEcho is the most of a malformed Connect-Timeout-Ms the
// transcoder's refusal may quote.
const maxTimeoutEcho = 16

// isConnect reports whether r is a Connect call (unary or streaming).
func isConnect(r *http.Request, ct string) bool {
	return r.Header.Get("Connect-Protocol-Version") != "" || strings.HasPrefix(strings.ToLower(ct), "application/connect")
}

// validConnectTimeout reports whether v is a Connect timeout: 1 to 10
// ASCII digits.
func validConnectTimeout(v string) bool {
	if len(v) < 1 || len(v) > 10 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isREST reports whether r is a REST call, not gRPC-Web or Connect
// (whose errors the transcoder writes in their own protocol).
func isREST(r *http.Request, ct string) bool {
	ct = strings.ToLower(ct)
	return r.Header.Get("Connect-Protocol-Version") == "" && !strings.HasPrefix(ct, "application/grpc") &&
		!strings.HasPrefix(ct, "application/connect")
}

// validGRPCTimeout reports whether v is a gRPC timeout: 1 to 8 ASCII
// digits and a unit.
func validGRPCTimeout(v string) bool {
	if len(v) < 2 || len(v) > 9 || !strings.ContainsRune("HMSmun", rune(v[len(v)-1])) {
		return false
	}
	for _, c := range v[:len(v)-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// holdAnswers gives each request a hold (package answerhold) on the
// admission of the model call it makes: the call's place is given back
// when the transcoder writes the answer's first byte, so the answer's
// encoding to JSON (most of an Embed's cost when its texts are cached)
// is done inside the caller's share of the places and cores, and counted
// in its service time; a client slow to read its answer holds nothing.
func holdAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, answered := answerhold.With(r.Context())
		defer answered()
		aw := &answerWriter{ResponseWriter: w, answered: answered}
		next.ServeHTTP(aw, r.WithContext(context.WithValue(ctx, answerKey{}, aw)))
	})
}

// answerWriter calls answered before anything of the answer is written,
// and records that it began (started).
type answerWriter struct {
	http.ResponseWriter
	answered func()
	started  atomic.Bool
}

// answerKey is the request context's key of its answerWriter.
type answerKey struct{}

func (w *answerWriter) WriteHeader(code int) {
	w.started.Store(true)
	w.answered()
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(p []byte) (int, error) {
	w.started.Store(true)
	w.answered()
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher, which gRPC's handler transport needs.
func (w *answerWriter) Flush() {
	w.answered()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// newTranscoder is vanguardgrpc.NewTranscoder with each service's
// requests handed to gs through settledBodies.
func newTranscoder(gs *grpc.Server, opts ...vanguard.TranscoderOption) (*vanguard.Transcoder, error) {
	return newTranscoderFor(gs.GetServiceInfo(), gs, opts...)
}

// newTranscoderFor transcodes to h (a gRPC server serving services).
func newTranscoderFor(services map[string]grpc.ServiceInfo, h http.Handler, opts ...vanguard.TranscoderOption) (*vanguard.Transcoder, error) {
	codecs := []string{vanguard.CodecProto}
	if encoding.GetCodec(vanguard.CodecJSON) != nil {
		codecs = append(codecs, vanguard.CodecJSON)
	}
	var svcs []*vanguard.Service
	for name := range services {
		svcs = append(svcs, vanguard.NewService(name, settledBodies(h)))
	}
	return vanguard.NewTranscoder(svcs, append([]vanguard.TranscoderOption{vanguard.WithDefaultServiceOptions(
		vanguard.WithTargetCodecs(codecs...), vanguard.WithTargetProtocols(vanguard.ProtocolGRPC),
	)}, opts...)...)
}

// settledBodies reads each request's body whole, as the transcoder
// transforms it, before gs sees the request, and hands gs the bytes.
// gRPC's handler transport reads a body on a goroutine of its own, while
// its handler's goroutine writes the answer's headers; the transcoder
// (vanguard 0.4.0) answers a body it cannot decode (JSON that does not
// parse, a query parameter of the wrong type) from within that read,
// writing the same headers. A client that reset such a request as it
// was refused had both write them at once, and the daemon died of a
// concurrent map write (found re-running the twenty-fourth hostile
// pass's finding 2: a token holder's unterminated JSON bodies, 64 at a
// time over HTTP/2, stopped it in 10-40 s). Read
// here, on the handler's goroutine, the transcoder's answer is written
// before gs starts, and gs is not called at all. The bodies are bounded
// (the guard read them whole, and the transcoder's message bound).
func settledBodies(gs http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The guard read the body whole and set its length: room for
		// it at once (the transcoder's form of it is about as long).
		buf := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0)+bytes.MinRead, settledStart)))
		_, err := buf.ReadFrom(r.Body)
		body := buf.Bytes()
		_ = r.Body.Close()
		if aw, ok := r.Context().Value(answerKey{}).(*answerWriter); ok && aw.started.Load() {
			return // the transcoder answered it: a body it refused
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		gs.ServeHTTP(w, r)
	})
}

// settledStart bounds the room settledBodies makes for a body at once.
const settledStart = 4<<20 + bytes.MinRead

// errReader reads as err, or as the end of the body when err is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// loopbackHostOnly refuses, on a listener bound to a loopback address, a
// request whose Host header is not a loopback name (localhost, 127.0.0.0/8,
// ::1): 403 before anything else is read. That is DNS rebinding: a web
// page the user opens points its own host name at 127.0.0.1 and then
// calls the daemon as its own origin, so the browser lets it set any
// header and read the answers. Without a token file, such a page read
// GetSessionHistory (the user's terminal answers), wrote terminal events
// that InferExpectedInput then suggested, and called ResetLearning. The
// rule is the MCP SDK's for the MCP listeners (StreamableHTTPOptions'
// localhost protection), so all of the daemon's listeners answer alike;
// a listener on any other address is not checked. An absolute-form
// target (`POST http://127.0.0.1/… HTTP/1.1`) is refused there too: Go
// takes the request's host from the target and drops the Host header, so
// the header could not be checked, and browsers never send that form to
// an origin server. The metrics listener answers alike.
//
// The refusal is written as g writes its own (httpguard.Guard.Refused:
// charged to the peer, its writes bounded in time).
func loopbackHostOnly(g httpguard.Guard, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil &&
			loopbackName(local.String()) && (!loopbackName(r.Host) || r.URL.IsAbs()) {
			g.Refused(w, r, func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"code":7,"message":"the Host header names no loopback address, on a loopback listener: use localhost or 127.0.0.1","details":[]}`)
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackName reports whether addr ("host" or "host:port") is localhost
// or a loopback IP address, as the MCP SDK decides it, but for the case of
// the name and a final dot: host names are case-insensitive and
// "localhost." is the same name fully qualified (the sixth hostile pass:
// /metrics answered 403 to Host: LOCALHOST:port and localhost.).
func loopbackName(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// checkQuery says what is wrong with a raw query string, or "" (the
// message is a constant: it never echoes the request).
func checkQuery(raw string) string {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "query string is not valid percent-encoding"
	}
	for k, vs := range q {
		if k == "" {
			return "query parameter with an empty name"
		}
		if !utf8.ValidString(k) {
			return "query string is not valid UTF-8"
		}
		if strings.Contains(k, ".") {
			// A field of a field: the API's query parameters are plain
			// names of scalar fields, and the transcoder answered a path
			// into one (userId.x) 500 (the twenty-fifth hostile pass).
			return "query parameter names a field inside a field: the query parameters are plain names (context, category, userId)"
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return "query string is not valid UTF-8"
			}
		}
	}
	return ""
}

// jsonCodec is vanguard's JSON codec whose decoding errors are the
// caller's: INVALID_ARGUMENT (HTTP 400), where the transcoder would answer
// UNKNOWN (HTTP 500).
type jsonCodec struct{ *vanguard.JSONCodec }

// newJSONCodec writes every scalar and list, default or not ("filtered":
// false, "tools": []), but leaves an unset message out rather than writing
// null, which the OpenAPI description (and a typed client) would not
// expect; unknown request fields are ignored.
func newJSONCodec(res vanguard.TypeResolver) vanguard.Codec {
	return jsonCodec{&vanguard.JSONCodec{
		MarshalOptions:   protojson.MarshalOptions{Resolver: res, EmitDefaultValues: true},
		UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res, DiscardUnknown: true},
	}}
}

func (c jsonCodec) Unmarshal(data []byte, msg proto.Message) error {
	return badRequest(c.JSONCodec.Unmarshal(data, msg))
}

func (c jsonCodec) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	return badRequest(c.JSONCodec.UnmarshalField(data, msg, field))
}

// badRequest is an unmarshal error as INVALID_ARGUMENT. Its message may
// quote the body, which need not be UTF-8: such bytes become U+FFFD, or the
// error itself could not be written as JSON (the answer was a 400 whose
// body said code 13, "failed to marshal end error"). It is clipped to
// maxBadRequest bytes: the decoder quotes the value it refused, and a
// 3 MB number came back whole in the 400 (the tenth hostile pass).
func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New("request body: "+clip.String(strings.ToValidUTF8(err.Error(), "\uFFFD"), maxBadRequest)))
}

// maxBadRequest bounds the decoder's message in a 400: enough for where
// and what, not for the value.
const maxBadRequest = 256

// MCPPath is where an MCP listener serves MCP.
const MCPPath = "/mcp"

// MaxHeaderBytes bounds a request's head (request line and header
// fields) on every HTTP listener: HTTP/JSON, MCP (the daemon's and the
// proxy's) and metrics. A head is read, and held, before the guard
// checks its token; at net/http's default of 1 MiB, 300 connections that
// sent 1 MB of header lines with no token and never ended them raised the
// daemon's memory by 331 MB, for up to ReadHeaderTimeout each time. A
// request needs a bearer token, an MCP session id and a few standard
// headers.
const MaxHeaderBytes = 64 << 10

// MCPMaxConcurrentStreams is the most requests one HTTP/2 connection may
// have open at once on an MCP listener and on --http-listen, as on gRPC
// (server.DefaultMaxConcurrentStreams).
const MCPMaxConcurrentStreams = 64

// H2WriteByteTimeout closes an HTTP/2 connection on which nothing could
// be written for this long: a client that stops reading its socket
// holds every stream of the connection, whose resets (the write
// deadlines of httpguard) cannot be sent either.
const H2WriteByteTimeout = 30 * time.Second

// h2Config is the HTTP/2 configuration of the HTTP/JSON and MCP
// listeners (over TLS; the plain ones do not speak h2c).
func h2Config() *http.HTTP2Config {
	return &http.HTTP2Config{MaxConcurrentStreams: MCPMaxConcurrentStreams, WriteByteTimeout: H2WriteByteTimeout,
		MaxReceiveBufferPerConnection: H2ConnWindow, MaxReceiveBufferPerStream: H2StreamWindow}
}

// H2ConnWindow and H2StreamWindow are the HTTP/2 flow-control windows of
// a connection's request bodies, in all and for each stream: how far its
// client may send ahead of its handlers' reads, which h2Conn charges
// (once: the most it ever was). net/http's default windows (1 MiB each)
// let a busy machine take up to 1,024 frames of 1 KiB before a body's
// handler had started, past the budget's burst (rapidreset.FrameBurst),
// and an upload was held now and then (TestH2BodyReadCredits, 2 runs in
// 20 beside a CI run; four uploads at once on one connection, 5 runs in
// 10). A quarter of that is the burst. It bounds a connection's uploads
// to 256 KiB a round trip: 5 MB/s at 50 ms, for bodies of 4 MiB at most.
const (
	H2ConnWindow   = 256 << 10
	H2StreamWindow = 256 << 10
)

// ServeMCP serves h, an MCP handler, on lis in the background, over TLS when tlsConf is
// set, its requests counted to resets (as HTTPConfig.Resets); the returned
// stop shuts the server down, closing what is still open after wait.
func ServeMCP(lis net.Listener, tlsConf *tls.Config, h http.Handler, resets *rapidreset.Peers, wait, idle time.Duration, log *slog.Logger) (stop func()) {
	// No ReadTimeout: it would end event streams (GET) and long tool
	// calls; the guard in h (mcpGate) bounds the time a body takes.
	// IdleTimeout closes keep-alive connections no request uses, as
	// --http-listen does.
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idle, TLSConfig: tlsConf,
		MaxHeaderBytes: MaxHeaderBytes, ErrorLog: ErrorLog(log),
		// Over TLS the listener speaks HTTP/2, where one connection
		// carries many requests: at net/http's default of 250 streams,
		// 200 bodies on one connection were read at once (+924 MB before
		// the body budget); the guard's budget bounds their bytes, this
		// the requests one connection may have open.
		HTTP2: h2Config()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serveOn(hs, lis, resets); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("MCP HTTP server failed", "err", err)
		}
	}()
	log.Info("classifierd serving MCP over streamable HTTP", "addr", lis.Addr().String(), "path", MCPPath, "tls", tlsConf != nil)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close()
		}
		<-done
	}
}

// Listen opens addr: HOST:PORT, or unix:///path for a Unix socket that
// only the daemon's user may connect to (created 0600; a stale socket
// left by a crash is replaced, any other file is not).
func Listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok {
		return net.Listen("tcp", addr)
	}
	if path == "" {
		return nil, errors.New("--listen unix:// needs a path")
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another daemon is listening", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	// The socket is created with the umask's mode: make it 0600 from the
	// start rather than chmod it after clients could connect.
	old := syscall.Umask(0o177)
	lis, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, err
	}
	return lis, nil
}

// NewRegistry returns a metrics registry holding the Go runtime and
// process collectors; the daemon and the proxy register theirs on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Counter is a counter read from f when reg is scraped (Counters).
type Counter struct {
	Name, Help string
	F          func() int64
}

// Counters registers each of cs on reg, as the daemon and the proxy
// register the counts their guards keep.
func Counters(reg prometheus.Registerer, cs ...Counter) error {
	for _, c := range cs {
		f := c.F
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.Name, Help: c.Help},
			func() float64 { return float64(f()) })); err != nil {
			return err
		}
	}
	return nil
}

// ServeMetrics serves reg at addr/metrics in plain HTTP (--metrics-listen)
// until ctx ends, its connections counted by conns (nil: not counted), a
// keep-alive connection no scrape has used for idle closed; the returned
// func waits for it to stop. An empty addr serves nothing.
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry, conns *Limiter, idle time.Duration, log *slog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	lis = conns.Wrap("metrics", lis)
	mux := http.NewServeMux()
	mux.Handle("/metrics", newMetricsCache(reg))
	// IdleTimeout: without it (and without ReadTimeout) net/http keeps an
	// idle keep-alive connection for ever, and a scrape needs no token, so
	// 1,024 connections that each sent one GET held the peer's whole share
	// of every listener (--max-conns-per-peer) at no further cost.
	// WriteTimeout: MetricsWriteTimeout. Scrapes: newMetricsCache.
	srv := &http.Server{Handler: loopbackHostOnly(httpguard.Guard{}, mux), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: idle, MaxHeaderBytes: MaxHeaderBytes,
		WriteTimeout: MetricsWriteTimeout, ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return withScrapeBucket(ctx) }}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(limitHeadLines(srv, lis)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	log.Info("metrics serving", "addr", lis.Addr().String())
	return wg.Wait, nil
}

// MCPHandler is the streamable HTTP handler at MCPPath. Request bodies are
// bounded by maxBody (--max-recv-bytes, as gRPC messages are); idle
// sessions end after ttl (--session-ttl). around, if set, wraps the SDK's
// handler.
func MCPHandler(getServer func(*http.Request) *mcp.Server, maxBody int, ttl time.Duration, log *slog.Logger, around func(http.Handler) http.Handler) http.Handler {
	// HeaderMarks: a request the MCP server's admission refuses past its
	// caller's rate is found by its header (rapidreset.FromHeader) and
	// closes its connection as on --http-listen.
	h := rapidreset.HeaderMarks(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Logger: log,
		MaxRequestBodyBytes: int64(maxBody), SessionTimeout: ttl}))
	if around != nil {
		h = around(h)
	}
	mux := http.NewServeMux()
	mux.Handle(MCPPath, h)
	return mux
}

// DefaultIdleTimeout is --idle-timeout's default, and the proxy's: what
// the HTTP listeners had before the flag. An idle gRPC connection holds
// about 64 KiB of buffers and a file descriptor; a client that calls less
// often than this pays one reconnect (and TLS handshake) per call.
const DefaultIdleTimeout = 2 * time.Minute

// The explain page's files (and the 404 of any other path the API does
// not have) are served with no token, so no caller's rate or admission
// holds them back. The twenty-first hostile pass asked for / over
// HTTP/2 with no token, many streams at once on 4 connections: 82,520
// answers in 10 s, the daemon 4.75 times the client's CPU, another
// identity's Route p50 2.8 -> 7.7 ms (16 connections: 56.7 ms). A
// browser loads the page with a handful of requests. So each peer (a
// host; the loopback addresses and Unix sockets one) is served
// PagesPerSecond of them a second after PagesBurst; past that a request
// is refused 429 past its rate (rapidreset.RefusedPastRate: the answer
// closes its connection, GOAWAY on HTTP/2), so a flood pays a
// connection, and on TLS a handshake, for each refusal.
const (
	PagesPerSecond = 20
	PagesBurst     = 200
)

// pageRate holds next's requests to PagesPerSecond a second per peer.
func pageRate(next http.Handler) http.Handler {
	q := httpguard.NewRequestRate(PagesPerSecond, PagesBurst)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !q.Allow(pagePeer(r.RemoteAddr)) {
			rapidreset.RefusedPastRate(r.Context())
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("too many requests for the page from this address: at most %d a second", PagesPerSecond), http.StatusTooManyRequests)
			return
		}
		httpguard.ShortenWriteWait(w, httpguard.RefusalWriteWait)
		next.ServeHTTP(w, r)
	})
}

// pagePeer is the peer of a request's remote address as pageRate counts
// it: rapidreset.PeerOf's (an IPv6 /64; every loopback address, and a
// Unix socket's empty address, one).
func pagePeer(remote string) string {
	return rapidreset.PeerOf(remoteAddr(remote)).String()
}

// remoteAddr is an http.Request's RemoteAddr as a net.Addr.
type remoteAddr string

func (remoteAddr) Network() string  { return "tcp" }
func (a remoteAddr) String() string { return string(a) }
