package rapidreset

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// resetServer is an HTTP/2 server over TLS counting to a fresh Peers:
// a request without an Authorization header is refused 401 at once (as
// the guard does), /block waits for its client, /stream flushes its
// answer and then waits, /busy is refused 429, /pastrate too, past the
// caller's rate (RefusedPastRate), anything else is answered 200.
func resetServer(t *testing.T) (*Peers, *httptest.Server) {
	return resetServerOn(t, false)
}

// resetServerOn is resetServer, its connections said to come from
// remotePeer when remote (else Local).
func resetServerOn(t *testing.T, remote bool) (*Peers, *httptest.Server) {
	t.Helper()
	peers := New()
	ts := httptest.NewUnstartedServer(HeaderMarks(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/forbidden":
			http.Error(w, "no", http.StatusForbidden)
		case "/busy":
			http.Error(w, "busy", http.StatusTooManyRequests)
		case "/pastrate": // refused past the caller's rate, as admission does
			RefusedPastRate(r.Context())
			http.Error(w, "busy", http.StatusTooManyRequests)
		case "/detached": // refused past the rate on a context of its own, as the MCP SDK's requests run
			done := make(chan struct{})
			go func() {
				defer close(done)
				RefusedPastRate(FromHeader(context.Background(), r.Header))
			}()
			<-done
			http.Error(w, "busy", http.StatusTooManyRequests)
		case "/close": // refused, closing the connection, as httpguard refuses a request with a body
			testConn.Store(r.Context().Value(connKey{}).(*httpConn).n)
			w.Header().Set("Connection", "close")
			http.Error(w, "no", http.StatusUnauthorized)
		case "/read": // reads the whole body, as the daemon's handlers do
			testConn.Store(r.Context().Value(connKey{}).(*httpConn).n)
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = fmt.Fprintf(w, "read %d", n)
		case "/active": // the connection's requests under way (Begin), this one among them if it has a body
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = fmt.Fprintf(w, "%d", r.Context().Value(connKey{}).(*httpConn).n.active.Load())
		case "/together": // authenticated, then refused 403 with the others of its group (togetherGate)
			MarkAuthenticated(r.Context())
			g := together.Load()
			g.arrived.Done()
			g.arrived.Wait()
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, "forbidden together")
			g.written.Done()
			g.written.Wait()
		case "/block":
			<-r.Context().Done()
		case "/stream":
			_, _ = io.WriteString(w, "event: x\n\n")
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		default:
			if hc, ok := r.Context().Value(connKey{}).(*httpConn); ok {
				testConn.Store(hc.n)
			}
			_, _ = io.WriteString(w, "ok")
		}
	})))
	ts.EnableHTTP2 = true
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the empty connections' handshakes
	peers.Serve(ts.Config)
	if remote {
		ts.Listener = remoteListener{ts.Listener}
	}
	ts.Listener = peers.Listener(ts.Listener, nil)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return peers, ts
}

// togetherGate holds /together's requests: each writes its refusal once
// every request of the group has arrived, and ends once every one has
// written it.
type togetherGate struct{ arrived, written sync.WaitGroup }

var together atomic.Pointer[togetherGate]

// TestServeConcurrentRefusalsAnsweredWhole: while its peer is penalized,
// a connection whose authenticated requests are refused together (their
// headers written before any of them ends) is closed by GOAWAY at the
// refusal that completes the rule, counting those in flight, and every
// refusal is answered whole; counted from the ended requests alone, the
// connection was closed at once and the answers cut after their headers
// (the twenty-seventh hostile pass: ten 404s at once, no GOAWAY, EOF).
func TestServeConcurrentRefusalsAnsweredWhole(t *testing.T) {
	peers, ts := resetServerOn(t, true)
	peers.Ended(remotePeer, false, true) // caught elsewhere: penalized
	const n = PenalizedEarlyResetsMin + 2
	g := &togetherGate{}
	g.arrived.Add(n)
	g.written.Add(n)
	together.Store(g)
	c := ts.Client()
	if got := get(t, ts, "/", true, 0, 1); got != 1 { // the connection, open
		t.Fatal("the first request was not answered")
	}
	before := peers.HTTPCloses()
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make(chan answer, n)
	for range n {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/together", nil)
			req.Header.Set("Authorization", "Bearer x")
			resp, err := c.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{resp.StatusCode, string(b), err}
		}()
	}
	for range n {
		a := <-answers
		if a.err != nil || a.status != http.StatusForbidden || a.body != "forbidden together" {
			t.Errorf("a refusal among %d at once: %d %q, %v; want 403 answered whole", n, a.status, a.body, a.err)
		}
	}
	waitCloses(t, peers, before+1)
}

