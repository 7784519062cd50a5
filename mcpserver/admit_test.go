package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/server"
)

type admittedKey struct{}

// TestToolCallsAreAdmitted: every tool call passes Config.Admit before its
// handler runs, with the caller Config.Caller named and the daemon's
// deadline marked as not the caller's own; the handler runs with the
// context Admit returned, and the admission ends when the handler has
// returned. A refusal is the call's error result, and the tool never runs.
func TestToolCallsAreAdmitted(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	refuse := false
	released := 0
	admit := func(ctx context.Context, method, tool string, size int) (context.Context, func(), error) {
		if method != "tools/call" { // testOtherRequestsAdmitted's
			return ctx, func() {}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		_, hasDeadline := ctx.Deadline()
		seen = append(seen, server.CallerFrom(ctx).Quota+" "+tool+" "+map[bool]string{true: "deadline", false: "none"}[hasDeadline])
		if size < len(`{"text":"x"}`) {
			t.Errorf("arguments' size %d", size)
		}
		if refuse {
			return ctx, nil, status.Error(codes.ResourceExhausted, "server overloaded: test")
		}
		return context.WithValue(ctx, admittedKey{}, tool), func() {
			mu.Lock()
			released++
			mu.Unlock()
		}, nil
	}
	s := NewBare(Config{Logger: discard(), Timeout: time.Minute, Admit: admit,
		Caller: func(string, http.Header) (server.Caller, error) {
			return server.Caller{Name: "alice", Quota: "token:alice"}, nil
		}})
	ran := 0
	type in struct {
		Text string `json:"text"`
	}
	type out struct {
		Admitted string `json:"admitted"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, out, error) {
		mu.Lock()
		defer mu.Unlock()
		ran++
		if released != ran-1 {
			t.Errorf("admission ended before the tool ran")
		}
		a, _ := ctx.Value(admittedKey{}).(string)
		return nil, out{Admitted: a}, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("admitted call: %v %v", res, err)
	}
	if got := res.StructuredContent.(map[string]any)["admitted"]; got != "echo" {
		t.Fatalf("the tool ran with context %v, want Admit's", got)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "RESOURCE_EXHAUSTED: server overloaded") {
		t.Fatalf("refused call: %v %v, want an error result RESOURCE_EXHAUSTED", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran != 1 || released != 1 {
		t.Fatalf("tool ran %d times, admission ended %d times; want 1 and 1", ran, released)
	}
	if want := "token:alice echo deadline"; len(seen) != 2 || seen[0] != want {
		t.Fatalf("admitted %v, want %q twice", seen, want)
	}
}

// marshalProbe is a tool's input schema that reports, each time the SDK
// encodes it (a tools/list answer), whether that request's admission was
// still held.
type marshalProbe struct {
	held func() bool
	seen chan bool
}

func (p *marshalProbe) MarshalJSON() ([]byte, error) {
	if p.seen != nil {
		p.seen <- p.held()
	}
	return []byte(`{"type":"object"}`), nil
}

// TestOtherRequestsAreAdmitted: a request that is not a tool call
// (initialize, tools/list, ping; server/discover in the sessionless
// protocol) passes Config.Admit by its method, with the caller
// Config.Identify names from the request, and holds its place until its
// answer has been encoded (the work of a tools/list), then gives it back
// once; a refusal is a JSON-RPC error RESOURCE_EXHAUSTED with Admit's
// message, and the request is not answered otherwise. Notifications
// (notifications/initialized) pass no admission.
func TestOtherRequestsAreAdmitted(t *testing.T) {
	for _, c := range []struct {
		version string
		want    []string // admitted before the refused tools/list
	}{
		{"2025-11-25", []string{"initialize", "tools/list", "ping"}},
		{"2026-07-28", []string{"server/discover", "tools/list"}},
	} {
		t.Run(c.version, func(t *testing.T) { testOtherRequestsAdmitted(t, c.version, c.want) })
	}
}

func testOtherRequestsAdmitted(t *testing.T, version string, want []string) {
	var mu sync.Mutex
	var seen []string
	held, refuse := 0, false
	released := make(chan string, 16)
	admit := func(ctx context.Context, method, tool string, size int) (context.Context, func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if c := server.CallerFrom(ctx); c.Quota != "token:bob" || tool != "" || size != 0 {
			t.Errorf("%s admitted for %q with tool %q and size %d, want token:bob, no tool, 0", method, c.Quota, tool, size)
		}
		seen = append(seen, method)
		if refuse {
			return ctx, nil, status.Error(codes.ResourceExhausted, "server overloaded: test")
		}
		held++
		var once sync.Once
		return ctx, func() {
			once.Do(func() {
				mu.Lock()
				held--
				mu.Unlock()
				released <- method
			})
		}, nil
	}
	s := NewBare(Config{Logger: discard(), Admit: admit,
		Identify: func(http.Header) (server.Caller, error) { return server.Caller{Name: "bob", Quota: "token:bob"}, nil }})
	probe := &marshalProbe{held: func() bool { mu.Lock(); defer mu.Unlock(); return held > 0 }}
	s.AddTool(&mcp.Tool{Name: "probe", InputSchema: probe}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	probe.seen = make(chan bool, 4) // from now on: AddTool encodes the schema once
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wantReleased := func(method string) {
		t.Helper()
		select {
		case m := <-released:
			if m != method {
				t.Fatalf("released %s, want %s", m, method)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s's admission never ended", method)
		}
	}
	wantReleased(want[0])
	res, err := cs.ListTools(ctx, nil)
	if err != nil || len(res.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", res, err)
	}
	if !<-probe.seen {
		t.Fatal("the tools/list answer was encoded after its admission ended")
	}
	wantReleased("tools/list")
	if slices.Contains(want, "ping") {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatal(err)
		}
		wantReleased("ping")
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	var we *jsonrpc.Error
	if _, err := cs.ListTools(ctx, nil); !errors.As(err, &we) || we.Code != CodeResourceExhausted ||
		we.Message != "RESOURCE_EXHAUSTED: server overloaded: test" {
		t.Fatalf("refused tools/list: %v, want JSON-RPC error %d RESOURCE_EXHAUSTED", err, CodeResourceExhausted)
	}
	select {
	case <-probe.seen:
		t.Fatal("a refused tools/list was answered")
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	if want := append(want, "tools/list"); !slices.Equal(seen, want) || held != 0 {
		t.Fatalf("admitted %q (%d held), want %q (none held)", seen, held, want)
	}
}
