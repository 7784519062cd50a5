package mcpproxy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// gatedSource is fakeSource whose notes/create_note waits for gate and
// whose notes/search_notes answers big bytes of text.
type gatedSource struct {
	*fakeSource
	gate     chan struct{}
	big      int
	inFlight atomic.Int64
}

func (g *gatedSource) CallTool(ctx context.Context, srv string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	switch {
	case srv == "notes" && p.Name == "create_note":
		g.inFlight.Add(1)
		defer g.inFlight.Add(-1)
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case srv == "notes" && p.Name == "meta_notes":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "small",
			Meta: mcp.Meta{"pad": strings.Repeat("m", g.big)}}}}, nil
	case srv == "notes" && p.Name == "flood_notes":
		return nil, &jsonrpc.Error{Code: mcpsrc.CodeMessageTooLarge, Message: "RESOURCE_EXHAUSTED: 15728640 bytes"}
	case srv == "notes" && p.Name == "search_notes":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("n", g.big)}}}, nil
	}
	return g.fakeSource.CallTool(ctx, srv, p)
}

func gatedProxy(t *testing.T) (*Proxy, *gatedSource) {
	t.Helper()
	src := &gatedSource{fakeSource: &fakeSource{}, gate: make(chan struct{}), big: MaxForwardedAnswer + 1}
	src.set(map[string][]string{"notes": {"create_note", "search_notes", "flood_notes", "meta_notes"}, "weather": {"get_weather"}})
	px, err := New(context.Background(), Config{Source: src, Embedder: testindex.Embedder{Dims: 64},
		Model: labels.Model{Name: "bow", Fingerprint: "f", Dims: 64}, ServerNames: []string{"notes", "weather"},
		Sessions: session.Config{DefaultExposure: session.ExposeMetaOnly}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	return px, src
}

func callTool(cs *mcp.ClientSession, srv, tool string) (*mcp.CallToolResult, error) {
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCall,
		Arguments: map[string]any{"server": srv, "tool": tool, "arguments": map[string]any{}}})
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprint(res.Content[0])
}

// TestForwardedCallsBoundedPerCaller: one caller holds at most
// MaxCallsPerCaller forwarded calls in flight (the fourteenth hostile
// pass: 40 calls whose 15 MB answers were never read grew the proxy to
// 1.4 GB); past them its calls are refused RESOURCE_EXHAUSTED, another
// caller's are not, and the places come back when the calls end.
func TestForwardedCallsBoundedPerCaller(t *testing.T) {
	px, src := gatedProxy(t)
	alice := connectAs(t, px, server.Caller{Name: "alice", Quota: "id:alice"}, make(chan struct{}, 8))
	bob := connectAs(t, px, server.Caller{Name: "bob", Quota: "id:bob"}, make(chan struct{}, 8))
	var wg sync.WaitGroup
	errs := make(chan string, MaxCallsPerCaller)
	for range MaxCallsPerCaller {
		wg.Go(func() {
			res, err := callTool(alice, "notes", "create_note")
			if err != nil || res.IsError {
				errs <- fmt.Sprint(err, resultText(res))
			}
		})
	}
	eventually(t, "alice's calls in flight", func() bool { return src.inFlight.Load() == MaxCallsPerCaller })
	res, err := callTool(alice, "weather", "get_weather")
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "RESOURCE_EXHAUSTED") {
		t.Fatalf("alice's call past %d in flight: %v %q, want RESOURCE_EXHAUSTED", MaxCallsPerCaller, err, resultText(res))
	}
	if res, err := callTool(bob, "weather", "get_weather"); err != nil || res.IsError {
		t.Fatalf("bob's call while alice's are in flight: %v %q", err, resultText(res))
	}
	close(src.gate)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("one of alice's first calls: %s", e)
	}
	eventually(t, "alice's places given back", func() bool {
		res, err := callTool(alice, "weather", "get_weather")
		return err == nil && !res.IsError
	})
}

// TestForwardedAnswerBounded: a backend answer over MaxForwardedAnswer
// bytes is an error result, not forwarded.
func TestForwardedAnswerBounded(t *testing.T) {
	px, _ := gatedProxy(t)
	cs := connect(t, px, make(chan struct{}, 8))
	res, err := callTool(cs, "notes", "search_notes")
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "over the") || len(resultText(res)) > 1024 {
		t.Fatalf("an answer of %d bytes: %v, error %v, %d bytes of text %.80q", MaxForwardedAnswer+1, err, res != nil && res.IsError, len(resultText(res)), resultText(res))
	}
	// _meta counts (an answer of 4.25 MB of _meta was passed on, the
	// sixteenth hostile pass).
	res, err = callTool(cs, "notes", "meta_notes")
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "over the") {
		t.Fatalf("an answer of %d bytes of _meta: %v %.80q", MaxForwardedAnswer+1, err, resultText(res))
	}
	// One over mcpsrc.MaxMessage was cut while it was read (mcpsrc's
	// TestPoolCapsBackendMessages): its error is the caller's.
	res, err = callTool(cs, "notes", "flood_notes")
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "RESOURCE_EXHAUSTED: the answer of server \"notes\"'s flood_notes is over") {
		t.Fatalf("an answer cut while read: %v %q", err, resultText(res))
	}
}

// TestToolDefinitionsShared: sessions show one definition of each tool,
// made with the index, and keep only its digest (a copy of each in each
// session grew the proxy 16 MB a session for 400 tools of 20 KB schemas,
// the fourteenth hostile pass); a tool whose definition is over
// MaxToolDef is left out.
func TestToolDefinitionsShared(t *testing.T) {
	fat := map[string]any{"type": "object", "description": strings.Repeat("f", MaxToolDef)}
	snap := mcpsrc.Snapshot{Servers: []mcpsrc.ServerState{{Name: "notes", Tools: []*mcp.Tool{
		{Name: "create", Description: "create a note", InputSchema: map[string]any{"type": "object"}},
		{Name: "fat", Description: "a fat schema", InputSchema: fat},
	}}}}
	_, tools, err := buildCatalog(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 {
		t.Fatalf("%d tools, want create alone (fat is over %d bytes)", len(tools), MaxToolDef)
	}
	for name, lt := range tools {
		if lt.shown == nil || lt.shown.Name != name || len(lt.def) != 64 {
			t.Fatalf("%s: shown %+v, def %q; want the exposed tool and a sha256", name, lt.shown, lt.def)
		}
	}

	px, _ := newTestProxyConfig(t, nil, session.Config{DefaultExposure: session.ExposeAll})
	for range 2 {
		connect(t, px, make(chan struct{}, 8))
	}
	px.mu.Lock()
	defer px.mu.Unlock()
	if len(px.clients) != 2 {
		t.Fatalf("%d sessions", len(px.clients))
	}
	for c := range px.clients {
		c.mu.Lock()
		if len(c.shown) == 0 {
			t.Error("a session shows no backend tool")
		}
		for name, def := range c.shown {
			if len(def) != 64 {
				t.Errorf("session keeps %d bytes for %s, want its digest", len(def), name)
			}
		}
		c.mu.Unlock()
	}
}
