package rapidreset

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Serve has hs count each request of its connections to r, close a
// connection the rule catches, and refuse at once what a caught
// connection had already sent: the HTTP listeners' share of the rule
// (the thirteenth hostile pass: rapid resets over TLS, no token,
// reconnecting after 63 resets, cost the daemon 5.7-7.8 s of CPU in 10 s
// and the proxy 7.9 s, against the client's 1.9-3.5 s; net/http2 answers
// ENHANCE_YOUR_CALM per connection only). Call it before serving, and
// serve on r.Listener(lis, nil) so that a penalized peer's new
// connections are held back before their TLS handshake.
//
// A request counts as early when the client abandoned it before the
// handler was done with it (its stream reset, or its connection closed:
// the request's context ended), unless the handler had flushed its
// answer (an event stream the client ends); and, on HTTP/2, when it was
// refused as the caller's fault (refusedEarly: 401, 403, 400, ...). The
// second is what a rapid reset looks like from here: the guard answers
// at once, before the server reads the stream's reset, and net/http2
// lets a handler see nothing of a reset that comes after it returned (the
// fourteenth hostile pass reset requests refused 403 for a Host or an
// Origin, or a scope the token lacks: 12.7 s of CPU in 12 s, counted as
// nothing). On HTTP/1.1 a client waits for each answer before its next
// request on a connection, and its connections are capped
// (--max-conns-per-peer): its refusals are not counted, so many clients
// of one address that each lack a token each get their 401. A client
// that pipelines, which breaks that wait, has its connection closed after
// HTTP1PipelinedMax pipelined requests, whatever their answers; only it. A request
// refused past its caller's rate (RefusedPastRate) is not early on
// either: on HTTP/1.1 its answer closes its connection (Connection:
// close), which costs an honest client a reconnection and a pipelining
// one what it had pipelined, and touches no other connection.
func (r *Peers) Serve(hs *http.Server) {
	prev := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		n := ConnOf(c)
		if n == nil { // not served on r.Listener: requests counted, not the end
			n = &Conn{Peers: r, Peer: PeerOf(c.RemoteAddr())}
		}
		return context.WithValue(ctx, connKey{}, &httpConn{conn: c, n: n})
	}
	next := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		hc, ok := req.Context().Value(connKey{}).(*httpConn)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		hc.n.requests.Add(1)
		if req.ContentLength != 0 {
			// Under way while its handler runs, if it has a body to
			// read (TakeFrames): a GET held by a client that takes none
			// of its answer (an HTTP/2 window of 0) served no request
			// the spare is for (the twenty-second hostile pass).
			defer hc.n.Begin()()
		}
		if hc.n.Caught() {
			// Sent before the connection was caught and closed: no work.
			http.Error(w, "this connection reset too many requests before their answer: it is closed", http.StatusTooManyRequests)
			return
		}
		st := &reqAuth{n: hc.n}
		ctx, past := WithRequest(context.WithValue(req.Context(), authKey{}, st))
		sw := &flushWriter{ResponseWriter: w, past: past, h1: req.ProtoMajor == 1, st: st}
		if sw.h1 && slices.Contains(req.TransferEncoding, "chunked") {
			sw.body = &chunkedBody{ReadCloser: req.Body, n: hc.n, start: hc.n.wire.Load()}
			req.Body = sw.body
		}
		// calls: the connection's requests before this one (HTTP/1.1's
		// run one after another, each counted by Ended as it ends).
		if sw.h1 && hc.n.calls.Load() > 0 && hc.n.Pipelined() && hc.pipelined.Add(1) >= HTTP1PipelinedMax {
			sw.closing = true
		}
		next.ServeHTTP(sw, req.WithContext(ctx))
		if !st.authed.Load() {
			hc.n.settle() // ended without passing authentication
		}
		early := !sw.flushed.Load() && req.Context().Err() != nil || req.ProtoMajor == 2 && refusedEarly(int(sw.status.Load()))
		if sw.body != nil && strings.EqualFold(w.Header().Get("Connection"), "close") {
			// An answer that closes the connection of a chunked body:
			// net/http would still read up to 256 KiB of what is left of
			// it first (its body.Close looks for the trailer), and a body
			// sent in one-byte chunks after a 401 cost the daemon 26-37
			// times its client's CPU (the nineteenth hostile pass).
			// Nothing more is read: the read fails at once, the answer is
			// still written. A body of declared length is left to
			// net/http, which reads what is left of it (in bulk, at most
			// 256 KiB) so that its client, still sending, reads the answer
			// rather than a reset (TestHTTPBodyBudget's 429s).
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
		// While its peer is penalized, a connection is closed at its
		// first refusal of a request that did not pass authentication
		// (401, 403, and what is refused before it): a reconnection
		// flood with no token (Conn.Unsettled), or one that passes
		// authentication on one stream and is refused on the others.
		// The twenty-fourth hostile pass kept one body trickled with a
		// token on each of 64 connections, their other streams' bodies
		// refused 401 unread, and an honest upload from the same address
		// in small frames waited 18 s for the peer's budget they took;
		// the twenty-fifth did the same with 403s (a token without the
		// method's scope), 1.6-2 times the client's CPU. On HTTP/2 the
		// refusal says Connection: close as it is written (goaway):
		// net/http answers it whole, then sends GOAWAY and closes.
		if sw.refusing {
			hc.n.refusing.Add(-1)
		}
		if hc.n.ended(early, !st.authed.Load()) {
			r.httpCloses.Add(1)
			if !sw.goaway && !hc.n.closesByGoaway() {
				_ = hc.conn.Close()
			}
		}
	})
}

