package listeners

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// tokenHandler answers 401 a request without "Authorization: Bearer
// good" (403 with "Bearer noscope"), and 200 one with it (marked
// authenticated, its body read), counting both.
type tokenHandler struct{ refused, served atomic.Int64 }

func (h *tokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Header.Get("Authorization") {
	case "Bearer good":
	case "Bearer noscope": // a token without the method's scope
		h.refused.Add(1)
		http.Error(w, "not allowed", http.StatusForbidden)
		return
	default:
		h.refused.Add(1)
		http.Error(w, "no valid token", http.StatusUnauthorized)
		return
	}
	rapidreset.MarkAuthenticated(r.Context())
	_, _ = io.Copy(io.Discard, r.Body)
	h.served.Add(1)
}

// rawH2 opens an HTTP/2 connection to addr over TLS and writes, in one
// burst, a trickled request with token (if any: its body left open, as a
// slow upload) and then streams requests with refused (none if ""),
// each with a body of 16 DATA frames of 1 KiB. It reads until the server
// closes the connection, and reports whether it did within wait.
func rawH2(t *testing.T, addr, token, refused string, streams int, wait time.Duration) bool {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a self-signed test server
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	head := func(id uint32, auth string) {
		hb.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: "127.0.0.1"}, {Name: ":path", Value: "/"}, {Name: "content-type", Value: "application/json"}} {
			_ = enc.WriteField(f)
		}
		if auth != "" {
			_ = enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer " + auth})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	id := uint32(1)
	if token != "" {
		head(id, token)
		_ = fr.WriteData(id, false, []byte("{"))
		id += 2
	}
	piece := make([]byte, rapidreset.DataFrameBytes)
	for range streams {
		head(id, refused)
		for f := range 16 {
			_ = fr.WriteData(id, f == 15, piece)
		}
		id += 2
	}
	_ = c.SetDeadline(time.Now().Add(wait))
	go func() { _, _ = c.Write(buf.Bytes()) }()
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout() // EOF or a reset: the server closed it
}

// TestPenalizedConnsOneStreamBeforeAuth: while a peer is penalized, its
// HTTP/2 connection that opens 16 streams with bodies and no token has
// its reads held after the first stream until that one is refused, and
// is closed at that refusal (the twenty-fourth hostile pass: 256 such
// connections from the loopback peer, each closed after 14 refusals and
// opened again at once, cost the daemon 2.4 times the client's CPU and
// 3.9 GB of heap). A connection whose trickled body passed
// authentication has its first 401 or 403 refused all the same, and no
// other (GOAWAY: its upload goes on), and a client with a wrong token
// reads its 401 whole before the close. Not
// penalized, a connection gets its 16 refusals and stays open. An authenticated
// client's streams on the penalized peer are all served.
func TestPenalizedConnsOneStreamBeforeAuth(t *testing.T) {
	h := &tokenHandler{}
	peers := rapidreset.New()
	addr := serveTLSForTest(t, h, peers)

	if rawH2(t, addr, "", "", 16, 3*time.Second) {
		t.Fatal("not penalized: the connection was closed")
	}
	if n := h.refused.Load(); n != 16 {
		t.Fatalf("not penalized: %d requests refused, want 16", n)
	}

	peers.Ended(rapidreset.Local, false, true) // caught: penalized
	for _, tc := range []struct{ token, refused string }{{"", ""}, {"good", ""}, {"good", "noscope"}} {
		h.refused.Store(0)
		// Closed by GOAWAY once its streams have ended: at once
		// without the trickled upload, which it lets go on.
		if closed := rawH2(t, addr, tc.token, tc.refused, 16, 3*time.Second); closed != (tc.token == "") {
			t.Fatalf("penalized, %+v: closed %v, want %v", tc, closed, tc.token == "")
		}
		if n := h.refused.Load(); n != 1 {
			t.Errorf("penalized, %+v: %d requests refused on one connection, want 1", tc, n)
		}
	}

	// A client whose token is wrong reads its refusal whole, though its
	// connection is closed after it (the twenty-fifth hostile pass: only
	// the headers came, then the connection's end).
	wrong := h2ClientForTest(10 * time.Second)
	defer wrong.CloseIdleConnections()
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := wrong.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(b, []byte("no valid token")) {
			t.Fatalf("penalized, a wrong token: %d %q, %v; want the 401 whole", resp.StatusCode, b, err)
		}
	}

	client := h2ClientForTest(30 * time.Second)
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 50 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/", bytes.NewReader(make([]byte, 4<<10)))
			req.Header.Set("Authorization", "Bearer good")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && resp.ProtoMajor == 2 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if n := ok.Load(); n != 50 {
		t.Fatalf("penalized peer, authenticated client: %d of 50 answered 200 over HTTP/2", n)
	}
}
