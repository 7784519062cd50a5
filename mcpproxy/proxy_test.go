package mcpproxy

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
	"github.com/classifierd/classifierd/session"
)

// fakeSource is a Source whose tools the test sets and whose calls it
// records. The real pool and servers are exercised by cmd/classifierd's
// proxy tests.
type fakeSource struct {
	mu    sync.Mutex
	snap  mcpsrc.Snapshot
	calls []string
}

func (f *fakeSource) Snapshot() mcpsrc.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

func (f *fakeSource) set(servers map[string][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ss []mcpsrc.ServerState
	for _, name := range []string{"notes", "weather"} {
		st := mcpsrc.ServerState{Name: name, Listed: true, Connected: true}
		for _, tn := range servers[name] {
			st.Tools = append(st.Tools, &mcp.Tool{Name: tn, Description: name + " tool " + tn,
				InputSchema: map[string]any{"type": "object"}})
		}
		ss = append(ss, st)
	}
	f.snap = mcpsrc.Snapshot{Version: f.snap.Version + 1, Servers: ss, Changed: make(chan struct{})}
}

func (f *fakeSource) CallTool(_ context.Context, server string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if server != "notes" && server != "weather" {
		return nil, mcpsrc.ErrUnknownServer
	}
	f.calls = append(f.calls, server+"/"+p.Name)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + p.Name}}}, nil
}

func newTestProxy(t *testing.T) (*Proxy, *fakeSource) {
	t.Helper()
	return newTestProxyWith(t, nil)
}

// newTestProxyWith is newTestProxy with caller as Config.Caller.
func newTestProxyWith(t *testing.T, caller func(string, http.Header) (server.Caller, error)) (*Proxy, *fakeSource) {
	t.Helper()
	return newTestProxyConfig(t, caller, session.Config{DefaultExposure: session.ExposeMetaOnly})
}

// newTestProxyConfig is newTestProxyWith with sessions as Config.Sessions.
func newTestProxyConfig(t *testing.T, caller func(string, http.Header) (server.Caller, error), sessions session.Config) (*Proxy, *fakeSource) {
	t.Helper()
	src := &fakeSource{}
	src.set(map[string][]string{"notes": {"create_note", "search_notes"}, "weather": {"get_weather"}})
	px, err := New(context.Background(), Config{Source: src, Embedder: testindex.Embedder{Dims: 64},
		Model: labels.Model{Name: "bow", Fingerprint: "f", Dims: 64}, ServerNames: []string{"notes", "weather"},
		Sessions: sessions, Logger: slog.New(slog.DiscardHandler), Caller: caller})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	return px, src
}

// connect opens an in-memory client session on a new session server of
// an anonymous agent.
func connect(t *testing.T, px *Proxy, changed chan struct{}) *mcp.ClientSession {
	t.Helper()
	return connectAs(t, px, server.Caller{Name: server.Anonymous, Quota: "mcp"}, changed)
}