// MarkAuthenticated marks the request whose context is ctx (of a server
// Serve set up) as having passed authentication. While its peer is
// penalized, a request refused without the mark closes its connection
// (Serve), and the connection's HTTP/2 reader takes no new stream until
// those it has are marked or ended (Conn.Unsettled). Call it for every
// request the guard lets through, anonymous ones included when callers
// are not identified.
func MarkAuthenticated(ctx context.Context) {
	if st, ok := ctx.Value(authKey{}).(*reqAuth); ok && st.authed.CompareAndSwap(false, true) {
		st.n.settle()
	}
}

// reqAuth is a request's mark of MarkAuthenticated, with its
// connection's count.
type reqAuth struct {
	n      *Conn
	authed atomic.Bool
}

type authKey struct{}

// refusedEarly reports whether status refuses a request for the
// caller's fault: a 4xx, except 408 (the server's timeout), 409 (an MCP
// client's second event stream, which it opens again) and 429 (the
// server's load, which its callers retry).
func refusedEarly(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout &&
		status != http.StatusConflict && status != http.StatusTooManyRequests
}

type connKey struct{}

// httpConn is an HTTP connection's count, and the connection to close;
// pipelined counts its HTTP/1.1 requests read before the answer to the
// one before was written (HTTP1PipelinedMax).
type httpConn struct {
	conn      net.Conn
	n         *Conn
	pipelined atomic.Int32
}

// HTTP1PipelinedMax is how many pipelined requests (sent before the
// answer to the one before: Conn.Pipelined) an HTTP/1.1 connection may
// make: the answer to the last says Connection: close, and what was
// pipelined behind it is dropped. A pipelined request costs the daemon
// its reading, parsing and answer for a few bytes of the client's: the
// re-run of the seventeenth hostile pass's probes pipelined health
// Checks on --http-listen with no token, 64 at a time, 111,000-118,000
// 405s in 15 s, the daemon 2.1-2.4 times the client's CPU, another
// identity's p99 10 -> 74-91 ms, never closed. A first fix closed a
// connection at its 8th refusal in a row, which the eighteenth pass got
// round with one answered GET of the explain page in 8 (no token, plain
// HTTP: 6.5-6.9 times the client's CPU, another identity's p50 4 times);
// an answered request costs the same to read. Browsers, curl, Go's and
// Python's clients do not pipeline, so they are never closed; a client
// that does pays a reconnection per HTTP1PipelinedMax requests. The
// first request of a connection is never counted (the TLS session
// tickets written after the handshake may follow its reading), nor one
// whose bytes the server's reads split and whose rest was read after the
// answer before it was written: a connection gets a few more answers
// than this when its requests cross the server's 4 KB reads.
const HTTP1PipelinedMax = 8

