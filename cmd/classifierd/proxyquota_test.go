package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/server"
)

// These tests cover --max-sessions-per-client on the proxy's --mcp-listen:
// the real proxy binary in front of the real stdio test servers, driven by
// the SDK's client over real sockets and by plain HTTP where a test sends
// what the SDK's client would not.

// rpcError is the JSON-RPC error of an answer's body.
func rpcError(t *testing.T, body string) (id int, message string) {
	t.Helper()
	var resp struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("answer %q is no JSON-RPC error: %v", body, err)
	}
	return resp.ID, resp.Error.Message
}

// TestProxySessionsPerClient runs the proxy with tokens and room for two
// sessions per caller and three in all: a caller at its share is refused
// 429 RESOURCE_EXHAUSTED before a session is made while others are served,
// and every session that ends or never starts gives its place back, also
// under churn.
func TestProxySessionsPerClient(t *testing.T) {
	config, _ := proxySetup(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	file := "alice route,call " + aliceToken + "\nbob route,call " + bobToken + "\ncarol route,call " + carolToken + "\n"
	if err := os.WriteFile(tokens, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	d := startProxyHTTP(t, config, addr, "--auth-token-file", tokens, "--max-sessions-per-client", "2", "--max-sessions", "3")
	endpoint := "http://" + addr + listeners.MCPPath
	plain := &http.Client{Timeout: 30 * time.Second}
	as := func(token string) *http.Client {
		return &http.Client{Transport: withHeader{http.DefaultTransport, bearer(token)}}
	}
	connect := func(t *testing.T, token string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcpConnect(t, endpoint, as(token))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		return cs
	}
	// refused checks that token's next session is refused with status
	// code and a JSON-RPC error starting want, by plain HTTP; the SDK's
	// client (v1.8.0) reports a 429 or 503 by its status text alone, as
	// a transient refusal.
	refused := func(t *testing.T, token string, code int, want string) {
		t.Helper()
		gotCode, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, bearer(token))
		if id, msg := rpcError(t, body); gotCode != code || id != 7 || !strings.HasPrefix(msg, want) {
			t.Fatalf("initialize: %d %s, want %d and a JSON-RPC error for id 7 starting %q", gotCode, body, code, want)
		}
		if _, err := mcpConnect(t, endpoint, as(token)); err == nil || !strings.Contains(err.Error(), http.StatusText(code)) {
			t.Fatalf("SDK client: %v, want an error with %q", err, http.StatusText(code))
		}
	}
	const aliceFull = "RESOURCE_EXHAUSTED: too many sessions for this client (limit 2)"

	a1, a2 := connect(t, aliceToken), connect(t, aliceToken)
	t.Run("a caller at its share is refused 429", func(t *testing.T) {
		refused(t, aliceToken, http.StatusTooManyRequests, aliceFull)
		// Her sessions are served all the same.
		for _, cs := range []*mcp.ClientSession{a1, a2} {
			if got := listToolNames(t, cs); !slices.Equal(got, metaTools) {
				t.Fatalf("alice's session: tools %v, want %v", got, metaTools)
			}
		}
	})
	b1 := connect(t, bobToken)
	t.Run("another caller is served", func(t *testing.T) {
		res := callToolResult(t, b1, "call_tool", map[string]any{"server": "weather", "tool": "get_weather"})
		if res.IsError || resultText(res) != "get_weather" {
			t.Fatalf("bob's call_tool: isError %v %q", res.IsError, resultText(res))
		}
	})
	t.Run("a session closed gives its place back at once", func(t *testing.T) {
		if err := a1.Close(); err != nil { // DELETE
			t.Fatal(err)
		}
		a3 := connect(t, aliceToken)
		if got := listToolNames(t, a3); !slices.Equal(got, metaTools) {
			t.Fatalf("alice's new session: tools %v", got)
		}
		refused(t, aliceToken, http.StatusTooManyRequests, aliceFull)
		if err := a3.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another caller may not end a caller's session", func(t *testing.T) {
		if code, body := rawMCP(t, plain, http.MethodDelete, endpoint, "", sessionHeader(a2, bearer(bobToken))); code != http.StatusForbidden {
			t.Fatalf("bob deletes alice's session: %d %q, want 403", code, body)
		}
		if got := listToolNames(t, a2); !slices.Equal(got, metaTools) {
			t.Fatalf("alice's session after bob's DELETE: tools %v", got)
		}
	})
	for _, cs := range []*mcp.ClientSession{a2, b1} {
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("with every session taken, 503 to a caller as busy as the busiest", func(t *testing.T) {
		// (A quieter caller takes the busiest's place:
		// TestHostileFullMCPSessionsTakeFromTheBusiest.)
		held := []*mcp.ClientSession{connect(t, aliceToken), connect(t, bobToken), connect(t, carolToken)}
		refused(t, carolToken, http.StatusServiceUnavailable, "RESOURCE_EXHAUSTED: too many sessions (limit 3)")
		for _, cs := range held {
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("an initialize the SDK refuses holds no place", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			body   string
			header http.Header
		}{
			{"no event stream accepted", initializeBody, http.Header{"Accept": {"application/json"}}},
			{"an unknown protocol version", initializeBody, http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}},
			{"bad parameters", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":"none"}`, nil},
		} {
			h := bearer(aliceToken)
			for k, v := range tc.header {
				h[k] = v
			}
			for range 3 { // more than her share
				if code, body := rawMCP(t, plain, http.MethodPost, endpoint, tc.body, h); code == http.StatusOK && !strings.Contains(body, `"error"`) {
					t.Fatalf("%s: %d %q, want a refusal", tc.name, code, body)
				}
			}
		}
		connect(t, aliceToken).Close()
	})
	t.Run("churn leaks no place", func(t *testing.T) {
		// Six agents of alice's open and close four sessions each at
		// once, two at a time at most: refused, they try again.
		full := testmcp.Churn{Endpoint: endpoint, Agents: 6, Sessions: 4,
			Client: func(int) *http.Client { return as(aliceToken) },
			Full:   []int{http.StatusTooManyRequests}, Pause: 5 * time.Millisecond}.Run(t)
		t.Logf("24 sessions opened and closed; %d refused at alice's share meanwhile", full)
		// Every session ended: alice has her whole share again, and no more.
		connect(t, aliceToken)
		connect(t, aliceToken)
		refused(t, aliceToken, http.StatusTooManyRequests, aliceFull)
	})
	if log := d.stderr.String(); strings.Contains(log, "panic") || strings.Contains(log, aliceToken) {
		t.Fatalf("proxy log has a panic or a token:\n%s", log)
	}
}

// TestProxySessionsPerClientIdle runs the proxy without authentication on
// loopback with one session per caller and a short --session-ttl: every
// local client is one anonymous caller of 127.0.0.1, and a session left
// idle gives its place back when it expires.
func TestProxySessionsPerClientIdle(t *testing.T) {
	config, _ := proxySetup(t)
	addr := freeAddr(t)
	startProxyHTTP(t, config, addr, "--max-sessions-per-client", "1", "--session-ttl", "1s")
	endpoint := "http://" + addr + listeners.MCPPath
	plain := &http.Client{Timeout: 30 * time.Second}
	if code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, nil); code != http.StatusOK {
		t.Fatalf("first session: %d %q", code, body)
	}
	code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, nil)
	if id, msg := rpcError(t, body); code != http.StatusTooManyRequests || id != 7 ||
		!strings.HasPrefix(msg, "RESOURCE_EXHAUSTED: too many sessions for this client (limit 1)") {
		t.Fatalf("second session of 127.0.0.1: %d %q, want 429 RESOURCE_EXHAUSTED", code, body)
	}
	// The first session, never used again, expires after a second; then
	// the place is free. Wait for that, not for a time.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, nil)
		if code == http.StatusOK {
			break
		}
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("after the idle session's --session-ttl: %d %q, want the place back", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMCPGateAnonymousQuota checks that without authentication mcpGate
// counts each caller's sessions by its address, as the gRPC edge does,
// and with tokens by its name.
func TestMCPGateAnonymousQuota(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open, err := security.Open(SecurityConfig{})
	if err != nil {
		t.Fatal(err)
	}
	withTokens, err := security.Open(SecurityConfig{TokenFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		sec    *security.Security
		remote string
		header http.Header
		want   server.Caller
	}{
		{"anonymous, IPv4", open, "192.0.2.7:40000", nil, server.Caller{Name: server.Anonymous, Quota: "peer:192.0.2.7"}},
		{"anonymous, the same host from another port", open, "192.0.2.7:40001", nil, server.Caller{Name: server.Anonymous, Quota: "peer:192.0.2.7"}},
		{"anonymous, IPv6", open, "[2001:db8::1]:40000", nil, server.Caller{Name: server.Anonymous, Quota: "peer:2001:db8::1"}},
		{"a token", withTokens, "192.0.2.7:40000", bearer(aliceToken), server.Caller{Name: "alice", Quota: "token:alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got server.Caller
			h := tc.sec.MCPGate(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = server.CallerFrom(r.Context()) }), 1<<20, "route")
			r := httptest.NewRequest(http.MethodPost, listeners.MCPPath, strings.NewReader(initializeBody))
			r.RemoteAddr = tc.remote
			r.Header.Set("Content-Type", "application/json")
			for k, v := range tc.header {
				r.Header[k] = v
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK || got.Name != tc.want.Name || got.Quota != tc.want.Quota {
				t.Fatalf("got %d %+v, want 200 and %+v", w.Code, got, tc.want)
			}
		})
	}
}
