package mcpsrc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpsrc"
)

// waitFor waits until cond holds for a snapshot, or fails after d.
func waitFor(t *testing.T, p *mcpsrc.Pool, d time.Duration, what string, cond func(mcpsrc.Snapshot) bool) mcpsrc.Snapshot {
	t.Helper()
	deadline := time.After(d)
	for {
		s := p.Snapshot()
		if cond(s) {
			return s
		}
		select {
		case <-s.Changed:
		case <-deadline:
			t.Fatalf("after %v: %s; last snapshot %+v", d, what, s.Servers)
		}
	}
}

func toolNames(st mcpsrc.ServerState) []string {
	var out []string
	for _, t := range st.Tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

func TestPoolStdioFollowsChangesAndKeepsToolsWhenServerDies(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "get_weather", Description: "Current weather for a city"}})
	pidFile := filepath.Join(dir, "pid")
	// A shell wrapper records the server's pid so the test can kill it.
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec "+bin+" --tools "+tools+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{"weather":{"command":"` + script + `","env":{"API_KEY":"secret-value-1"}},` +
		`"missing":{"command":"` + filepath.Join(dir, "no-such-server") + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := mcpsrc.Open(cfg, mcpsrc.Options{Timeout: 5 * time.Second, RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err := p.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := func(s mcpsrc.Snapshot, n string) mcpsrc.ServerState {
		for _, st := range s.Servers {
			if st.Name == n {
				return st
			}
		}
		t.Fatalf("no server %q in %+v", n, s.Servers)
		return mcpsrc.ServerState{}
	}
	missing := byName(snap, "missing")
	if !missing.Degraded || missing.Listed || len(missing.Tools) != 0 || missing.LastError == "" {
		t.Errorf("missing server = %+v, want degraded, never listed, with an error", missing)
	}
	snap = waitFor(t, p, 10*time.Second, "weather listed", func(s mcpsrc.Snapshot) bool { return byName(s, "weather").Listed })
	if got := toolNames(byName(snap, "weather")); !slices.Equal(got, []string{"get_weather"}) {
		t.Fatalf("tools = %v, want [get_weather]", got)
	}
	res, err := p.CallTool(ctx, "weather", &mcp.CallToolParams{Name: "get_weather"})
	if err != nil {
		t.Fatal(err)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; txt != "get_weather" {
		t.Errorf("CallTool answered %q, want get_weather", txt)
	}
	if _, err := p.CallTool(ctx, "nope", &mcp.CallToolParams{Name: "x"}); !errors.Is(err, mcpsrc.ErrUnknownServer) {
		t.Errorf("CallTool on unknown server: %v, want ErrUnknownServer", err)
	}

	// The tool list changes: list_changed reaches the pool.
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "get_weather", Description: "Current weather for a city"},
		{Name: "get_forecast", Description: "Five-day forecast"}})
	waitFor(t, p, 5*time.Second, "get_forecast listed", func(s mcpsrc.Snapshot) bool {
		return slices.Equal(toolNames(byName(s, "weather")), []string{"get_forecast", "get_weather"})
	})

	// A new configuration without "missing": weather keeps its session
	// and tools (no reconnect), missing is gone.
	before := byName(p.Snapshot(), "weather")
	only, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{"weather":{"command":"` + script + `","env":{"API_KEY":"secret-value-1"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p.Update(only)
	snap = p.Snapshot()
	if len(snap.Servers) != 1 {
		t.Fatalf("after Update, servers %+v, want weather alone", snap.Servers)
	}
	if w := snap.Servers[0]; !w.Connected || !w.LastSync.Equal(before.LastSync) || len(w.Tools) != 2 {
		t.Errorf("after Update weather = %+v, want the same connection and tools", w)
	}

	// The server dies: its tools stay, it is degraded, and the error says why.
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("kill", "-9", strings.TrimSpace(string(pid))).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v %s", err, out)
	}
	// Make restarts fail too, so the degraded state is stable.
	if err := os.Remove(script); err != nil {
		t.Fatal(err)
	}
	snap = waitFor(t, p, 5*time.Second, "weather degraded", func(s mcpsrc.Snapshot) bool { return byName(s, "weather").Degraded })
	w := byName(snap, "weather")
	if got := toolNames(w); !slices.Equal(got, []string{"get_forecast", "get_weather"}) {
		t.Errorf("after the server died, tools = %v, want the last known two", got)
	}
	if w.Connected || w.LastError == "" || w.LastSync.IsZero() {
		t.Errorf("dead server state = %+v, want disconnected with an error and a last sync time", w)
	}
	if strings.Contains(w.LastError, "secret-value-1") {
		t.Errorf("LastError %q shows an env value", w.LastError)
	}
	if _, err := p.CallTool(ctx, "weather", &mcp.CallToolParams{Name: "get_weather"}); err == nil {
		t.Error("CallTool on a dead server succeeded")
	}
}

func TestPoolStreamableHTTP(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	urlFile := filepath.Join(dir, "url")
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "search_issues", Description: "Search Jira issues"}})
	cmd := exec.Command(bin, "--tools", tools, "--http", "127.0.0.1:0", "--url-file", urlFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var url []byte
	for deadline := time.Now().Add(10 * time.Second); len(url) == 0; {
		url, _ = os.ReadFile(urlFile)
		if time.Now().After(deadline) {
			t.Fatal("test server wrote no URL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg, err := mcpsrc.ParseConfig([]byte(`{"servers":{"jira":{"type":"http","url":"` + string(url) + `","headers":{"Authorization":"Bearer x-123456"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := mcpsrc.Open(cfg, mcpsrc.Options{Timeout: 5 * time.Second})
	defer p.Close()
	waitFor(t, p, 10*time.Second, "jira listed", func(s mcpsrc.Snapshot) bool { return s.Servers[0].Listed })
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "create_issue", Description: "Create a Jira issue"}})
	snap := waitFor(t, p, 5*time.Second, "create_issue listed", func(s mcpsrc.Snapshot) bool {
		return slices.Equal(toolNames(s.Servers[0]), []string{"create_issue"})
	})
	if snap.Servers[0].Degraded {
		t.Errorf("healthy server marked degraded: %+v", snap.Servers[0])
	}
}

