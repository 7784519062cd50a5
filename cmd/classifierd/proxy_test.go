package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/proxyrun"
	"github.com/classifierd/classifierd/internal/testdaemon"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpproxy"
)

// The proxy tests put two real stdio MCP servers (internal/testmcp, built
// with the official SDK; every tool answers its own name) behind the real
// proxy binary with the real model, and drive it with the SDK's client.

var (
	weatherTools = []testmcp.Tool{
		{Name: "get_weather", Description: "Current weather conditions (temperature, rain, wind) for a city"},
		{Name: "get_forecast", Description: "Weather forecast for a city for the next days"},
	}
	notesTools = []testmcp.Tool{
		{Name: "create_note", Description: "Create a new note with a title and text in the notebook"},
		{Name: "search_notes", Description: "Search the notes in the notebook by keyword"},
		{Name: "delete_note", Description: "Delete a note from the notebook"},
	}
)

// proxySetup writes the tool files and an mcpServers config for the two
// servers; it returns the config path and the weather tool file.
func proxySetup(t *testing.T) (config, weatherFile string) {
	t.Helper()
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	weatherFile = filepath.Join(dir, "weather.json")
	notesFile := filepath.Join(dir, "notes.json")
	testmcp.WriteTools(t, weatherFile, weatherTools)
	testmcp.WriteTools(t, notesFile, notesTools)
	cfg := map[string]any{"mcpServers": map[string]any{
		"weather": map[string]any{"command": bin, "args": []string{"--tools", weatherFile}},
		"notes":   map[string]any{"command": bin, "args": []string{"--tools", notesFile}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return config, weatherFile
}

func proxyArgs(config string, extra ...string) []string {
	return append([]string{"proxy", "--config", config, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(),
		"--log-level", "warn"}, extra...)
}

// listChanged counts notifications/tools/list_changed on a channel.
func listChangedClient(ch chan struct{}) *mcp.ClientOptions {
	return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}}
}

func waitNotified(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no tools/list_changed after %s", what)
	}
}

// notNotified checks that no list_changed arrives: the SDK sends one 10ms
// after a change, so half a second is ample.
func notNotified(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("tools/list_changed after %s, which changed nothing", what)
	case <-time.After(500 * time.Millisecond):
	}
}

var metaTools = slices.Sorted(slices.Values([]string{mcpproxy.ToolAnalyze, mcpproxy.ToolCall, mcpproxy.ToolSearch}))

