package mcpserver

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
	admit := func(ctx context.Context, tool string, size int) (context.Context, func(), error) {
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
