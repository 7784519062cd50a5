package mcpserver

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAddToolKeepsSchemasEncoded: AddTool's tools list the same schemas
// as mcp.AddTool's (inferred from the same types), kept encoded on the
// tool, and the SDK still checks arguments against them.
func TestAddToolKeepsSchemasEncoded(t *testing.T) {
	h := func(context.Context, *mcp.CallToolRequest, RouteInput) (*mcp.CallToolResult, RouteOutput, error) {
		return nil, RouteOutput{Servers: []Scored{}, Tools: []FoundTool{}, Categories: []Scored{}}, nil
	}
	list := func(add func(*mcp.Server, *mcp.Tool)) (*mcp.ClientSession, map[string]any) {
		t.Helper()
		s := NewBare(Config{Logger: discard()})
		add(s, &mcp.Tool{Name: "route"})
		st, ct := mcp.NewInMemoryTransports()
		ctx := context.Background()
		if _, err := s.Connect(ctx, st, nil); err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) != 1 {
			t.Fatalf("tools/list: %v %v", res, err)
		}
		return cs, map[string]any{"in": res.Tools[0].InputSchema, "out": res.Tools[0].OutputSchema}
	}
	var added *mcp.Tool
	cs, got := list(func(s *mcp.Server, tool *mcp.Tool) { added = tool; AddTool(s, tool, h) })
	_, want := list(func(s *mcp.Server, tool *mcp.Tool) { mcp.AddTool(s, tool, h) })
	if !reflect.DeepEqual(got, want) || got["in"] == nil || got["out"] == nil {
		t.Fatalf("schemas listed:\n%v\nwant mcp.AddTool's:\n%v", got, want)
	}
	if _, ok := added.InputSchema.(json.RawMessage); !ok {
		t.Fatalf("input schema kept as %T, want json.RawMessage", added.InputSchema)
	}
	if _, ok := added.OutputSchema.(json.RawMessage); !ok {
		t.Fatalf("output schema kept as %T, want json.RawMessage", added.OutputSchema)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "route", Arguments: map[string]any{"max_tools": "many"}})
	if err == nil && !res.IsError {
		t.Fatal("arguments of the wrong type were accepted")
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "route", Arguments: map[string]any{"query": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("valid arguments: %v %v", res, err)
	}
}
