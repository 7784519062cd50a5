package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/mcpplaces"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
)

// testOwner names the caller of a request to startCounted's listener,
// as mcpGate would find it.
const testOwner = "X-Test-Owner"

// startCounted serves one bare SDK server over streamable HTTP with its
// sessions counted by mcpplaces, as --mcp-listen does, behind a fake
// gate that takes the caller's quota key from testOwner.
func startCounted(t *testing.T, max, perClient int, ttl time.Duration) (*mcpplaces.Places, string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := mcpserver.NewBare(mcpserver.Config{Version: "test", Logger: log})
	count := mcpplaces.New(max, perClient, nil)
	h := listeners.MCPHandler(func(*http.Request) *mcp.Server { return srv }, 1<<20, ttl, log, count.Limit(srv, max, perClient, nil, log))
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := r.Header.Get(testOwner)
		h.ServeHTTP(w, r.WithContext(server.WithCaller(r.Context(), server.Caller{Name: owner, Quota: owner})))
	})
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)
	return count, ts.URL + listeners.MCPPath
}

func ownerClient(owner string) *http.Client {
	return &http.Client{Transport: withHeader{http.DefaultTransport, http.Header{testOwner: {owner}}}}
}

// wantCount checks the places taken, in all and by owner.
func wantCount(t *testing.T, m *mcpplaces.Places, owner string, total, held int) {
	t.Helper()
	if gotTotal, gotHeld := m.Count(owner); gotTotal != total || gotHeld != held {
		t.Fatalf("places: %d in all, %d of %s; want %d, %d", gotTotal, gotHeld, owner, total, held)
	}
	if n := m.Named(); n > total {
		t.Fatalf("%d sessions held for %d places", n, total)
	}
}

func TestMCPSessionsCount(t *testing.T) {
	m, endpoint := startCounted(t, 3, 2, time.Hour)
	connect := func(owner string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcpConnect(t, endpoint, ownerClient(owner))
		if err != nil {
			t.Fatalf("%s connects: %v", owner, err)
		}
		return cs
	}
	refused := func(owner string, code int, want string) {
		t.Helper()
		got, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, initializeBody, http.Header{testOwner: {owner}})
		if id, msg := rpcError(t, body); got != code || id != 7 || !strings.HasPrefix(msg, want) {
			t.Fatalf("%s's initialize: %d %s, want %d %q", owner, got, body, code, want)
		}
	}
	a1, a2 := connect("alice"), connect("alice")
	wantCount(t, m, "alice", 2, 2)
	refused("alice", http.StatusTooManyRequests, "RESOURCE_EXHAUSTED: too many sessions for this client (limit 2)")
	wantCount(t, m, "alice", 2, 2)
	b1 := connect("bob")
	// alice uses a2: a1 is her least recently used.
	if _, err := a2.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// Every place taken: carol, holding none, takes the place of the
	// busiest's (alice's) least recently used session.
	c1 := connect("carol")
	wantCount(t, m, "alice", 3, 1)
	wantCount(t, m, "carol", 3, 1)
	// Each holds one, as the busiest: refused.
	refused("carol", http.StatusServiceUnavailable, "RESOURCE_EXHAUSTED: too many sessions (limit 3)")
	wantCount(t, m, "carol", 3, 1)

	// A DELETE gives the place back before it is answered.
	if err := a2.Close(); err != nil {
		t.Fatal(err)
	}
	wantCount(t, m, "alice", 2, 0)
	for _, cs := range []*mcp.ClientSession{a1, b1, c1} {
		_ = cs.Close()
	}
	wantCount(t, m, "alice", 0, 0)

	// Requests that start no session hold no place, even past a share.
	for _, tc := range []struct {
		name, body string
		header     http.Header
	}{
		{"not an initialize", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil},
		{"bad parameters", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":"none"}`, nil},
		{"an unknown protocol version", initializeBody, http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}},
		{"no event stream accepted", initializeBody, http.Header{"Accept": {"application/json"}}},
		{"not JSON", `{`, nil},
	} {
		h := http.Header{testOwner: {"alice"}}
		for k, v := range tc.header {
			h[k] = v
		}
		for range 3 {
			if code, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, tc.body, h); code == http.StatusOK && !strings.Contains(body, `"error"`) {
				t.Fatalf("%s: %d %q, want a refusal", tc.name, code, body)
			}
			wantCount(t, m, "alice", 0, 0)
		}
	}
}

// TestMCPSessionsChurn opens and closes sessions of two owners at once
// (run with -race): refused past their share, they try again; when all
// are closed every place is back, at once. (The total is the two shares,
// so no session makes way for another mid-use: mcpplaces'
// TestPlacesConcurrent takes places from the busiest at once.)
func TestMCPSessionsChurn(t *testing.T) {
	m, endpoint := startCounted(t, 4, 2, time.Hour)
	testmcp.Churn{Endpoint: endpoint, Agents: 8, Sessions: 5,
		Client: func(agent int) *http.Client { return ownerClient([]string{"alice", "bob"}[agent%2]) },
		Full:   []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, Pause: time.Millisecond}.Run(t)
	wantCount(t, m, "alice", 0, 0)
}

