package httpguard

import (
	"net/http"
	"time"
)

// StreamCost is what the body budget charges for each request the guard
// lets in, besides its body, from the moment its head is read until its
// answer is written: the memory one request holds whatever it sends (over
// HTTP/2 a stream's goroutine, its request and response buffers, the
// handler's state), measured at 17 to 60 KB a request by the ninth
// hostile pass. Charged at about 1 KiB before (the budget reader's share of
// a blocked read), one identity held 16,384 HTTP/2 streams that each sent
// 1 byte of their bodies (heap +975 MB); at this cost its 16 MiB share
// holds 256 requests, the whole default budget 512.
const StreamCost = 64 << 10

// Write deadlines of the guard's answers. Without them an HTTP/2 client
// that announces a stream window of 0 (or never opens it) keeps every
// answer unsent, and the request that made it, for as long as it likes:
// the ninth pass held 15,000 refused requests, their 401s unsent, with no
// token at all (RSS +300 MB, 150 s past --idle-timeout).
const (
	// RefusalWriteWait bounds the writing of a refusal (a few hundred
	// bytes).
	RefusalWriteWait = 5 * time.Second
	// DefaultWriteWait bounds each write of an answer, and the last
	// one when the handler returns: 4 MiB at about 1 Mbit/s. An event
	// stream (an MCP GET) stays open without a deadline between its
	// writes, but a client that takes none of one for this long loses
	// the stream.
	DefaultWriteWait = 30 * time.Second
)

// boundWriter bounds each write and flush of an answer by wait: the
// deadline is set before and lifted after, so a long-lived answer (an
// event stream, a long tool call) is not cut while it has nothing to
// send, but a client that takes nothing cannot hold it.
type boundWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	wait time.Duration
	h2   bool
	code int // the answer's status, once written (0: none yet)
}

// WriteHeader records the answer's status.
func (b *boundWriter) WriteHeader(code int) {
	if b.code == 0 && code >= 200 {
		b.code = code
	}
	b.ResponseWriter.WriteHeader(code)
}

func newBoundWriter(w http.ResponseWriter, r *http.Request, wait time.Duration) *boundWriter {
	return &boundWriter{ResponseWriter: w, rc: http.NewResponseController(w), wait: wait, h2: r.ProtoMajor >= 2}
}

func (b *boundWriter) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.wait))
	n, err := b.ResponseWriter.Write(p)
	_ = b.rc.SetWriteDeadline(time.Time{})
	return n, err
}

// Flush is http.Flusher's, bounded as Write is.
func (b *boundWriter) Flush() { _ = b.FlushError() }

// FlushError is Flush with its error (http.ResponseController uses it).
func (b *boundWriter) FlushError() error {
	if b.code == 0 {
		// An answer flushed before any header was written is a 200
		// (gRPC writes a trailers-only error so: the twenty-sixth
		// hostile pass's refused gRPC bodies went uncharged).
		b.code = http.StatusOK
	}
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.wait))
	err := b.rc.Flush()
	_ = b.rc.SetWriteDeadline(time.Time{})
	return err
}

// Unwrap is the ResponseWriter under b, for http.ResponseController.
func (b *boundWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// ShortenWriteWait bounds the writes of the answer w is writing (through
// a guard's Wrap) to d each, if that is shorter than the guard's. The
// explain page's answers, served with no token, are written within
// RefusalWriteWait: the twenty-second hostile pass held 256 of them
// unread (an HTTP/2 window of 0) for the guard's 30 s each, renewed
// within the page's rate, and kept its peer's share of the budget full.
// It reports whether it found the guard's writer.
func ShortenWriteWait(w http.ResponseWriter, d time.Duration) bool {
	for {
		switch x := w.(type) {
		case *boundWriter:
			x.wait = min(x.wait, d)
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

// finish bounds what the handler left unsent once it has returned. Over
// HTTP/2 it also sends it, within the deadline, while the request is
// still charged to the budget: net/http would send it after the handler
// returns, when the charge is given back, and a client with a window of
// 0 held the request there. Over HTTP/1.1 a connection carries one
// request at a time (the connection caps bound them) and flushing early
// would turn a Content-Length answer into a chunked one.
func (b *boundWriter) finish() {
	_ = b.rc.SetWriteDeadline(time.Now().Add(b.wait))
	if b.h2 {
		_ = b.rc.Flush()
	}
}

// headOnly is a ResponseWriter that drops the body: a refusal sent when
// the budget has no room for the request is its status and headers only,
// which HTTP/2 flow control does not hold back, so the request ends at
// once whatever window the client announced.
type headOnly struct{ http.ResponseWriter }

func (h headOnly) Write(p []byte) (int, error) { return len(p), nil }

// Refused answers a request refused before the guard sees it (by a
// handler in front of Wrap, such as a Host check) as the guard answers
// its own refusals: charged StreamCost to the peer while it is written,
// its writes bounded by RefusalWriteWait, and with its status and headers
// only when the budget has no room.
func (g Guard) Refused(w http.ResponseWriter, r *http.Request, answer func(http.ResponseWriter)) {
	if g.Budget != nil {
		who := peerOwner(r)
		if !g.Budget.take(who, StreamCost) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(RefusalWriteWait))
			answer(headOnly{w})
			return
		}
		defer g.Budget.give(who, StreamCost)
	}
	bw := newBoundWriter(w, r, RefusalWriteWait)
	defer bw.finish()
	answer(bw)
}
