package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/testmcp"
)

// TestProxyMetrics runs the real proxy binary with --metrics-listen in
// front of two real stdio servers and scrapes /metrics over HTTP after
// sessions open, are refused at each limit, make way and end, and after tool calls
// forwarded to a server that answer and that fail.
func TestProxyMetrics(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	servers := map[string]any{}
	for name, tools := range map[string][]testmcp.Tool{
		"weather": {{Name: "get_weather", Description: "Current weather conditions for a city"},
			{Name: "get_warnings", Description: "Storm warnings for a region", Fail: true}},
		"notes": notesTools,
	} {
		file := filepath.Join(dir, name+".json")
		testmcp.WriteTools(t, file, tools)
		servers[name] = map[string]any{"command": bin, "args": []string{"--tools", file}}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "mcp.json")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	file := "alice route,call " + aliceToken + "\nbob route,call " + bobToken + "\ncarol route,call " + carolToken + "\n"
	if err := os.WriteFile(tokens, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	startProxyHTTP(t, config, addr, "--metrics-listen", maddr, "--auth-token-file", tokens,
		"--max-sessions-per-client", "2", "--max-sessions", "3", "--default-exposure", "all")
	endpoint := "http://" + addr + listeners.MCPPath
	plain := &http.Client{Timeout: 30 * time.Second}

	const (
		sessions  = "classifierd_proxy_sessions"
		perClient = `classifierd_proxy_sessions_refused_total{limit="per_client"}`
		total     = `classifierd_proxy_sessions_refused_total{limit="total"}`
		displaced = "classifierd_proxy_sessions_displaced_total"
		weatherOK = `classifierd_proxy_tool_calls_total{code="ok",server="weather"}`
		weatherKO = `classifierd_proxy_tool_calls_total{code="error",server="weather"}`
		notesOK   = `classifierd_proxy_tool_calls_total{code="ok",server="notes"}`
		weatherN  = `classifierd_proxy_tool_call_duration_seconds_count{server="weather"}`
		notesN    = `classifierd_proxy_tool_call_duration_seconds_count{server="notes"}`
	)
	check := func(t *testing.T, want map[string]float64) {
		t.Helper()
		got := scrape(t, maddr)
		for name, w := range want {
			if g, ok := got[name]; !ok || g != w {
				t.Errorf("%s = %v (present %v), want %v", name, g, ok, w)
			}
		}
	}

	t.Run("at start every series is there at zero", func(t *testing.T) {
		got := scrape(t, maddr)
		check(t, map[string]float64{sessions: 0, perClient: 0, total: 0, displaced: 0, weatherOK: 0, weatherKO: 0, notesOK: 0, weatherN: 0, notesN: 0})
		if got["go_goroutines"] <= 0 || got["process_resident_memory_bytes"] <= 0 {
			t.Errorf("go_goroutines %v, process_resident_memory_bytes %v: want the Go and process collectors",
				got["go_goroutines"], got["process_resident_memory_bytes"])
		}
	})
	a1 := mustConnect(t, endpoint, bearerClient(aliceToken))
	b1 := mustConnect(t, endpoint, bearerClient(bobToken))
	c1 := mustConnect(t, endpoint, bearerClient(carolToken))
	var a2, c2 *mcp.ClientSession
	outer := t // the sessions live past the subtest that opens them
	t.Run("refusals by limit", func(t *testing.T) {
		// Three callers hold one each: alice is as busy as the busiest.
		for range 2 {
			if code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, bearer(aliceToken)); code != http.StatusServiceUnavailable {
				t.Fatalf("alice's second initialize, every session taken: %d %s, want 503", code, body)
			}
		}
		if err := c1.Close(); err != nil {
			t.Fatal(err)
		}
		var err error
		if a2, err = mcpConnect(outer, endpoint, bearerClient(aliceToken)); err != nil {
			t.Fatal(err)
		}
		if code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, bearer(aliceToken)); code != http.StatusTooManyRequests {
			t.Fatalf("alice's third initialize: %d %s, want 429", code, body)
		}
		check(t, map[string]float64{sessions: 3, perClient: 1, total: 2, displaced: 0})
	})
	if a2 == nil {
		t.FailNow()
	}
	t.Run("the busiest caller's least recently used makes way", func(t *testing.T) {
		if _, err := a2.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		c, err := mcpConnect(outer, endpoint, bearerClient(carolToken)) // carol holds none, alice two
		if err != nil {
			t.Fatal(err)
		}
		c2 = c
		if code, body := rawMCP(t, plain, http.MethodPost, endpoint, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`,
			sessionHeader(a1, bearer(aliceToken))); code != http.StatusNotFound {
			t.Fatalf("alice's a1, which made way: %d %s, want 404", code, body)
		}
		check(t, map[string]float64{sessions: 3, perClient: 1, total: 2, displaced: 1})
	})
	if c2 == nil {
		t.FailNow()
	}
	t.Run("forwarded calls by server and code", func(t *testing.T) {
		if res := callToolResult(t, a2, "call_tool", map[string]any{"server": "weather", "tool": "get_weather"}); res.IsError {
			t.Fatalf("call_tool get_weather: %q", resultText(res))
		}
		if res := callToolResult(t, c2, "weather__get_weather", nil); res.IsError {
			t.Fatalf("weather__get_weather: %q", resultText(res))
		}
		if res := callToolResult(t, b1, "weather__get_warnings", nil); !res.IsError {
			t.Fatalf("weather__get_warnings: %q, want a tool error", resultText(res))
		}
		// Refused before forwarding: no server was called.
		if res := callToolResult(t, b1, "call_tool", map[string]any{"server": "notes", "tool": "no_such_tool"}); !res.IsError {
			t.Fatalf("call_tool of an unknown tool: %q, want a tool error", resultText(res))
		}
		check(t, map[string]float64{weatherOK: 2, weatherKO: 1, weatherN: 3, notesOK: 0, notesN: 0})
		got := scrape(t, maddr)
		if s := got[`classifierd_proxy_tool_call_duration_seconds_sum{server="weather"}`]; s <= 0 {
			t.Errorf("weather call seconds sum = %v, want > 0", s)
		}
		for name := range got {
			if containsAny(name, "get_weather", "get_warnings", "no_such_tool") {
				t.Errorf("series %s names a tool", name)
			}
		}
	})
	t.Run("a session ended is no longer counted", func(t *testing.T) {
		if err := a2.Close(); err != nil { // DELETE: the place is free before it is answered
			t.Fatal(err)
		}
		check(t, map[string]float64{sessions: 2, perClient: 1, total: 2, displaced: 1})
	})
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