// TestMCPSessionsIdle checks that a session left idle gives its place back
// when the SDK ends it (--session-ttl).
func TestMCPSessionsIdle(t *testing.T) {
	m, endpoint := startCounted(t, 3, 1, 200*time.Millisecond)
	if code, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, initializeBody, http.Header{testOwner: {"alice"}}); code != http.StatusOK {
		t.Fatalf("initialize: %d %q", code, body)
	}
	wantCount(t, m, "alice", 1, 1)
	// Wait for the expiry, not for a time.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if total, _ := m.Count("alice"); total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session's place is not back 20s after its --session-ttl")
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCount(t, m, "alice", 0, 0)
}

// TestMCPHTTPSessionLimits runs the daemon with tokens, two MCP sessions
// per caller and three in all: a caller at its share is refused 429
// RESOURCE_EXHAUSTED while another is served, a full daemon answers 503,
// a closed session's place is free at once, another caller cannot free
// it, and the log has no session ids.
func TestMCPHTTPSessionLimits(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\nbob route "+bobToken+"\ncarol route "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpAddr := freeAddr(t)
	metricsAddr := freeAddr(t)
	d, _ := startDaemon(t, idx, "--mcp-listen", mcpAddr, "--auth-token-file", tokens, "--max-sessions", "3", "--max-sessions-per-client", "2",
		"--metrics-listen", metricsAddr)
	endpoint := "http://" + mcpAddr + listeners.MCPPath
	as := bearerClient
	connect := func(token string) *mcp.ClientSession { return mustConnect(t, endpoint, as(token)) }
	// The SDK's client reports a 429 or 503 by its status text alone:
	// the body is checked over plain HTTP.
	refused := func(token string, code int, want string) {
		t.Helper()
		got, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, initializeBody, bearer(token))
		if id, msg := rpcError(t, body); got != code || id != 7 || !strings.HasPrefix(msg, want) {
			t.Fatalf("initialize: %d %s, want %d and a JSON-RPC error for id 7 starting %q", got, body, code, want)
		}
		if _, err := mcpConnect(t, endpoint, as(token)); err == nil || !strings.Contains(err.Error(), http.StatusText(code)) {
			t.Fatalf("SDK client: %v, want an error with %q", err, http.StatusText(code))
		}
	}
	const aliceFull = "RESOURCE_EXHAUSTED: too many sessions for this client (limit 2)"
	query := map[string]any{"query": "show my unread GitHub notifications", "k": 1}

	a1, a2 := connect(aliceToken), connect(aliceToken)
	refused(aliceToken, http.StatusTooManyRequests, aliceFull)
	var out mcpserver.SearchToolsOutput
	callTool(t, a1, "search_tools", query, &out) // her sessions are served all the same
	b1 := connect(bobToken)
	callTool(t, b1, "search_tools", query, &out)

	// Bob cannot end alice's session (the SDK binds it to her), so it
	// frees nothing.
	if code, body := rawMCP(t, http.DefaultClient, http.MethodDelete, endpoint, "", sessionHeader(a2, bearer(bobToken))); code != http.StatusForbidden {
		t.Fatalf("bob deletes alice's session: %d %q, want 403", code, body)
	}
	refused(aliceToken, http.StatusTooManyRequests, aliceFull)
	// Her own DELETE frees its place before it is answered.
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}
	a3 := connect(aliceToken)
	callTool(t, a3, "search_tools", query, &out)
	refused(aliceToken, http.StatusTooManyRequests, aliceFull)
	for _, cs := range []*mcp.ClientSession{a2, a3, b1} {
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Each of three holds one, as the busiest: refused (a quieter caller
	// would take the busiest's place, TestHostileFullMCPSessionsTakeFromTheBusiest).
	connect(carolToken)
	connect(bobToken)
	connect(aliceToken)
	refused(carolToken, http.StatusServiceUnavailable, "RESOURCE_EXHAUSTED: too many sessions (limit 3)")

	// The operator sees the sessions held and the refusals by limit (each
	// refused call above asked at least twice: raw, then the SDK client).
	m := scrape(t, metricsAddr)
	if got := m["classifierd_mcp_sessions"]; got != 3 {
		t.Errorf("classifierd_mcp_sessions = %v, want 3", got)
	}
	if got := m[`classifierd_mcp_sessions_refused_total{limit="per_client"}`]; got < 6 {
		t.Errorf("refused per client = %v, want at least 6", got)
	}
	if got := m[`classifierd_mcp_sessions_refused_total{limit="total"}`]; got < 2 {
		t.Errorf("refused in total = %v, want at least 2", got)
	}

	if log := d.stderr.String(); strings.Contains(log, "session_id") || strings.Contains(log, "server session") ||
		strings.Contains(log, a2.ID()) || strings.Contains(log, aliceToken) {
		t.Fatalf("daemon log has SDK session lines, a session id or a token:\n%s", log)
	}
}