// get sends n GETs of path, with a token or not, each abandoned after
// abandon (0: waited for), and counts the answers.
func get(t *testing.T, ts *httptest.Server, path string, token bool, abandon time.Duration, n int) (answered int) {
	t.Helper()
	c := ts.Client()
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		if abandon > 0 {
			time.AfterFunc(abandon, cancel)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		if token {
			req.Header.Set("Authorization", "Bearer x")
		}
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil || abandon > 0 {
				answered++
			}
		}
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) && abandon == 0 {
			t.Logf("%s: %v", path, err)
		}
	}
	return answered
}

// waitCloses waits for the server to count n HTTP connections closed by
// the rule (it counts after the handler returns).
func waitCloses(t *testing.T, peers *Peers, n int64) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); peers.HTTPCloses() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d connections closed by the rule, want %d", peers.HTTPCloses(), n)
		}
	}
}

// TestServeClosesWastefulConnections: an HTTP/2 connection whose
// requests are mostly refused for want of a token (a rapid reset with no
// token: each answered 401 before its reset is read) or abandoned before
// their answer is closed at its EarlyResetsMin-th, and its peer
// penalized; requests answered, or event streams the client ends after
// their answer started, are not counted against it.
func TestServeClosesWastefulConnections(t *testing.T) {
	t.Run("401s", func(t *testing.T) {
		peers, ts := resetServer(t)
		get(t, ts, "/", false, 0, EarlyResetsMin-1)
		time.Sleep(100 * time.Millisecond)
		if peers.HTTPCloses() != 0 || peers.Penalties() != 0 {
			t.Fatalf("after %d refusals: %d closes, %d penalties, want none", EarlyResetsMin-1, peers.HTTPCloses(), peers.Penalties())
		}
		get(t, ts, "/", false, 0, 1)
		waitCloses(t, peers, 1)
		if peers.Penalties() != 1 {
			t.Fatalf("%d penalties after a connection was caught, want 1", peers.Penalties())
		}
	})
	t.Run("403s", func(t *testing.T) {
		peers, ts := resetServer(t)
		get(t, ts, "/forbidden", true, 0, 2*EarlyResetsMin)
		waitCloses(t, peers, 1)
	})
	t.Run("429s are the server's", func(t *testing.T) {
		peers, ts := resetServer(t)
		get(t, ts, "/busy", true, 0, 2*EarlyResetsMin)
		time.Sleep(100 * time.Millisecond)
		if peers.HTTPCloses() != 0 || peers.Penalties() != 0 {
			t.Fatalf("429s: %d closes, %d penalties, want none", peers.HTTPCloses(), peers.Penalties())
		}
	})
	t.Run("401s over HTTP/1.1", func(t *testing.T) {
		peers, ts := resetServer(t)
		tr := ts.Client().Transport.(*http.Transport).Clone()
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		c := &http.Client{Transport: tr}
		for range 2 * EarlyResetsMin {
			resp, err := c.Get(ts.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s %d, want HTTP/1.1 401", resp.Proto, resp.StatusCode)
			}
			resp.Body.Close()
		}
		if peers.HTTPCloses() != 0 || peers.Penalties() != 0 {
			t.Fatalf("HTTP/1.1 401s: %d closes, %d penalties, want none (a client waits for each)", peers.HTTPCloses(), peers.Penalties())
		}
	})
	t.Run("mostly answered", func(t *testing.T) {
		peers, ts := resetServer(t)
		get(t, ts, "/", true, 0, 2*EarlyResetsMin)
		get(t, ts, "/", false, 0, EarlyResetsMin+10)
		get(t, ts, "/stream", true, 50*time.Millisecond, 20)
		time.Sleep(100 * time.Millisecond)
		if peers.HTTPCloses() != 0 || peers.Penalties() != 0 {
			t.Fatalf("a connection mostly answered: %d closes, %d penalties, want none", peers.HTTPCloses(), peers.Penalties())
		}
	})
	// Refusals past the caller's rate are no early resets (they were
	// before the eighteenth pass: a hub's honest callers, refused under
	// overload, had their peer penalized): an HTTP/2 connection of them
	// is never closed, nor its peer penalized.
	t.Run("429s past the caller's rate", func(t *testing.T) {
		peers, ts := resetServer(t)
		get(t, ts, "/pastrate", true, 0, 2*EarlyResetsMin)
		get(t, ts, "/pastrate", true, 0, PeerEarlyResetsMin)
		time.Sleep(100 * time.Millisecond)
		if peers.HTTPCloses() != 0 || peers.Penalties() != 0 {
			t.Fatalf("a connection of 429s past the rate: %d closes, %d penalties, want none", peers.HTTPCloses(), peers.Penalties())
		}
	})
	t.Run("abandoned", func(t *testing.T) {
		peers, ts := resetServer(t)
		get(t, ts, "/block", true, 5*time.Millisecond, 2*EarlyResetsMin) // the client may open a second connection
		waitCloses(t, peers, 1)
	})
}

