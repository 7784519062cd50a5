package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/server"
)

// The third hostile pass's findings made repeatable (tools/hostile has
// the probes): request heads that are held before any token is checked,
// and DNS rebinding of the HTTP/JSON listener.

// headerLines is n header lines of about 1 KB each, for a request head.
func headerLines(n int) map[string]string {
	h := map[string]string{}
	pad := strings.Repeat("a", 1000)
	for i := range n {
		h[fmt.Sprintf("X-Pad-%04d", i)] = pad
	}
	return h
}

// grpcHeaderBlock opens a raw HTTP/2 connection to a gRPC listener and
// starts a call with no token whose header block holds size bytes of
// header fields: ended (END_HEADERS) when end is set, else left open as a
// client that never finishes it. It returns the connection and what the
// server answered the call (its grpc-status, a RST_STREAM's code, or how
// the connection ended); with end unset the answer is read only once the
// block is sent.
func grpcHeaderBlock(t *testing.T, addr string, size int, end bool) (net.Conn, <-chan string) {
	t.Helper()
	nc, fr := rawH2(t, addr)
	answer := make(chan string, 1)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	encodeRouteHead(enc, addr)
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes()}); err != nil {
		t.Fatal(err)
	}
	// Never-indexed literals of letters the Huffman code shortens: about
	// 10 KB on the wire for every 16 KB held decoded.
	val := strings.Repeat("a", 16000)
	for i, sent := 0, 0; sent < size; i++ {
		hb.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: val, Sensitive: true})
		sent += 16000
		if err := fr.WriteContinuation(1, end && sent >= size, hb.Bytes()); err != nil {
			answer <- "closed while the block was sent"
			return nc, answer
		}
	}
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				answer <- "connection closed"
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == "grpc-status" {
						answer <- "grpc-status " + h.Value
						return
					}
				}
			case *http2.RSTStreamFrame:
				answer <- "rst " + f.ErrCode.String()
				return
			case *http2.GoAwayFrame:
				answer <- "goaway " + f.ErrCode.String()
				return
			}
		}
	}()
	return nc, answer
}

