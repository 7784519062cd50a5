package httpguard

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/server"
)

// TestStreamCharge: a request the guard lets in holds StreamCost of its
// caller's share until its handler returns; once the share holds no more,
// the next request of that caller is refused 429 with no body (a status
// line that no HTTP/2 window holds back), another caller's goes through,
// and everything is given back afterwards.
func TestStreamCharge(t *testing.T) {
	b := NewBudget(8*StreamCost, 2*StreamCost)
	in, release := make(chan struct{}), make(chan struct{})
	g := Guard{
		Auth:    func(r *http.Request) (server.Caller, error) { return server.Caller{Name: r.Header.Get("Who")}, nil },
		MaxBody: 1 << 20, Budget: b, Refuse: WriteRPCError,
	}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hold") != "" {
			in <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	serve := func(who string, hold bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("Who", who)
		if hold {
			r.Header.Set("Hold", "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	done := make(chan struct{})
	for range 2 {
		go func() { serve("alice", true); done <- struct{}{} }()
		<-in
	}
	if got := b.Used(); got != 2*StreamCost {
		t.Fatalf("two requests in their handlers hold %d bytes, want %d", got, 2*StreamCost)
	}
	w := serve("alice", false)
	if w.Code != http.StatusTooManyRequests || w.Body.Len() != 0 {
		t.Errorf("alice's third request: %d %q, want 429 with no body", w.Code, w.Body.String())
	}
	if w := serve("bob", false); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "ok") {
		t.Errorf("bob's request: %d %q, want 200", w.Code, w.Body.String())
	}
	close(release)
	<-done
	<-done
	if got := b.Used(); got != 0 {
		t.Errorf("after the handlers returned the budget holds %d bytes, want 0", got)
	}
	if w := serve("alice", false); w.Code != http.StatusOK {
		t.Errorf("alice's request after hers ended: %d, want 200", w.Code)
	}
}

// TestKeepAliveAfterWriteDeadline: the deadline an answer leaves on an
// HTTP/1.1 connection does not outlive its request: a later request on
// the same connection, past that deadline, still gets its 100 Continue
// (written by net/http before the handler writes) and its answer
// (net/http lifts a connection's write deadline once a request is done).
func TestKeepAliveAfterWriteDeadline(t *testing.T) {
	g := Guard{MaxBody: 1 << 20, Budget: NewBudget(1<<20, 1<<20), Refuse: WriteRPCError, WriteWait: 100 * time.Millisecond}
	srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})))
	defer srv.Close()
	nc, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	for i := range 2 {
		fmt.Fprintf(nc, "POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, "100 Continue") {
			t.Fatalf("request %d: %q %v, want 100 Continue", i, line, err)
		}
		_, _ = br.ReadString('\n')
		_, _ = io.WriteString(nc, "{}")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		time.Sleep(300 * time.Millisecond) // past the last answer's deadline
	}
}