func TestProxyStdio(t *testing.T) {
	bin, _ := binaries(t)
	config, weatherFile := proxySetup(t)
	cmd := exec.Command(bin, proxyArgs(config)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	changed := make(chan struct{}, 16)
	cs := mcpClient(t, &mcp.CommandTransport{Command: cmd}, listChangedClient(changed))
	defer func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", stderr.String())
		}
	}()

	t.Run("a new session sees only the meta tools", func(t *testing.T) {
		if got := listToolNames(t, cs); !slices.Equal(got, metaTools) {
			t.Fatalf("tools = %v, want %v", got, metaTools)
		}
	})
	t.Run("a tool not shown is found by search and called", func(t *testing.T) {
		var out mcpproxy.SearchOutput
		callTool(t, cs, mcpproxy.ToolSearch, map[string]any{"query": "will it rain in Paris over the next days", "k": 3}, &out)
		if len(out.Tools) == 0 || out.Tools[0].Server != "weather" || out.Tools[0].Name != "get_forecast" || out.Tools[0].Shown ||
			out.Tools[0].Exposed != "weather__get_forecast" || out.Tools[0].Description == "" {
			t.Fatalf("got %+v, want weather get_forecast first, not shown", out.Tools)
		}
		res := callToolResult(t, cs, mcpproxy.ToolCall, map[string]any{"server": out.Tools[0].Server, "tool": out.Tools[0].Name,
			"arguments": map[string]any{"city": "Paris"}})
		if res.IsError || resultText(res) != "get_forecast" {
			t.Fatalf("call_tool: isError %v %q, want the weather server's get_forecast answer", res.IsError, resultText(res))
		}
		wantToolError(t, cs, mcpproxy.ToolCall, map[string]any{"server": "weather", "tool": "no_such_tool"}, "NOT_FOUND")
		wantToolError(t, cs, mcpproxy.ToolCall, map[string]any{"server": "nowhere", "tool": "get_weather"}, "NOT_FOUND")
	})
	t.Run("analyze_prompt widens the exposure and notifies once", func(t *testing.T) {
		var out mcpproxy.AnalyzeOutput
		callTool(t, cs, mcpproxy.ToolAnalyze, map[string]any{"prompt": "create a new note in my notebook: buy milk"}, &out)
		if !out.Changed || !slices.Contains(out.Exposed, "notes") || slices.Contains(out.Exposed, "weather") || out.Tools != 3 {
			t.Fatalf("got %+v, want notes exposed with its 3 tools", out)
		}
		waitNotified(t, changed, "analyze_prompt changed the exposure")
		want := append(slices.Clone(metaTools), "notes__create_note", "notes__delete_note", "notes__search_notes")
		slices.Sort(want)
		if got := listToolNames(t, cs); !slices.Equal(got, want) {
			t.Fatalf("tools = %v, want %v", got, want)
		}
		res := callToolResult(t, cs, "notes__create_note", map[string]any{"title": "milk"})
		if res.IsError || resultText(res) != "create_note" {
			t.Fatalf("notes__create_note: %v %q", res.IsError, resultText(res))
		}
		var again mcpproxy.AnalyzeOutput
		callTool(t, cs, mcpproxy.ToolAnalyze, map[string]any{"prompt": "create a new note in my notebook: buy milk"}, &again)
		if again.Changed {
			t.Fatalf("the same prompt changed the exposure again: %+v", again)
		}
		notNotified(t, changed, "an analyze_prompt that changed nothing")
	})
	t.Run("replacement", func(t *testing.T) {
		var out mcpproxy.AnalyzeOutput
		callTool(t, cs, mcpproxy.ToolAnalyze, map[string]any{"prompt": "what is the weather in Oslo right now", "mode": "replacement"}, &out)
		if !out.Changed || !slices.Equal(out.Exposed, []string{"weather"}) {
			t.Fatalf("got %+v, want only weather exposed", out)
		}
		waitNotified(t, changed, "a replacement")
		got := listToolNames(t, cs)
		if !slices.Contains(got, "weather__get_weather") || slices.Contains(got, "notes__create_note") {
			t.Fatalf("tools = %v, want weather's and no longer notes'", got)
		}
		wantToolError(t, cs, mcpproxy.ToolAnalyze, map[string]any{"prompt": "x", "mode": "sideways"}, "INVALID_ARGUMENT")
	})
	t.Run("follows the servers' tools/list_changed", func(t *testing.T) {
		testmcp.WriteTools(t, weatherFile, append(slices.Clone(weatherTools),
			testmcp.Tool{Name: "get_air_quality", Description: "Air quality index and pollen levels for a city"}))
		waitNotified(t, changed, "the weather server added a tool")
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(listToolNames(t, cs), "weather__get_air_quality") {
			if time.Now().After(deadline) {
				t.Fatalf("tools = %v, want weather__get_air_quality", listToolNames(t, cs))
			}
			time.Sleep(100 * time.Millisecond)
		}
		var out mcpproxy.SearchOutput
		callTool(t, cs, mcpproxy.ToolSearch, map[string]any{"query": "how bad is the pollen and air pollution today", "k": 1}, &out)
		if len(out.Tools) != 1 || out.Tools[0].Name != "get_air_quality" || !out.Tools[0].Shown {
			t.Fatalf("got %+v, want the new get_air_quality, shown", out.Tools)
		}
		res := callToolResult(t, cs, "weather__get_air_quality", nil)
		if res.IsError || resultText(res) != "get_air_quality" {
			t.Fatalf("weather__get_air_quality: %v %q", res.IsError, resultText(res))
		}
	})
}

// startProxyHTTP runs classifierd proxy with --mcp-listen addr and extra
// flags, and waits until it listens.
func startProxyHTTP(t *testing.T, config, addr string, extra ...string) *daemon {
	t.Helper()
	binaries(t)
	p := testdaemon.Start(t, proxyArgs(config, append([]string{"--mcp-listen", addr}, extra...)...)...)
	testdaemon.WaitListening(t, p, addr, 60*time.Second)
	return &daemon{cmd: p.Cmd, addr: addr, stderr: p.Output, done: p.Done}
}