// TestServeHoldsPenalizedPeers: once the peer is penalized, its new
// connections past the burst wait for a place before their TLS
// handshake, and a connection of it is closed at its
// PenalizedEarlyResetsMin-th early request.
func TestServeHoldsPenalizedPeers(t *testing.T) {
	peers, ts := resetServerOn(t, true)
	peers.Ended(remotePeer, false, true) // caught elsewhere: penalized
	c := ts.Client()
	start := time.Now()
	for i := range PenalizedConnBurst + 2 {
		c.CloseIdleConnections() // a new connection each time
		resp, err := c.Get(ts.URL + "/")
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if took := time.Since(start); took < time.Second/PenalizedConnsPerSecond {
		t.Errorf("%d new connections of a penalized peer served in %v: past the burst of %d, a place is 1/%d s", PenalizedConnBurst+2, took, PenalizedConnBurst, PenalizedConnsPerSecond)
	}
	before := peers.HTTPCloses()
	get(t, ts, "/", false, 0, PenalizedEarlyResetsMin)
	waitCloses(t, peers, before+1)
}

// TestEmptyConnectionsPenalize: connections that carry no request (a TCP
// or TLS handshake, then nothing: the thirteenth hostile pass opened
// 3,900 a second) count as early resets of their peer, which is
// penalized at PeerEarlyResetsMin of them; a connection that carried a
// request does not count.
func TestEmptyConnectionsPenalize(t *testing.T) {
	peers, ts := resetServer(t)
	addr := ts.Listener.Addr().String()
	for range PeerEarlyResetsMin - 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	if peers.Penalties() != 0 {
		t.Fatalf("penalized after %d empty connections, want at %d", PeerEarlyResetsMin-1, PeerEarlyResetsMin)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for end := time.Now().Add(5 * time.Second); peers.Penalties() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not penalized after %d empty connections", PeerEarlyResetsMin)
		}
	}
}

