package listeners

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// MaxHeadLines bounds the lines of a request head (request line and header
// fields) on a plaintext HTTP listener, counted as the head arrives: past
// it the connection gets a 431 and is closed, before net/http has parsed
// more. net/http bounds a head only by its bytes (MaxHeaderBytes), and
// keeps each header field it parses as a map entry and strings (about 100
// bytes a field), so 64 KiB of fields of a few bytes ("h1: a") is 6,500
// fields and 0.6 MB held while the head is incomplete, for up to
// ReadHeaderTimeout, before any token is checked: the eleventh hostile
// pass raised the daemon's RSS from 249 to 858 MB with 1,000 such heads
// from one address and no token (64 MB sent). Browsers, curl and the API's
// clients send a few dozen fields; Envoy refuses more than 100.
const MaxHeadLines = 256

// errHeadLines ends a connection whose head has more than MaxHeadLines
// lines.
var errHeadLines = errors.New("request head: too many lines")

// headLinesRefusal is what a connection past MaxHeadLines is told before
// it is closed.
const headLinesRefusal = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 50\r\n\r\nrequest head holds more than 256 header fields\r\n\r\n"

// limitHeadLines serves hs on a plaintext lis with each connection's
// request heads bounded by MaxHeadLines: it wraps the connections and
// hooks hs.ConnState, which tells a connection its next head begins.
func limitHeadLines(hs *http.Server, lis net.Listener) net.Listener {
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		if hc, ok := c.(*headConn); ok && st == http.StateIdle {
			hc.nextHead()
		}
		if prev != nil {
			prev(c, st)
		}
	}
	return headListener{lis}
}

type headListener struct{ net.Listener }

func (l headListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	switch c.(type) {
	case *headConn, *h2Conn: // counted already, or HTTP/2 (serveTLS)
		return c, nil
	}
	return &headConn{Conn: c, inHead: true}, nil
}

// headConn counts the lines of a request head as the server reads it:
// from the connection's start, and again each time the server has
// finished a request (StateIdle), up to the blank line that ends the head.
// What follows (a body) is not counted. Bytes of a pipelined next head
// read with the previous request's (net/http's 4 KiB read buffer) are not
// counted either: a head may pass the bound by what 4 KiB holds, no more.
type headConn struct {
	net.Conn

	// tls is the connection's TLS state when it is an HTTP/1.1
	// connection over TLS (serveTLS), nil on plaintext.
	tls *tls.ConnectionState

	mu     sync.Mutex
	inHead bool
	lines  int
	lastNL bool // the last byte other than CR seen in the head was LF
}

// NetConn is the connection underneath (rapidreset.ConnOf finds its
// count through it).
func (c *headConn) NetConn() net.Conn { return c.Conn }

func (c *headConn) nextHead() {
	c.mu.Lock()
	c.inHead, c.lines, c.lastNL = true, 0, false
	c.mu.Unlock()
}

func (c *headConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	over := c.inHead && c.scan(p[:n])
	c.mu.Unlock()
	if over {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(RefusalWait))
		_, _ = c.Conn.Write([]byte(headLinesRefusal))
		_ = c.Conn.Close()
		return 0, errHeadLines
	}
	return n, err
}

// RefusalWait bounds the write of a refusal from a connection's wrapper.
const RefusalWait = 5 * time.Second

// scan counts the lines in b, a part of a head; it reports whether the
// head is past MaxHeadLines. At the blank line the head ends.
func (c *headConn) scan(b []byte) bool {
	for _, x := range b {
		switch x {
		case '\n':
			if c.lastNL {
				c.inHead = false
				return false
			}
			c.lastNL = true
			// The request line is a line of the head too.
			if c.lines++; c.lines > MaxHeadLines+1 {
				return true
			}
		case '\r':
		default:
			c.lastNL = false
		}
	}
	return false
}