// TestInheritedEnv: a stdio backend inherits the environment but
// classifierd's own variables and the OTLP exporter's headers.
func TestInheritedEnv(t *testing.T) {
	in := []string{"PATH=/usr/bin", "HOME=/root", "CLASSIFIERD_STATE_PASSWORD=pw", "classifierd_x=1",
		"OTEL_EXPORTER_OTLP_HEADERS=a=b", "OTEL_EXPORTER_OTLP_TRACES_HEADERS=a=b", "OTEL_EXPORTER_OTLP_ENDPOINT=h:1",
		"GITHUB_TOKEN=t", "NOEQUALS"}
	got := mcpsrc.InheritedEnv(in)
	want := []string{"PATH=/usr/bin", "HOME=/root", "OTEL_EXPORTER_OTLP_ENDPOINT=h:1", "GITHUB_TOKEN=t", "NOEQUALS"}
	if !slices.Equal(got, want) {
		t.Fatalf("InheritedEnv = %q, want %q", got, want)
	}
}

// TestPoolCapsBackendMessages: a backend's answer over MaxMessage is an
// error of CodeMessageTooLarge for its call, over stdio and streamable
// HTTP, read without being kept (the fifteenth hostile pass: 15 MB
// answers were read and decoded whole), and the connection goes on
// serving: an answer under the bound after it passes whole.
func TestPoolCapsBackendMessages(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{
		{Name: "huge", Description: "answers too much", Bytes: mcpsrc.MaxMessage + 4096}, // over an SSE event's room for its fields too
		{Name: "fair", Description: "answers a megabyte", Bytes: 1 << 20},
	})
	urlFile := filepath.Join(dir, "url")
	cmd := exec.Command(bin, "--tools", tools, "--http", "127.0.0.1:0", "--url-file", urlFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var url []byte
	for deadline := time.Now().Add(10 * time.Second); len(url) == 0; {
		url, _ = os.ReadFile(urlFile)
		if time.Now().After(deadline) {
			t.Fatal("test server wrote no URL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg, err := mcpsrc.ParseConfig([]byte(`{"mcpServers":{"stdio":{"command":"` + bin + `","args":["--tools","` + tools + `"]},` +
		`"http":{"type":"http","url":"` + string(url) + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := mcpsrc.Open(cfg, mcpsrc.Options{Timeout: 20 * time.Second})
	defer p.Close()
	waitFor(t, p, 15*time.Second, "both listed", func(s mcpsrc.Snapshot) bool {
		return len(s.Servers) == 2 && s.Servers[0].Listed && s.Servers[1].Listed
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, srv := range []string{"stdio", "http"} {
		for range 2 {
			_, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "huge"})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != mcpsrc.CodeMessageTooLarge || !strings.Contains(we.Message, "RESOURCE_EXHAUSTED") {
				t.Fatalf("%s: an answer over %d bytes: %v, want a JSON-RPC error of code %d", srv, mcpsrc.MaxMessage, err, mcpsrc.CodeMessageTooLarge)
			}
			res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "fair"})
			if err != nil || len(res.Content) != 1 || len(res.Content[0].(*mcp.TextContent).Text) != 1<<20 {
				t.Fatalf("%s: the call after it: %v", srv, err)
			}
		}
	}
}

// loopingLister is a minimal streamable HTTP MCP server whose tools/list
// answers empty pages, always with a next cursor: cursor(n) for page n.
func loopingLister(t *testing.T, cursor func(page int) string) (string, *atomic.Int64) {
	var pages, inits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		switch req.Method {
		case "initialize":
			inits.Add(1)
			result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "looper", "version": "0"}}
		case "tools/list":
			n := int(pages.Add(1))
			result = map[string]any{"tools": []any{}, "nextCursor": cursor(n)}
		default:
			result = map[string]any{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &inits
}

// TestPoolListingBounded: a listing whose cursors loop, or whose pages
// never end, is an error at once, not a listing for the whole timeout
// (the sixteenth hostile pass: 2,000-6,000 pages a second for 10 s).
func TestPoolListingBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cursor func(int) string
		want   string
	}{
		{"a cursor given again", func(int) string { return "same" }, "cursor given again"},
		{"empty pages without end", func(n int) string { return fmt.Sprint("c", n) }, fmt.Sprintf("more than %d pages without a tool", mcpsrc.MaxEmptyPages)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, inits := loopingLister(t, tc.cursor)
			cfg, err := mcpsrc.ParseConfig([]byte(`{"servers":{"loop":{"type":"http","url":"` + url + `"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			// Reconnections at most 100 ms apart, but a listing refused
			// for a bound is tried again 200 ms later, then 400, 800...
			p := mcpsrc.Open(cfg, mcpsrc.Options{Timeout: 30 * time.Second, RetryMin: time.Millisecond, RetryMax: 100 * time.Millisecond})
			defer p.Close()
			// Within 20 s of a 30 s timeout: refused by the bound.
			snap := waitFor(t, p, 20*time.Second, "the listing refused", func(s mcpsrc.Snapshot) bool {
				return strings.Contains(s.Servers[0].LastError, tc.want)
			})
			if snap.Servers[0].Listed {
				t.Fatalf("listed %+v", snap.Servers[0])
			}
			if want := "tried again in 200ms"; !strings.Contains(snap.Servers[0].LastError, want) {
				t.Fatalf("last error %q, want it to say %q", snap.Servers[0].LastError, want)
			}
			n0 := inits.Load()
			time.Sleep(1500 * time.Millisecond) // 15 backoffs of RetryMax
			if n := inits.Load() - n0; n > 3 {
				t.Fatalf("the server was connected %d times in 1.5 s, want 3 at most (200, 400, 800 ms apart)", n)
			}
		})
	}
}

// TestPoolRelistSpacedByItsCost: a server announcing a change of its
// tools without pause is listed again no sooner than ten times its last
// listing's duration (and MinRelist): a backend listing 15 MB under the
// bounds and announcing a change every 100 ms was listed every second,
// 28 s of the proxy's CPU in 30 s (the seventeenth hostile pass).
func TestPoolRelistSpacedByItsCost(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "busy", Version: "0"}, nil)
	var lists atomic.Int64
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
				time.Sleep(100 * time.Millisecond) // a costly listing
			}
			return next(ctx, method, req)
		}
	})
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: &jsonschema.Schema{Type: "object"}}, handler)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	cfg, err := mcpsrc.ParseConfig([]byte(`{"servers":{"busy":{"type":"http","url":"` + hs.URL + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := mcpsrc.Open(cfg, mcpsrc.Options{MinRelist: 10 * time.Millisecond})
	defer p.Close()
	waitFor(t, p, 20*time.Second, "the first listing", func(s mcpsrc.Snapshot) bool { return s.Servers[0].Listed })
	n0 := lists.Load()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a change announced every 10 ms
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			name := fmt.Sprint("x", i%2)
			srv.AddTool(&mcp.Tool{Name: name, InputSchema: &jsonschema.Schema{Type: "object"}}, handler)
			srv.RemoveTools(fmt.Sprint("x", (i+1)%2))
		}
	}()
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	<-done
	// MinRelist alone: a listing every 110 ms, about 22; spaced by ten
	// times its 100 ms: one a second at most, 3 or 4 with the first's
	// spacing counted from before it.
	if n := lists.Load() - n0; n > 4 {
		t.Fatalf("%d listings in 2.5 s of announced changes, want 4 at most (each 100 ms long: 1 s apart)", n)
	}
}