func TestProxyHTTPSessionsAreIsolated(t *testing.T) {
	config, _ := proxySetup(t)
	addr := freeAddr(t)
	d := startProxyHTTP(t, config, addr)
	stderr := d.stderr
	waitFor(t, d, "MCP listener without authentication") // loopback: allowed, and said
	endpoint := "http://" + addr + listeners.MCPPath
	chA, chB := make(chan struct{}, 16), make(chan struct{}, 16)
	a := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint}, listChangedClient(chA))
	b := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint}, listChangedClient(chB))
	for _, cs := range []*mcp.ClientSession{a, b} {
		if got := listToolNames(t, cs); !slices.Equal(got, metaTools) {
			t.Fatalf("new session tools = %v, want %v", got, metaTools)
		}
	}
	var out mcpproxy.AnalyzeOutput
	callTool(t, a, mcpproxy.ToolAnalyze, map[string]any{"prompt": "search my notes for the meeting agenda"}, &out)
	if !out.Changed || !slices.Contains(out.Exposed, "notes") {
		t.Fatalf("got %+v, want notes exposed", out)
	}
	waitNotified(t, chA, "analyze_prompt in session A")
	if got := listToolNames(t, a); !slices.Contains(got, "notes__search_notes") {
		t.Fatalf("session A tools = %v, want notes__search_notes", got)
	}
	notNotified(t, chB, "another session's analyze_prompt")
	if got := listToolNames(t, b); !slices.Equal(got, metaTools) {
		t.Fatalf("session B tools = %v, want only the meta tools: sessions must be isolated", got)
	}
	res := callToolResult(t, b, mcpproxy.ToolCall, map[string]any{"server": "notes", "tool": "search_notes"})
	if res.IsError || resultText(res) != "search_notes" {
		t.Fatalf("session B call_tool: %v %q", res.IsError, resultText(res))
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Fatalf("proxy log has a panic:\n%s", stderr.String())
	}
}

// TestProxyRefusedInitializesKeepNoPlace sends the loopback proxy
// initialize requests its MCP transport refuses (a web page's cross-site
// text/plain POST, which needs no CORS preflight; a DNS-rebinding Host;
// no text/event-stream in Accept; a key the SDK does not read as method)
// and a batch holding an initialize. None may take one of --max-sessions'
// places, or any page the user opened could lock the agent out for
// --session-ttl; a batch starts no session with a tool list.
func TestProxyRefusedInitializesKeepNoPlace(t *testing.T) {
	config, _ := proxySetup(t)
	addr := freeAddr(t)
	const places = 2
	d := startProxyHTTP(t, config, addr, "--max-sessions", strconv.Itoa(places))
	endpoint := "http://" + addr + listeners.MCPPath
	send := func(host, contentType, accept, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", accept)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	const both = "application/json, text/event-stream"
	for _, tc := range []struct {
		name, host, contentType, accept, body string
		want                                  int
	}{
		{"cross-site text/plain", "", "text/plain;charset=UTF-8", "*/*", `{"method":"initialize"}`, http.StatusUnsupportedMediaType},
		{"DNS rebinding", "attacker.example:80", "application/json", both, initializeBody, http.StatusForbidden},
		{"no event stream accepted", "", "application/json", "application/json", initializeBody, http.StatusBadRequest},
		{"METHOD for method", "", "application/json", both, `{"jsonrpc":"2.0","id":1,"METHOD":"initialize"}`, http.StatusAccepted},
	} {
		for range places + 1 {
			if code, body := send(tc.host, tc.contentType, tc.accept, tc.body); code != tc.want {
				t.Fatalf("%s: %d %q, want %d", tc.name, code, body, tc.want)
			}
		}
	}
	batch := "[" + strings.Replace(initializeBody, "2025-06-18", "2025-03-26", 1) + "]" // batches predate 2025-06-18
	for range places + 1 {
		if code, body := send("", "application/json", both, batch); code != http.StatusOK || !strings.Contains(body, proxyrun.ErrNoSession.Error()) {
			t.Fatalf("batch initialize: %d %q, want a JSON-RPC error saying %q", code, body, proxyrun.ErrNoSession)
		}
	}
	for i := range places {
		cs, err := mcpConnect(t, endpoint, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("session %d of %d after the refused requests: %v", i+1, places, err)
		}
		if got := listToolNames(t, cs); !slices.Equal(got, metaTools) {
			t.Fatalf("session %d tools = %v, want %v", i+1, got, metaTools)
		}
	}
	if _, err := mcpConnect(t, endpoint, &http.Client{Timeout: 30 * time.Second}); err == nil {
		t.Fatalf("session %d connected, want --max-sessions %d to hold", places+1, places)
	}
	if strings.Contains(d.stderr.String(), "panic") {
		t.Fatalf("proxy log has a panic:\n%s", d.stderr.String())
	}
}