// serveTLS serves hs on lis over TLS with the request heads of HTTP/1.1
// connections bounded by MaxHeadLines as on plaintext: the lines can only
// be counted above TLS, so the listener makes the handshake itself and
// hands net/http an HTTP/2 connection as the *tls.Conn it expects, and an
// HTTP/1.1 one wrapped in the counter. net/http takes a wrapped
// connection for plaintext, so its TLS state goes with the connection's
// context (ConnContext) and back into each request's r.TLS (withTLSState),
// where the client certificate is read. Over TLS, before this, 1,000
// never-ended heads of tiny fields with no token raised the daemon's RSS
// from 226 to 419 MB (the eleventh hostile pass). HTTP/2 heads are
// bounded by net/http's own header list size.
//
// An HTTP/2 connection is handed on as an *h2Conn, which holds its
// client's cheap frames to their rate above TLS
// (rapidreset.FrameBudget): net/http takes it
// for an unencrypted connection and serves it as HTTP/2 from its preface
// (Protocols' UnencryptedHTTP2, on this TLS server only: the plaintext
// listeners still do not speak h2c), its TLS state carried as an
// HTTP/1.1 connection's is.
func serveTLS(hs *http.Server, lis net.Listener) error {
	cfg := hs.TLSConfig.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	// net/http configures HTTP/2 in Serve when its TLSConfig offers h2.
	hs.TLSConfig = cfg
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	hs.Protocols = &protos
	prevCtx := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		switch c := c.(type) {
		case *headConn:
			if c.tls != nil {
				ctx = context.WithValue(ctx, tlsStateKey{}, c.tls)
			}
		case *h2Conn:
			ctx = context.WithValue(ctx, tlsStateKey{}, c.tls)
			ctx = context.WithValue(ctx, h2ConnKey{}, c)
		}
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		return ctx
	}
	hs.Handler = withTLSState(hs.Handler)
	hl := newHandshakeListener(lis, cfg, hs.ReadHeaderTimeout)
	return hs.Serve(limitHeadLines(hs, hl))
}

// tlsStateKey keys a wrapped TLS connection's state in its context;
// h2ConnKey, an HTTP/2 connection's *h2Conn.
type (
	tlsStateKey struct{}
	h2ConnKey   struct{}
)

// withTLSState gives a request on a wrapped HTTP/1.1 TLS connection its
// r.TLS, as net/http does for a *tls.Conn; on an HTTP/2 one it counts
// the body bytes the handlers read to the connection (h2Conn.bodyRead).
func withTLSState(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		if c, ok := r.Context().Value(h2ConnKey{}).(*h2Conn); ok && r.Body != nil && r.Body != http.NoBody {
			r.Body = &bodyCount{ReadCloser: r.Body, n: &c.bodyRead}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyCount counts the bytes read from a request's body into n.
type bodyCount struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *bodyCount) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// handshakeListener accepts connections and makes their TLS handshakes,
// each in its own goroutine within timeout (a client that never finishes
// one holds no other back), and hands them on: an HTTP/2 connection as
// an *h2Conn holding its cheap frames to their rate, an HTTP/1.1 one as a *headConn counting its heads' lines
// (limitHeadLines' Accept leaves a *headConn as it is).
type handshakeListener struct {
	net.Listener
	cfg     *tls.Config
	timeout time.Duration
	ready   chan net.Conn
	done    chan struct{}
	errc    chan error
	once    sync.Once
}

func newHandshakeListener(lis net.Listener, cfg *tls.Config, timeout time.Duration) *handshakeListener {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	l := &handshakeListener{Listener: lis, cfg: cfg, timeout: timeout, ready: make(chan net.Conn),
		done: make(chan struct{}), errc: make(chan error, 1)}
	go l.acceptLoop()
	return l
}

func (l *handshakeListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			select {
			case l.errc <- err:
			case <-l.done:
			}
			return
		}
		go l.handshake(c)
	}
}