// connectAs opens an in-memory client session on a new session server
// owned by owner.
func connectAs(t *testing.T, px *Proxy, owner server.Caller, changed chan struct{}) *mcp.ClientSession {
	t.Helper()
	srv, served, err := px.NewSessionServer(owner)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	served()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func names(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func TestSessionExposureAndRebuild(t *testing.T) {
	px, src := newTestProxy(t)
	chA, chB := make(chan struct{}, 8), make(chan struct{}, 8)
	a, b := connect(t, px, chA), connect(t, px, chB)
	meta := slices.Sorted(slices.Values([]string{ToolAnalyze, ToolCall, ToolSearch}))
	if got := names(t, a); !slices.Equal(got, meta) {
		t.Fatalf("new session: %v, want %v", got, meta)
	}
	// Expose notes to one of the two sessions, as hub__analyze_prompt
	// does; which one it is shows in the notifications.
	var ca *client
	px.mu.Lock()
	for c := range px.clients {
		ca = c
		break
	}
	px.mu.Unlock()
	if _, _, _, err := px.sessions.Update(context.Background(), ca.key, []string{"notes"}, session.ModeAdditive); err != nil {
		t.Fatal(err)
	}
	ca.sync()
	shown, other, otherCh := a, b, chB
	select {
	case <-chA:
	case <-chB:
		shown, other, otherCh = b, a, chA
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed after the exposure changed")
	}
	want := append(slices.Clone(meta), "notes__create_note", "notes__search_notes")
	slices.Sort(want)
	if got := names(t, shown); !slices.Equal(got, want) {
		t.Fatalf("exposed session: %v, want %v", got, want)
	}
	if got := names(t, other); !slices.Equal(got, meta) {
		t.Fatalf("other session: %v, want only %v", got, meta)
	}
	// A sync that changes nothing sends nothing.
	ca.sync()
	select {
	case <-chA:
		t.Fatal("list_changed without a change")
	case <-chB:
		t.Fatal("list_changed without a change")
	case <-time.After(200 * time.Millisecond):
	}
	// Expose weather to the other session.
	var cb *client
	px.mu.Lock()
	for c := range px.clients {
		if c != ca {
			cb = c
		}
	}
	px.mu.Unlock()
	if _, _, _, err := px.sessions.Update(context.Background(), cb.key, []string{"weather"}, session.ModeAdditive); err != nil {
		t.Fatal(err)
	}
	cb.sync()
	select {
	case <-otherCh:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed after weather was exposed")
	}
	// A server's new tool reaches the sessions exposing it, and only them:
	// the weather session's tools (new values, same definitions) stay.
	src.set(map[string][]string{"notes": {"create_note", "search_notes", "delete_note"}, "weather": {"get_weather"}})
	if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got := names(t, shown); !slices.Contains(got, "notes__delete_note") {
		t.Fatalf("after the rebuild: %v, want notes__delete_note", got)
	}
	select {
	case <-otherCh:
		t.Fatal("a session without notes was told its list changed when notes changed")
	case <-time.After(200 * time.Millisecond):
	}
	// Calls forward to the right server under the tool's own name.
	res, err := shown.CallTool(context.Background(), &mcp.CallToolParams{Name: "notes__delete_note"})
	if err != nil || res.IsError {
		t.Fatalf("forwarded call: %v %v", res, err)
	}
	res, err = other.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCall,
		Arguments: map[string]any{"server": "weather", "tool": "get_weather"}})
	if err != nil || res.IsError {
		t.Fatalf("call_tool: %v %v", res, err)
	}
	src.mu.Lock()
	calls := slices.Clone(src.calls)
	src.mu.Unlock()
	if !slices.Equal(calls, []string{"notes/delete_note", "weather/get_weather"}) {
		t.Fatalf("calls = %v", calls)
	}
	// A session that ends is forgotten.
	count := func() int {
		n, err := px.sessions.Len(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	other.Close()
	deadline := time.Now().Add(5 * time.Second)
	for count() != before-1 {
		if time.Now().After(deadline) {
			t.Fatalf("sessions = %d after one closed, want %d", count(), before-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestToolScope(t *testing.T) {
	for _, tc := range []struct{ tool, want string }{
		{ToolSearch, auth.ScopeRoute},
		{ToolAnalyze, auth.ScopeRoute},
		{ToolCall, auth.ScopeCall},
		{"notes__create_note", auth.ScopeCall},
		{"", auth.ScopeCall},
	} {
		if got := ToolScope(tc.tool); got != tc.want {
			t.Errorf("ToolScope(%q) = %q, want %q", tc.tool, got, tc.want)
		}
	}
}

// TestCallerAndOwner checks that Config.Caller decides every tool call of
// a session and that a session's exposure is its owner's: the caller here
// is whoever the test says, with the scopes it says, checked as the
// daemon checks them.
func TestCallerAndOwner(t *testing.T) {
	var mu sync.Mutex
	var who server.Caller
	as := func(c server.Caller) {
		mu.Lock()
		who = c
		mu.Unlock()
	}
	px, src := newTestProxyWith(t, func(tool string, _ http.Header) (server.Caller, error) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(who.Scopes, ToolScope(tool)) {
			return server.Caller{}, status.Errorf(codes.PermissionDenied, "%s needs scope %q", tool, ToolScope(tool))
		}
		return who, nil
	})
	alice := server.Caller{Name: "alice", Quota: "token:alice", Scopes: []string{auth.ScopeRoute, auth.ScopeCall}}
	reader := server.Caller{Name: "alice", Quota: "token:alice", Scopes: []string{auth.ScopeRoute}}
	bob := server.Caller{Name: "bob", Quota: "token:bob", Scopes: auth.AllScopes}
	cs := connectAs(t, px, alice, make(chan struct{}, 8))
	// call returns a tool's text and whether it failed: a refused caller
	// is a protocol error (mcpserver's guard), a refusal of the tool a
	// tool error.
	call := func(name string, args map[string]any) (string, bool) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return err.Error(), true
		}
		var text string
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		return text, res.IsError
	}
	analyze := map[string]any{"prompt": "create a note in my notebook"}
	callTool := map[string]any{"server": "weather", "tool": "get_weather"}
	for _, tc := range []struct {
		name   string
		caller server.Caller
		tool   string
		args   map[string]any
		want   string // in the error; "" for success
	}{
		// Session ids are per caller (session.ScopedID): to bob, alice's
		// session is not found.
		{"another identity may not change the owner's exposure", bob, ToolAnalyze, analyze, "NOT_FOUND"},
		{"route may search", reader, ToolSearch, map[string]any{"query": "weather"}, ""},
		{"route may not call_tool", reader, ToolCall, callTool, "PERMISSION_DENIED"},
		{"the owner changes its exposure", alice, ToolAnalyze, analyze, ""},
		{"call may call_tool", alice, ToolCall, callTool, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as(tc.caller)
			text, isErr := call(tc.tool, tc.args)
			if isErr != (tc.want != "") || !strings.Contains(text, tc.want) {
				t.Fatalf("%s: error %v %q, want error %q", tc.tool, isErr, text, tc.want)
			}
		})
	}
	// The exposure alice's analyze_prompt added shows the notes tools;
	// calling one needs call as call_tool does.
	if got := names(t, cs); !slices.Contains(got, "notes__create_note") {
		t.Fatalf("tools = %v, want notes__create_note after alice's analyze_prompt", got)
	}
	as(reader)
	if text, isErr := call("notes__create_note", nil); !isErr || !strings.Contains(text, "PERMISSION_DENIED") {
		t.Fatalf("notes__create_note with route only: error %v %q, want PERMISSION_DENIED", isErr, text)
	}
	as(alice)
	if text, isErr := call("notes__create_note", nil); isErr {
		t.Fatalf("notes__create_note with call: %q", text)
	}
	src.mu.Lock()
	calls := slices.Clone(src.calls)
	src.mu.Unlock()
	if !slices.Equal(calls, []string{"weather/get_weather", "notes/create_note"}) {
		t.Fatalf("calls = %v, want only those allowed", calls)
	}
}

func TestBuildCatalogServerIDs(t *testing.T) {
	snap := mcpsrc.Snapshot{Servers: []mcpsrc.ServerState{
		{Name: "My Notes", Tools: []*mcp.Tool{{Name: "create", Description: "create a note"}}},
		{Name: "empty"},
	}}
	cat, tools, err := buildCatalog(snap)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := serverIDs([]string{"My Notes", "empty"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Servers) != 1 || cat.Servers[0].ID != ids[0] || cat.Categories[0].ID != ids[0] || cat.Servers[0].Name != "My Notes" {
		t.Fatalf("servers %+v categories %+v ids %v", cat.Servers, cat.Categories, ids)
	}
	lt, ok := tools[ids[0]+"__create"]
	if !ok || lt.Server != "My Notes" || lt.Tool.Name != "create" {
		t.Fatalf("tools = %+v", tools)
	}
	if _, _, err := buildCatalog(mcpsrc.Snapshot{Servers: []mcpsrc.ServerState{{Name: "empty"}}}); err != errNoTools {
		t.Fatalf("no tools: err %v, want errNoTools", err)
	}
}

// TestBuildCatalogLeavesOutBadTools: a backend's tool with a name over
// catalog.MaxNameBytes, blank, not UTF-8 or listed twice is left out; the
// others, on that server and the rest, are indexed (one such tool failed
// the whole index: the thirteenth hostile pass).
func TestBuildCatalogLeavesOutBadTools(t *testing.T) {
	snap := mcpsrc.Snapshot{Servers: []mcpsrc.ServerState{
		{Name: "evil", Tools: []*mcp.Tool{
			{Name: strings.Repeat("x", catalog.MaxNameBytes+1), Description: "long"},
			{Name: "  ", Description: "blank"},
			{Name: "bad\xff", Description: "not UTF-8"},
			{Name: "list", Description: "list the things"},
			{Name: "list", Description: "again"},
			{Name: "get", Description: "get a thing"},
		}},
		{Name: "notes", Tools: []*mcp.Tool{{Name: "create", Description: "create a note"}}},
	}}
	cat, tools, err := buildCatalog(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 3 {
		t.Fatalf("tools %v, want evil's list and get and notes' create", slices.Collect(maps.Keys(tools)))
	}
	for name, lt := range tools {
		if !strings.HasSuffix(name, "__"+lt.Tool.Name) || (lt.Tool.Name == "list" && lt.Tool.Description != "list the things") {
			t.Errorf("%s: %+v (the first list kept, each name its own tool)", name, lt.Tool)
		}
	}
	if len(cat.Servers) != 2 {
		t.Fatalf("servers %+v", cat.Servers)
	}
}

// TestToolCallsKeepTheExposure has an agent that only calls tools for
// longer than the TTL: its exposure lives as long as it is active.
func TestToolCallsKeepTheExposure(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	px, _ := newTestProxyConfig(t, nil, session.Config{DefaultExposure: session.ExposeAll, TTL: time.Minute, Now: clock})
	cs := connect(t, px, nil)
	px.mu.Lock()
	var id string
	for c := range px.clients {
		id = c.key // the store's id of the session
	}
	px.mu.Unlock()
	for range 3 { // 120 s in all, twice the TTL, a call every 40 s
		advance(40 * time.Second)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCall,
			Arguments: map[string]any{"server": "weather", "tool": "get_weather"}})
		if err != nil || res.IsError {
			t.Fatalf("call_tool: %v %+v", err, res)
		}
	}
	if _, err := px.sessions.Exposed(context.Background(), id); err != nil {
		t.Fatalf("exposure of an agent active every 40 s with a TTL of 1 min: %v", err)
	}
	// An idle one still expires.
	advance(2 * time.Minute)
	if _, err := px.sessions.Exposed(context.Background(), id); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("exposure after 2 min idle: %v, want ErrNotFound", err)
	}
}

// TestListChangedAnnouncedOnce: the SDK debounces each AddTool and
// RemoveTools by 10ms, so a sync descheduled between two of them under
// load fires two debounced notifications for one change. The second is
// dropped: a notification has gone out since the last change.
func TestListChangedAnnouncedOnce(t *testing.T) {
	c := &client{}
	sent := 0
	h := c.listChanged(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		sent++
		return nil, nil
	})
	notify := func() {
		t.Helper()
		if _, err := h(context.Background(), "notifications/tools/list_changed", &mcp.ServerRequest[*mcp.ToolListChangedParams]{}); err != nil {
			t.Fatal(err)
		}
	}
	c.changes++ // one sync that changed the tools
	notify()
	notify() // the same sync's second debounced notification
	if sent != 1 {
		t.Fatalf("one change announced %d times, want 1", sent)
	}
	c.changes++ // a later change is announced again
	notify()
	if sent != 2 {
		t.Fatalf("a second change announced %d times in all, want 2", sent)
	}
}