// TestServeClosesHTTP1PastRate: on HTTP/1.1 a request refused past its
// caller's rate is answered Connection: close and its connection closed,
// with the requests pipelined behind it unread (the sixteenth hostile
// pass pipelined 64 small Routes at a time, mostly refused 429); a
// refusal within the rate (429) and an answer keep the connection. It
// touches that connection only: its peer is never penalized, however
// many such refusals (a hub's callers each reconnecting after theirs).
func TestServeClosesHTTP1PastRate(t *testing.T) {
	peers, ts := resetServer(t)
	pipeline := func(paths ...string) ([]int, []bool) {
		t.Helper()
		return pipelineHTTP1(t, ts, "Authorization: Bearer x\r\n", paths...)
	}
	st, cl := pipeline("/", "/busy", "/", "/")
	if len(st) != 4 || st[1] != http.StatusTooManyRequests || cl[1] {
		t.Fatalf("pipelined /, /busy, /, /: statuses %v, closing %v; want 4 answers, the 429 keeping the connection", st, cl)
	}
	st, cl = pipeline("/", "/pastrate", "/", "/")
	if len(st) != 2 || st[1] != http.StatusTooManyRequests || !cl[1] {
		t.Fatalf("pipelined /, /pastrate, /, /: statuses %v, closing %v; want 2 answers, the second 429 with Connection: close, then the connection closed", st, cl)
	}
	// The MCP SDK runs a request on a context of its own: the mark is
	// found by the request's header map (HeaderMarks, FromHeader).
	st, cl = pipeline("/", "/detached", "/", "/")
	if len(st) != 2 || st[1] != http.StatusTooManyRequests || !cl[1] {
		t.Fatalf("pipelined /, /detached, /, /: statuses %v, closing %v; want 2 answers, the second 429 with Connection: close, then the connection closed", st, cl)
	}
	if got := FromHeader(context.Background(), http.Header{"A": {"b"}}); got.Value(refusedKey{}) != nil {
		t.Fatal("FromHeader marked a context for a header no request being served has")
	}
	for i := range PeerEarlyResetsMin + 8 {
		if st, cl := pipeline("/pastrate"); len(st) != 1 || !cl[0] {
			t.Fatalf("connection %d, /pastrate: statuses %v, closing %v; want one 429 with Connection: close", i, st, cl)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if peers.Penalties() != 0 || peers.HTTPCloses() != 0 {
		t.Fatalf("%d connections of one refusal past the rate each: %d penalties, %d closes by the rule, want none", PeerEarlyResetsMin+9, peers.Penalties(), peers.HTTPCloses())
	}
}

// pipelineHTTP1 sends paths as GET requests pipelined on one new
// HTTP/1.1 connection to ts, each with the header lines hdr, and returns
// the statuses of the answers read before the connection closed, and
// whether each said Connection: close.
func pipelineHTTP1(t *testing.T, ts *httptest.Server, hdr string, paths ...string) (statuses []int, closes []bool) {
	t.Helper()
	nc, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var req []byte
	for _, p := range paths {
		req = append(req, "GET "+p+" HTTP/1.1\r\nHost: x\r\n"+hdr+"\r\n"...)
	}
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for range paths {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break // closed
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		closes = append(closes, resp.Close) // Connection: close (taken out of the header)
	}
	return statuses, closes
}

// TestServeClosesHTTP1Pipelined: an HTTP/1.1 connection that pipelines
// (sends a request before the answer to the one before) is closed by the
// answer to its HTTP1PipelinedMax-th pipelined request, whatever the
// answers (the re-run of the seventeenth hostile pass pipelined 405s 64
// at a time, never closed; the eighteenth got round a close at 8
// refusals in a row with one answered request in 8); a client that waits
// for each answer is never closed, and the peer is never penalized.
func TestServeClosesHTTP1Pipelined(t *testing.T) {
	peers, ts := resetServer(t)
	const tok = "Authorization: Bearer x\r\n"
	many := make([]string, 3*HTTP1PipelinedMax)
	for i := range many {
		many[i] = "/"
		if i%8 != 7 {
			many[i] = "/forbidden"
		}
	}
	for _, hdr := range []string{"", tok} {
		st, cl := pipelineHTTP1(t, ts, hdr, many...)
		if len(st) != HTTP1PipelinedMax+1 || !cl[len(cl)-1] || slices.Contains(cl[:len(cl)-1], true) {
			t.Fatalf("%d pipelined requests (token %q): statuses %v, closing %v; want %d answers, the last closing", len(many), hdr, st, cl, HTTP1PipelinedMax+1)
		}
	}
	// One at a time on one connection: never closed, answered or refused.
	nc, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	for i, p := range many {
		if _, err := io.WriteString(nc, "GET "+p+" HTTP/1.1\r\nHost: x\r\n"+tok+"\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d of one at a time: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			t.Fatalf("request %d of one at a time (%s, %d) closed the connection", i, p, resp.StatusCode)
		}
	}
	if peers.Penalties() != 0 || peers.HTTPCloses() != 0 {
		t.Fatalf("pipelining on HTTP/1.1: %d penalties, %d closes by the rule; want none", peers.Penalties(), peers.HTTPCloses())
	}
}

// TestChunkedBodiesBounded: an HTTP/1.1 request body in one-byte
// chunks is read no further than its framing's bound, whatever the
// handler does with it. net/http's own body.Close (after an answer that
// closes the connection) and its drain before an answer that keeps it
// each read up to 256 KiB of a chunked body, and net/http bounds only a
// chunk header's overhead: one-byte chunks cost the daemon 26-37 times
// its client's CPU, with no token or with one (the nineteenth hostile
// pass).
// testConn is the connection of the latest request to /close or to the
// default path of resetServer's handler.
var testConn atomic.Pointer[Conn]

func TestChunkedBodiesBounded(t *testing.T) {
	_, ts := resetServer(t)
	for _, c := range []struct {
		path   string
		chunk  int
		status int
		closes bool
	}{
		{"/close", 1, http.StatusUnauthorized, true}, // refused, closing: nothing more read
		{"/ok", 1, http.StatusOK, true},              // answered unread: closed, not drained
		{"/read", 1, http.StatusBadRequest, true},    // read: cut for its framing
		{"/read", 4096, http.StatusOK, false},        // an honest client's chunks: read whole, kept
	} {
		nc, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(60 * time.Second))
		if _, err := io.WriteString(nc, "POST "+c.path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// Chunks until a write fails (the server closed) or 512 KiB of
		// body have gone, then the last chunk.
		send := func() int {
			sent := 0
			chunk := fmt.Appendf(nil, "%x\r\n%s\r\n", c.chunk, bytes.Repeat([]byte("x"), c.chunk))
			batch := bytes.Repeat(chunk, max(1, 1024/c.chunk))
			per := len(batch) / len(chunk) * c.chunk
			for sent < 512<<10 {
				if _, err := nc.Write(batch); err != nil {
					return sent
				}
				sent += per
			}
			_, _ = io.WriteString(nc, "0\r\n\r\n")
			return sent
		}
		br := bufio.NewReader(nc)
		sent := -1
		if c.path != "/read" {
			// Answered before the body is read: the answer first, then
			// the body for as long as the server takes it.
			_, _ = io.WriteString(nc, "1\r\nx\r\n")
		}
		sentc := make(chan int, 1)
		if c.path == "/read" {
			go func() { sentc <- send() }()
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if c.path == "/read" {
			sent = <-sentc
		} else {
			sent = send()
		}
		nc.Close()
		// What the server read of the connection once it closed it
		// (socket buffers take more than it reads).
		for wait := time.Now().Add(20 * time.Second); !testConn.Load().done.Load() && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s, %d-byte chunks: %d %q, closing %v; %d KiB of body sent, %d KiB of the connection read", c.path, c.chunk, resp.StatusCode, bytes.TrimSpace(msg), resp.Close, sent>>10, testConn.Load().wire.Load()>>10)
		if resp.StatusCode != c.status || resp.Close != c.closes {
			t.Fatalf("%s, %d-byte chunks: %d, closing %v; want %d, closing %v", c.path, c.chunk, resp.StatusCode, resp.Close, c.status, c.closes)
		}
		switch {
		case c.chunk == 1 && testConn.Load().wire.Load() >= 128<<10:
			// net/http's reading would have taken 256 KiB of body, 1.5 MB
			// on the wire, before closing.
			t.Fatalf("%s: the server read %d KiB of the connection", c.path, testConn.Load().wire.Load()>>10)
		case c.status == http.StatusBadRequest && !bytes.Contains(msg, []byte("chunk framing")):
			t.Fatalf("%s: %q, want the framing's refusal", c.path, msg)
		case c.status == http.StatusOK && c.path == "/read" && string(msg) != fmt.Sprintf("read %d", 512<<10):
			t.Fatalf("%s: %q, want the whole body read", c.path, msg)
		}
	}
}

// TestServeClosesHTTP2PastRate: on HTTP/2 the answer to a request
// refused past its caller's rate has net/http send GOAWAY, so the
// client's next request goes on a new connection (the twenty-first
// hostile pass: MCP requests past a caller's rate over HTTP/2, 12,000
// refusals a second on four connections, never closed); a refusal
// within the rate and an answer keep the connection, and the peer is
// never penalized.
func TestServeClosesHTTP2PastRate(t *testing.T) {
	peers, ts := resetServer(t)
	c := ts.Client()
	do := func(path string) (status int, reused bool) {
		t.Helper()
		var got httptrace.GotConnInfo
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got = i }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s answered over %s, want HTTP/2", path, resp.Proto)
		}
		return resp.StatusCode, got.Reused
	}
	do("/")
	if st, r := do("/busy"); st != http.StatusTooManyRequests || !r {
		t.Fatalf("/busy: %d, reused %v; want 429 on the open connection", st, r)
	}
	if _, r := do("/"); !r {
		t.Fatal("a refusal within the rate closed the connection")
	}
	for i := range 3 {
		if st, _ := do("/pastrate"); st != http.StatusTooManyRequests {
			t.Fatalf("/pastrate: %d, want 429", st)
		}
		if _, r := do("/"); r {
			t.Fatalf("refusal %d past the rate: the next request went on the same connection", i)
		}
	}
	if _, r := do("/detached"); !r {
		t.Fatal("/detached did not go on the connection opened after the last refusal")
	}
	if _, r := do("/"); r {
		t.Fatal("a refusal past the rate on the MCP SDK's own context kept the connection")
	}
	if peers.Penalties() != 0 {
		t.Fatalf("refusals past the rate penalized the peer %d times", peers.Penalties())
	}
}

// TestServeBodiesUnderWay: a request counts as under way on its
// connection (Conn.Begin, for the peer's spare of cheap frames) while
// its handler runs only if it has a body to read: a GET held by a
// client that takes none of its answer serves nothing the spare is for
// (the twenty-second hostile pass held window-0 GETs to earn it).
func TestServeBodiesUnderWay(t *testing.T) {
	_, ts := resetServer(t)
	c := ts.Client()
	for _, tc := range []struct {
		method string
		body   io.Reader
		want   string
	}{
		{http.MethodGet, nil, "0"},
		{http.MethodPost, strings.NewReader("a body"), "1"},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+"/active", tc.body)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != tc.want {
			t.Errorf("%s /active: %q under way, want %s", tc.method, got, tc.want)
		}
	}
}