func (l *handshakeListener) handshake(raw net.Conn) {
	tc := tls.Server(raw, l.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		// As net/http does: plain HTTP sent to the TLS port is told so.
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			_ = re.Conn.SetWriteDeadline(time.Now().Add(RefusalWait))
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		}
		_ = raw.Close()
		return
	}
	st := tc.ConnectionState()
	// An HTTP/1.1 connection is scanned too: net/http serves HTTP/2 on
	// any of them that opens with its preface (serveTLS). The scanner
	// is off from its first byte otherwise.
	var c net.Conn = newH2Conn(tc, &st)
	if st.NegotiatedProtocol != "h2" {
		c = &headConn{Conn: c, inHead: true, tls: &st}
	}
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// looksLikeHTTP reports whether a TLS record header is the start of a
// plain HTTP request.
func looksLikeHTTP(h [5]byte) bool {
	switch string(h[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		l.errc <- err // every later Accept fails too
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handshakeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// h2Conn is an HTTP/2 connection over TLS (serveTLS): what TLS deciphers
// is read a record at a time into rd (net/http's HTTP/2 server reads a
// frame's header, then its payload, straight from its connection),
// scanned for its client's frames (rapidreset.H2Scan), and held to the
// cheap frames' budget (rapidreset.FrameBudget, credited with the
// requests its handlers saw and the bytes written): past it a read
// waits. It has no ConnectionState method, so that net/http serves it as
// the HTTP/2 its preface says (serveTLS).
//
// The DATA frames are charged to the budget too, one frame for each
// DataFrameBytes of their size (H2Scan.Data) that no handler read
// (settled): a body its handler reads costs nothing, whatever its
// frames' size, and one it never reads pays. (Charged a frame each,
// bodies of 16 KiB frames no handler read still took a core over 64
// connections, another identity's Route p99 140 ms.) The twentieth
// hostile pass's re-check sent bodies of 64 KiB in DATA frames of 1 KiB
// with no token over 64 connections: each request refused 401 from its
// headers, its body read all the same (net/http takes a stream's DATA
// into its buffer until the handler has returned, then discards it,
// and answers a frame on a stream it has closed with a RST_STREAM), at
// 2.5-4.2 times the client's CPU, another identity's Route p99 114-350
// ms. Most of those frames arrive while their stream is still open (the
// RST_STREAMs the client read were 0.1-20% of its frames): counting the
// server's RST_STREAMs would not have caught them, counting what no
// handler reads does.
//
// What no handler has read is charged as it arrives: the charge is the
// most that was ever unread on the connection, not a sum, so a body read
// keeps it where it was, and an honest connection pays once for as far
// as its handlers' reads ever lagged (flow control: H2ConnWindow at
// most, a quarter of net/http's default and the budget's burst in
// frames of DataFrameBytes), while a body never read is charged in
// full. Charged as they arrived and credited as a handler read them
// (credits past the burst are lost), the frames of an upload of 16 MiB
// were held 29-35 times on a machine with both cores taken, each time
// its handler lagged (TestH2BodyReadCredits). Charged only at a
// stream's end, the refused bodies above came at 3 times the rate and
// took 3.5 times the daemon's CPU: each connection's frames were handled
// before they were charged, and the early-reset rule closed it before
// it waited for them. An allowance of unread DATA while a handler was
// reading a body of the connection did the same (the twenty-third
// hostile pass: one body trickled a byte every 200 ms kept it open, and
// 401'd bodies on the connection's other streams went uncharged until
// it closed: 2.4-3.5 times the client's CPU, RSS to 4 GB). Each
// RST_STREAM the server writes is charged as a frame as well (writes):
// once the reads are held, a refused stream is closed before the rest
// of its body comes, and net/http answers each frame of it with a
// RST_STREAM of its own, a write and a flush of a TLS record (13% of
// the daemon's CPU left in that probe, 88,000 RST_STREAMs in 10 s).
type h2Conn struct {
	net.Conn // the *tls.Conn
	tls      *tls.ConnectionState
	n        *rapidreset.Conn // nil when the listener counts no resets
	// rd, scan and budget are used by one reader at a time: net/http's
	// read of the preface, then the HTTP/2 server's frame reader.
	rd       *bufio.Reader
	scan     rapidreset.H2Scan
	budget   rapidreset.FrameBudget
	wrote    atomic.Int64
	bodyRead atomic.Int64 // request body bytes its handlers read
	// settled is the DATA charged (in DataFrameBytes): the most the
	// connection's DATA ran ahead of its handlers' reads. The reader's.
	settled int64
	// h2 is set once the client's preface has been read whole (its
	// reader): what the server writes after it is HTTP/2 frames, which
	// writes scans, under wmu, counting its RST_STREAMs into resets.
	h2       atomic.Bool
	wmu      sync.Mutex
	writes   rapidreset.H2Writes
	resets   atomic.Int64
	gone     chan struct{}
	goneOnce sync.Once
}

// h2ReadBuffer holds a TLS record's plaintext (16 KiB at most).
const h2ReadBuffer = 16 << 10

func newH2Conn(tc *tls.Conn, st *tls.ConnectionState) *h2Conn {
	c := &h2Conn{Conn: tc, tls: st, n: rapidreset.ConnOf(tc), gone: make(chan struct{})}
	c.rd = bufio.NewReaderSize(h2Records{c}, h2ReadBuffer)
	return c
}

func (c *h2Conn) Read(p []byte) (int, error) { return c.rd.Read(p) }

// h2Records reads c's TLS connection, a record at a time into c.rd.
// While c's peer is penalized, it reads no record past one that opened a
// stream until that stream has passed authentication or ended
// (rapidreset.Conn.Unsettled). A connection closed by GOAWAY (Serve) is
// read on: its streams still under way (an authenticated upload, an
// event stream) end as they would, and it closes once they have (the
// twenty-sixth hostile pass: its reads stopped, an upload beside a
// refused favicon got no answer).
type h2Records struct{ c *h2Conn }

func (r h2Records) Read(p []byte) (int, error) {
	c := r.c
	if c.n.Unsettled(c.scan.Blocks()) && !c.n.AwaitSettled(c.scan.Blocks(), c.gone) {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(p)
	c.scan.Feed(p[:n], 0)
	if !c.h2.Load() && c.scan.HTTP2() {
		c.h2.Store(true)
	}
	if c.scan.NotHTTP2() && c.tls.NegotiatedProtocol == "h2" {
		// h2 negotiated, then something else: net/http would serve it
		// as HTTP/1.1, outside the head's line count (headConn), which
		// only a connection that negotiated HTTP/1.1 gets (RFC 9113
		// 3.3: over TLS, HTTP/2 is what ALPN's h2 means).
		_ = c.Close()
		return 0, net.ErrClosed
	}
	var requests int64
	if c.n != nil {
		requests = c.n.Requests()
	} else {
		requests = c.scan.Blocks()
	}
	if !c.n.Hold(&c.budget, c.Conn, c.gone, c.charged(), requests, c.wrote.Load()) {
		_ = c.Close()
		return 0, net.ErrClosed
	}
	return n, err
}

// charged is what the frames read so far cost the connection's budget:
// every frame but a large DATA frame one each, the DATA by its size as
// far as no handler read it (settled), and each RST_STREAM the server
// wrote once more. The reader's.
func (c *h2Conn) charged() int64 {
	c.settled = max(c.settled, (c.scan.Data()-c.bodyRead.Load())/rapidreset.DataFrameBytes)
	return c.scan.Cheap() + c.settled + c.resets.Load()
}

func (c *h2Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.wrote.Add(int64(n))
	if n > 0 && c.h2.Load() {
		c.wmu.Lock()
		c.writes.Feed(p[:n])
		c.resets.Store(c.writes.Resets())
		c.wmu.Unlock()
	}
	return n, err
}

func (c *h2Conn) Close() error {
	c.goneOnce.Do(func() { close(c.gone) })
	return c.Conn.Close()
}

// NetConn is the TLS connection (rapidreset.ConnOf finds its count
// through it).
func (c *h2Conn) NetConn() net.Conn { return c.Conn }
