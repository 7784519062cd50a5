package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/mcpproxy"
)

// TestProxyAdmitsToolCalls runs the real proxy binary over a socket: every
// tools/call is admitted under its caller's CPU share in front of the SDK
// (classifierd_proxy_call_admissions_total), call_tool's forwarded ones
// too, and so is one whose params the SDK refuses to decode before any
// handler of ours runs; other requests (initialize, tools/list) are not
// counted there. Forwarded calls still answer.
func TestProxyAdmitsToolCalls(t *testing.T) {
	config, _ := proxySetup(t)
	addr, maddr := freeAddr(t), freeAddr(t)
	startProxyHTTP(t, config, addr, "--metrics-listen", maddr)
	endpoint := "http://" + addr + listeners.MCPPath
	const (
		admitted = `classifierd_proxy_call_admissions_total{result="admitted"}`
		refused  = `classifierd_proxy_call_admissions_total{result="refused"}`
	)
	want := func(n float64) {
		t.Helper()
		got := scrape(t, maddr)
		if g, ok := got[admitted]; !ok || g != n || got[refused] != 0 {
			t.Fatalf("%s = %v (present %v), %s = %v; want %v and 0", admitted, g, ok, refused, got[refused], n)
		}
	}
	cs := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if got := listToolNames(t, cs); len(got) == 0 {
		t.Fatal("no tools listed")
	}
	want(0)
	res := callToolResult(t, cs, mcpproxy.ToolCall, map[string]any{"server": "notes", "tool": "search_notes", "arguments": map[string]any{"q": "x"}})
	if res.IsError || resultText(res) != "search_notes" {
		t.Fatalf("call_tool: %v %q", res.IsError, resultText(res))
	}
	want(1)
	if res := callToolResult(t, cs, mcpproxy.ToolSearch, map[string]any{"query": "weather in Paris"}); res.IsError {
		t.Fatalf("search_tools: %q", resultText(res))
	}
	want(2)
	// Params that are not an object: the SDK answers an error before any
	// handler; the call was admitted before it decoded them.
	plain := &http.Client{Timeout: 30 * time.Second}
	code, body := rawMCP(t, plain, http.MethodPost, endpoint, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}`, sessionHeader(cs, nil))
	if code == http.StatusTooManyRequests || !strings.Contains(body, `"error"`) {
		t.Fatalf("tools/call with params \"x\": %d %s, want the SDK's error", code, body)
	}
	want(3)
}