// TestHostileRequestHeads: a request's head is held before the token in
// it is checked, so every listener bounds it at 64 KiB. gRPC's default
// was 16 MiB of HPACK-decoded metadata (60 connections that never ended a
// header block, with no token: +888 MB until --idle-timeout) and the MCP
// and metrics listeners' was net/http's 1 MiB (300 connections: +331 MB
// for 10 s at a time).
func TestHostileRequestHeads(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,sessions "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proxyTokens := filepath.Join(dir, "proxy-tokens")
	if err := os.WriteFile(proxyTokens, []byte("alice route,call "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, mcpAddr, metricsAddr, proxyAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens,
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr, "--metrics-listen", metricsAddr)
	waitFor(t, d, "classifierd serving HTTP/JSON")
	config, _ := proxySetup(t)
	px := startProxyHTTP(t, config, proxyAddr, "--auth-token-file", proxyTokens)
	pid := d.cmd.Process.Pid

	t.Run("a head over 64 KiB is 431 on every HTTP listener", func(t *testing.T) {
		for _, s := range []struct{ name, addr, method, path string }{
			{"HTTP/JSON", httpAddr, "POST", "/classifier.v1.ClassifierService/Route"},
			{"daemon MCP", mcpAddr, "POST", listeners.MCPPath},
			{"proxy MCP", proxyAddr, "POST", listeners.MCPPath},
			{"metrics", metricsAddr, "GET", "/metrics"},
		} {
			t.Run(s.name, func(t *testing.T) {
				h := headerLines(100)
				h["Content-Type"] = "application/json"
				code, _, body := rawRequest{method: s.method, path: s.path, header: h, body: []byte("{}")}.do(t, s.addr)
				if code != 431 {
					t.Errorf("100 KB of header lines, no token: got %d %.200q, want 431", code, body)
				}
			})
		}
	})

	t.Run("gRPC: a header block over server.MaxHeaderListBytes is refused", func(t *testing.T) {
		// Under the bound, the tap answers the missing token; over it,
		// grpc-go drops the connection before the call is read.
		for _, tc := range []struct {
			size int
			want []string
		}{{server.MaxHeaderListBytes / 2, []string{"grpc-status 16"}}, {server.MaxHeaderListBytes + 1<<10, []string{"rst ", "goaway ", "connection closed", "closed while"}}, {200 << 10, []string{"rst ", "goaway ", "connection closed", "closed while"}}} {
			nc, answer := grpcHeaderBlock(t, d.addr, tc.size, true)
			select {
			case got := <-answer:
				if !slices.ContainsFunc(tc.want, func(w string) bool { return strings.HasPrefix(got, w) }) {
					t.Errorf("a %d KB header block with no token: got %q, want one of %q", tc.size>>10, got, tc.want)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("a %d KB header block with no token: no answer in 20 s", tc.size>>10)
			}
			nc.Close()
		}
	})

	t.Run("memory", func(t *testing.T) {
		meter := startPeakMeter(t, pid)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var held []net.Conn
		hold := func(c net.Conn) {
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
		// 20 gRPC connections, each a header block of 12 MB decoded
		// that never ends.
		for range 20 {
			wg.Go(func() {
				nc, _ := grpcHeaderBlock(t, d.addr, 12<<20, false)
				hold(nc)
			})
		}
		// 150 MCP connections, each about 1 MB of header lines that
		// never end.
		for range 150 {
			wg.Go(func() {
				nc, err := net.Dial("tcp", mcpAddr)
				if err != nil {
					return
				}
				hold(nc)
				var b strings.Builder
				fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\n", listeners.MCPPath, mcpAddr)
				for k, v := range headerLines(1000) {
					fmt.Fprintf(&b, "%s: %s\r\n", k, v)
				}
				_, _ = nc.Write([]byte(b.String()))
			})
		}
		wg.Wait()
		time.Sleep(2 * time.Second) // what arrived is read
		grew, how := meter.growth()
		for _, c := range held {
			c.Close()
		}
		t.Logf("20 gRPC header blocks of 12 MB and 150 MCP heads of 1 MB, never ended, no token: +%d MB (%s)", grew>>20, how)
		if grew > 50<<20 {
			t.Errorf("the daemon's memory grew by %d MB, want at most 50 MB", grew>>20)
		}
	})
	if strings.Contains(d.stderr.String(), aliceToken) || strings.Contains(px.stderr.String(), aliceToken) {
		t.Error("a token reached the log")
	}
}

// TestHostileDNSRebinding: without a token file, a web page that points
// its own host name at 127.0.0.1 (DNS rebinding) is the daemon's caller
// with every scope, and the browser lets it read the answers. The
// HTTP/JSON listener on loopback refuses a Host that names no loopback
// address, as the MCP listener (the MCP SDK) does; localhost and
// loopback addresses are served.
func TestHostileDNSRebinding(t *testing.T) {
	httpAddr, mcpAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--terminal", "--http-listen", httpAddr, "--mcp-listen", mcpAddr,
		"--metrics-listen", metricsAddr)
	waitFor(t, d, "classifierd serving HTTP/JSON")
	waitFor(t, d, "metrics serving")
	_, port, _ := net.SplitHostPort(httpAddr)
	_, metricsPort, _ := net.SplitHostPort(metricsAddr)
	connect := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
	for _, tc := range []struct {
		name, host, path string
		body             string
		want             int
		addr             string // "": the HTTP/JSON listener
	}{
		// Go takes an absolute-form target's host for the request's and
		// drops the Host header: the header could not be checked.
		{"Route, absolute-form target, a rebound Host", "evil.example", "http://127.0.0.1:" + port + "/classifier.v1.ClassifierService/Route", `{"query":"x"}`, 403, ""},
		{"metrics, a rebound name", "evil.example:" + metricsPort, "/metrics", "", 403, metricsAddr},
		{"metrics, localhost", "localhost:" + metricsPort, "/metrics", "", 200, metricsAddr},
		{"history, a rebound name", "evil.example:" + port, "/terminal.v1.TerminalService/GetSessionHistory", `{"sessionId":"s1"}`, 403, ""},
		{"a terminal event, a rebound name", "evil.example", "/terminal.v1.TerminalService/TrackInputEvent",
			`{"sessionId":"s1","promptText":"Continue? [y/N]","inputText":"y","success":true,"inputSource":"user_typed"}`, 403, ""},
		{"ResetLearning, a rebound name", "rebind.attacker.test:" + port, "/classifier.v1.ClassifierService/ResetLearning", `{}`, 403, ""},
		{"Route, a rebound name", "evil.example:" + port, "/classifier.v1.ClassifierService/Route", `{"query":"x"}`, 403, ""},
		{"history, localhost", "localhost:" + port, "/terminal.v1.TerminalService/GetSessionHistory", `{"sessionId":"s1"}`, 200, ""},
		{"history, 127.0.0.1", "127.0.0.1:" + port, "/terminal.v1.TerminalService/GetSessionHistory", `{"sessionId":"s1"}`, 200, ""},
		{"Route, [::1]", "[::1]:" + port, "/classifier.v1.ClassifierService/Route", `{"query":"x"}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, rq := httpAddr, rawRequest{method: "POST", path: tc.path, header: connect, body: []byte(tc.body)}
			if tc.addr != "" {
				addr, rq = tc.addr, rawRequest{method: "GET", path: tc.path}
			}
			code, body := doHost(t, addr, tc.host, rq)
			if code != tc.want {
				t.Errorf("Host %s: got %d %.200q, want %d", tc.host, code, body, tc.want)
			}
		})
	}
	// The MCP listener already refused (the SDK's own check).
	code, _ := doHost(t, mcpAddr, "evil.example", rawRequest{method: "POST", path: listeners.MCPPath, header: map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, body: []byte(initializeBody)})
	if code != 403 {
		t.Errorf("MCP listener, Host evil.example: got %d, want 403", code)
	}
}

// doHost sends rq to addr with the Host header host and returns the
// answer's status and the start of its body.
func doHost(t *testing.T, addr, host string, rq rawRequest) (int, string) {
	t.Helper()
	code, _, body := rq.doAs(t, addr, host)
	return code, body
}

// TestHostileShareLearnedStaysWithItsIdentity: with a token file and
// --terminal-share-learned, an answer alice's terminals learned is
// suggested in her other sessions and with no session, and never to bob,
// whatever session he names: alice's branch and cluster names reached
// bob, and alice could teach bob's terminals what to answer.
func TestHostileShareLearnedStaysWithItsIdentity(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice terminal "+aliceToken+"\nbob terminal "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, conn := startDaemon(t, genIndex(t, "testdata/mini.json"), "--terminal", "--terminal-share-learned", "--auth-token-file", tokens)
	c := terminalpb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, bob := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken)
	const prompt = "Deploy to which cluster?"
	for range 3 {
		if _, err := c.TrackInputEvent(alice, &terminalpb.TrackInputEventRequest{SessionId: "s1", PromptText: prompt,
			InputText: "alice-prod-eu-7", Success: true, InputSource: "user_typed"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.TrackInputEvent(bob, &terminalpb.TrackInputEventRequest{SessionId: "b1", PromptText: prompt,
		InputText: "bob-staging", Success: true, InputSource: "user_typed"}); err != nil {
		t.Fatal(err)
	}
	suggested := func(ctx context.Context, session string) []string {
		r, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: prompt, SessionId: session})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range r.GetSuggestions() {
			if s.GetSource() == "pattern_learning" {
				out = append(out, s.GetInputText())
			}
		}
		return out
	}
	for _, tc := range []struct {
		who     string
		ctx     context.Context
		session string
		want    []string
	}{
		{"alice", alice, "s2", []string{"alice-prod-eu-7"}},
		{"alice", alice, "", []string{"alice-prod-eu-7"}},
		{"bob", bob, "s1", []string{"bob-staging"}},
		{"bob", bob, "b2", []string{"bob-staging"}},
		{"bob", bob, "", []string{"bob-staging"}},
	} {
		if got := suggested(tc.ctx, tc.session); !slices.Equal(got, tc.want) {
			t.Errorf("%s, session %q: learned suggestions %q, want %q", tc.who, tc.session, got, tc.want)
		}
	}
}

// TestHostileTerminalEventsPerIdentity: one identity recording events in
// many sessions no longer deletes another's history: --terminal-max-events
// was shared by all, so alice's 1,200 events emptied bob's history in a
// store of 500 (the default store of 100,000 in about 3 minutes).
func TestHostileTerminalEventsPerIdentity(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice terminal "+aliceToken+"\nbob terminal "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, conn := startDaemon(t, genIndex(t, "testdata/mini.json"), "--terminal", "--auth-token-file", tokens, "--terminal-max-events", "500")
	c := terminalpb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice, bob := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken)
	const prompt = "Deploy to which cluster?"
	for range 3 {
		if _, err := c.TrackInputEvent(bob, &terminalpb.TrackInputEventRequest{SessionId: "b1", PromptText: prompt,
			InputText: "bob-staging", Success: true, InputSource: "user_typed"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 150 {
				if _, err := c.TrackInputEvent(alice, &terminalpb.TrackInputEventRequest{SessionId: fmt.Sprintf("flood%d", (w*150+i)%50),
					PromptText: "$ ", InputText: fmt.Sprint("ls ", i), Success: true, InputSource: "user_typed"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h, err := c.GetSessionHistory(bob, &terminalpb.GetSessionHistoryRequest{SessionId: "b1"})
	if err != nil || len(h.GetEvents()) != 3 {
		t.Fatalf("bob's history after alice's 1,200 events: %d events (%v), want 3", len(h.GetEvents()), err)
	}
	r, err := c.InferExpectedInput(bob, &terminalpb.InferExpectedInputRequest{PromptText: prompt, SessionId: "b1"})
	if err != nil || len(r.GetSuggestions()) == 0 || r.GetSuggestions()[0].GetInputText() != "bob-staging" {
		t.Errorf("bob's learned answer after alice's events: %v %v", r.GetSuggestions(), err)
	}
}

// TestHostileTerminalManyIdentitiesKeepAQuietOnesEvents: past
// --terminal-max-events the identity holding the most gives up its
// oldest, so identities each within its own bound do not together push
// out a quiet one's events. The tenth hostile pass
// (tools/hostile/termpool10b.py): in a store of 500 (50 per identity),
// bob's 10 events, then 60 each of m0..m11: bob's history was emptied.
func TestHostileTerminalManyIdentitiesKeepAQuietOnesEvents(t *testing.T) {
	const k = 12
	var file strings.Builder
	fmt.Fprintf(&file, "bob terminal %s\n", bobToken)
	for m := range k {
		fmt.Fprintf(&file, "m%d terminal m%d-0123456789abcdef\n", m, m)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, conn := startDaemon(t, genIndex(t, "testdata/mini.json"), "--terminal", "--auth-token-file", tokens, "--terminal-max-events", "500")
	c := terminalpb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bob := bearerCtx(ctx, bobToken)
	for i := range 10 {
		if _, err := c.TrackInputEvent(bob, &terminalpb.TrackInputEventRequest{SessionId: "b1", PromptText: fmt.Sprintf("Which env %d?", i),
			InputText: "staging", Success: true, InputSource: "user_typed"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for m := range k {
		wg.Go(func() {
			who := bearerCtx(ctx, fmt.Sprintf("m%d-0123456789abcdef", m))
			for i := range 60 {
				if _, err := c.TrackInputEvent(who, &terminalpb.TrackInputEventRequest{SessionId: fmt.Sprint("s", i%5),
					PromptText: "Continue? [y/N]", InputText: "y", Success: true, InputSource: "user_typed"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h, err := c.GetSessionHistory(bob, &terminalpb.GetSessionHistoryRequest{SessionId: "b1", Limit: 100})
	if err != nil || len(h.GetEvents()) != 10 {
		t.Fatalf("bob's history after %d identities' 60 events each: %d events (%v), want his 10", k, len(h.GetEvents()), err)
	}
}
