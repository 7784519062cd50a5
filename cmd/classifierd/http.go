package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/web"
)

// httpServer is --http-listen: every gRPC service registered on gs, over
// HTTP/JSON, transcoded by vanguard to the same gRPC handlers (and so the
// same interceptors, limits and error mapping):
//   - POST /<package.Service>/<Method> with a JSON body: the REST rule
//     each unary RPC carries at its Connect path (plain curl), or the
//     Connect protocol itself when Connect-Protocol-Version: 1 is sent;
//     gRPC-Web and Connect streaming too;
//   - REST at the other google.api.http routes of the protos (GET /tools,
//     GET /tools/metrics, POST /tools/metrics/reset);
//   - the explain page (package web) at / for every other path.
type httpServer struct {
	srv *http.Server
	lis net.Listener
}

// newHTTPServer listens on cfg.HTTPListen, over TLS when cfg.httpTLS is
// set (HTTP/2 and HTTP/1.1 offered by ALPN; a client certificate the TLS
// layer verified reaches the gRPC interceptors through grpc.Server's
// ServeHTTP, as on --listen).
//
// g stands in front of the transcoder: it authenticates, bounds and reads
// every body before vanguard sees it (guard).
func newHTTPServer(cfg Config, gs *grpc.Server, g httpguard.Guard, log *slog.Logger) (*httpServer, error) {
	h, err := vanguardgrpc.NewTranscoder(gs,
		vanguard.WithCodec(newJSONCodec),
		vanguard.WithDefaultServiceOptions(
			// The request bound the gRPC listener has (--max-recv-bytes),
			// which the guard in front has applied already (413).
			vanguard.WithMaxMessageBufferBytes(uint32(min(cfg.MaxRecvBytes, math.MaxUint32))),
			// Hubs send query parameters we do not use; ignoring them is
			// what the REST shape they call did.
			vanguard.WithRESTUnmarshalOptions(vanguard.RESTUnmarshalOptions{DiscardUnknownQueryParams: true}),
		),
		vanguard.WithUnknownHandler(web.Handler()),
	)
	if err != nil {
		return nil, fmt.Errorf("http transcoder: %w", err)
	}
	lis, err := net.Listen("tcp", cfg.HTTPListen)
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	srv := &http.Server{
		Handler:           g.Wrap(normalizeRequest(h)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       cfg.Timeout + 10*time.Second, // bounds the time a body takes
		IdleTimeout:       cfg.Ops.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          serverErrorLog(log),
		TLSConfig:         cfg.httpTLS,
	}
	return &httpServer{srv: srv, lis: lis}, nil
}

// serverErrorLog is an HTTP server's ErrorLog: what net/http reports, at
// warning level, except failed TLS handshakes (a port scan, a load
// balancer's TCP check, a client speaking plain HTTP to a TLS port), at
// debug level so they do not flood the log.
func serverErrorLog(log *slog.Logger) *stdlog.Logger {
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
func (s *httpServer) Addr() string { return s.lis.Addr().String() }

// URL is the explain page's address.
func (s *httpServer) URL() string {
	if s.srv.TLSConfig != nil {
		return "https://" + s.Addr() + "/"
	}
	return "http://" + s.Addr() + "/"
}

// Serve serves until Shutdown; a clean shutdown returns nil.
func (s *httpServer) Serve() error {
	if err := serveOn(s.srv, s.lis); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// serveOn serves hs on lis until it is shut down, over TLS when hs has a
// TLSConfig (whose GetCertificate gives the certificate).
func serveOn(hs *http.Server, lis net.Listener) error {
	if hs.TLSConfig != nil {
		return hs.ServeTLS(lis, "", "")
	}
	return hs.Serve(lis)
}

// Shutdown stops accepting, waits up to wait for requests in flight, then
// closes what is left.
func (s *httpServer) Shutdown(wait time.Duration) {
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
		if r.Method == http.MethodPost && r.ContentLength == 0 && (ct == "" || ct == "application/json") {
			r.Body = io.NopCloser(strings.NewReader("{}"))
			r.ContentLength = 2
			r.Header.Set("Content-Type", "application/json")
		}
		next.ServeHTTP(w, r)
	})
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
// body said code 13, "failed to marshal end error").
func badRequest(err error) error {
	if err == nil {
		return nil
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New("request body: "+strings.ToValidUTF8(err.Error(), "\uFFFD")))
}