// flushWriter records the answer's status and whether the handler
// flushed it (an event stream), and has the answer of a request refused
// past its caller's rate (past) close the connection (GOAWAY on HTTP/2).
// It keeps the writer's Hijack (HTTP/1.1 upgrades), and Unwrap for
// http.ResponseController.
type flushWriter struct {
	http.ResponseWriter
	flushed atomic.Bool
	status  atomic.Int32
	past    func() bool
	h1      bool
	closing bool // a pipelined request past HTTP1PipelinedMax: close
	// st is the request's mark of authentication; goaway, set by
	// WriteHeader, says its refusal closes the connection (Serve).
	st     *reqAuth
	goaway bool
	// refusing: its refusal was counted in its connection's
	// Conn.refusing, until it ends (Serve).
	refusing bool
	// body is an HTTP/1.1 request's chunked body: answered before its
	// end (unread) or cut for its overhead, the connection is closed,
	// so that net/http does not read what is left of it (up to 256 KiB,
	// chunk by chunk) to keep the connection.
	body *chunkedBody
}

// ChunkedOverhead bounds the bytes an HTTP/1.1 connection may read for a
// chunked request body: past ChunkedSlack, at most this many times the
// body's bytes (chunk sizes, line ends and the TLS records around them
// included). A body sent in one-byte chunks is six bytes on the wire per
// byte of body, each chunk parsed on its own: 64 KiB of them cost the
// daemon 27 times its client's CPU on a kept connection, an authenticated
// caller's requests answered 405, another identity's p50 10 times (the
// nineteenth hostile pass). net/http bounds only a chunk header's own
// overhead (16 bytes a chunk). HTTP clients chunk by their writes, in
// hundreds of bytes or more (a chunk's framing is 5-10 bytes): at a
// ratio of 2 they are never cut; one-byte chunks are cut at about 4 KiB
// of body, 24 KiB on the wire.
const (
	ChunkedOverhead = 2
	ChunkedSlack    = 16 << 10
)

// ErrChunkedOverhead is the read error of a chunked body past
// ChunkedOverhead.
var ErrChunkedOverhead = errors.New("chunked request body: too many bytes of chunk framing for its data (send larger chunks, or a Content-Length)")

// chunkedBody is an HTTP/1.1 request's chunked body, cut with
// ErrChunkedOverhead when its connection has read more than
// ChunkedOverhead times its bytes (past ChunkedSlack) since it began;
// ended records its end (EOF, an error or the cut). HTTP/1.1 reads one
// request at a time, so the connection's bytes since are the request's
// (and up to a read buffer of what follows).
type chunkedBody struct {
	io.ReadCloser
	n     *Conn
	start int64
	got   int64
	cut   atomic.Bool
	ended atomic.Bool
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.cut.Load() {
		return 0, ErrChunkedOverhead
	}
	n, err := b.ReadCloser.Read(p)
	b.got += int64(n)
	if err != nil {
		b.ended.Store(true)
		return n, err
	}
	if wire := b.n.wire.Load() - b.start; wire > ChunkedSlack+ChunkedOverhead*b.got {
		b.cut.Store(true)
		b.ended.Store(true)
		return n, ErrChunkedOverhead
	}
	return n, nil
}

func (w *flushWriter) WriteHeader(code int) {
	first := w.status.CompareAndSwap(0, int32(code))
	if first && !w.h1 && refusedEarly(code) && w.st != nil {
		w.refusing = true
		if w.st.n.catches(!w.st.authed.Load(), w.st.n.refusing.Add(1)) {
			// Serve's rule will close the connection at this refusal,
			// or at one in flight beside it: by GOAWAY, the refusals
			// answered whole (closed at once, the answers under way were
			// cut after their headers: the twenty-fifth to
			// twenty-seventh hostile passes).
			w.goaway = true
			w.st.n.goaway.Store(true)
		}
	}
	if first && (w.goaway || w.past() || w.h1 && (w.closing || w.body != nil && (!w.body.ended.Load() || w.body.cut.Load()))) {
		// net/http closes the connection after an answer that says so:
		// on HTTP/1.1 it reads nothing more of it (what was pipelined
		// is dropped); on HTTP/2 it sends GOAWAY, answers the streams
		// open before it and closes the connection once they end.
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *flushWriter) Write(p []byte) (int, error) {
	if w.status.Load() == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *flushWriter) Flush() {
	w.flushed.Store(true)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *flushWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.flushed.Store(true)
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *flushWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
