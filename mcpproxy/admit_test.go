package mcpproxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// TestToolCallsAreAdmitted: each of an agent's tool calls passes
// Config.Admit with the agent's caller before it runs (the daemon admits
// the ones that run the model, search_tools and hub__analyze_prompt, as
// its own gRPC calls), and a refusal is the call's error result; its
// other requests (initialize, tools/list) pass it too, with the caller
// Config.Identify names, and a refused tools/list is a JSON-RPC error.
func TestToolCallsAreAdmitted(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	refuse := ""
	admit := func(ctx context.Context, method, tool string, _ int) (context.Context, func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if method != "tools/call" {
			tool = method
		}
		seen = append(seen, server.CallerFrom(ctx).Quota+" "+tool)
		if tool == refuse {
			return ctx, nil, status.Error(codes.ResourceExhausted, "server overloaded: test")
		}
		return ctx, func() {}, nil
	}
	alice := server.Caller{Name: "alice", Quota: "token:alice"}
	src := &fakeSource{}
	src.set(map[string][]string{"notes": {"create_note"}, "weather": {"get_weather"}})
	px, err := New(context.Background(), Config{Source: src, Embedder: testindex.Embedder{Dims: 64},
		Model: labels.Model{Name: "bow", Fingerprint: "f", Dims: 64}, ServerNames: []string{"notes", "weather"},
		Sessions: session.Config{DefaultExposure: session.ExposeMetaOnly}, Logger: slog.New(slog.DiscardHandler),
		Caller:   func(string, http.Header) (server.Caller, error) { return alice, nil },
		Identify: func(http.Header) (server.Caller, error) { return alice, nil }, Admit: admit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	cs := connectAs(t, px, alice, make(chan struct{}, 8))
	ctx := context.Background()
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{ToolSearch, map[string]any{"query": "weather"}}, {ToolAnalyze, map[string]any{"prompt": "what is the weather"}}} {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.tool, res, err)
		}
	}
	mu.Lock()
	refuse = ToolAnalyze
	mu.Unlock()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolAnalyze, Arguments: map[string]any{"prompt": "create a note"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "RESOURCE_EXHAUSTED") {
		t.Fatalf("refused %s: %v %v, want an error result RESOURCE_EXHAUSTED", ToolAnalyze, res, err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	refuse = "tools/list"
	mu.Unlock()
	var we *jsonrpc.Error
	if _, err := cs.ListTools(ctx, nil); !errors.As(err, &we) || we.Code != mcpserver.CodeResourceExhausted || !strings.HasPrefix(we.Message, "RESOURCE_EXHAUSTED") {
		t.Fatalf("refused tools/list: %v, want a JSON-RPC error %d RESOURCE_EXHAUSTED", err, mcpserver.CodeResourceExhausted)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"token:alice initialize", "token:alice " + ToolSearch, "token:alice " + ToolAnalyze, "token:alice " + ToolAnalyze,
		"token:alice tools/list", "token:alice tools/list"}
	if !slices.Equal(seen, want) {
		t.Fatalf("admitted %v, want %v", seen, want)
	}
}
