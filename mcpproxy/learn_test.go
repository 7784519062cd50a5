package mcpproxy

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// reported is what the learner holds: each report's servers and tools,
// sorted, oldest first.
func reported(l *learn.Learner) [][]string {
	var out [][]string
	for _, r := range l.Export("") {
		got := slices.Clone(r.Servers)
		for _, t := range r.Tools {
			got = append(got, t.Server+"/"+t.Name)
		}
		slices.Sort(got)
		out = append(out, got)
	}
	return out
}

// The proxy reports the calls it forwards itself: a session's calls since
// its last hub__analyze_prompt, each call replacing the report of that
// request with one naming every call so far; nothing before a prompt.
func TestProxyReportsForwardedCalls(t *testing.T) {
	ctx := context.Background()
	l, err := learn.New(ctx, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{}
	src.set(map[string][]string{"notes": {"create_note", "search_notes"}, "weather": {"get_weather"}})
	px, err := New(ctx, Config{Source: src, Embedder: testindex.Embedder{Dims: 64},
		Model: labels.Model{Name: "bow", Fingerprint: "f", Dims: 64}, ServerNames: []string{"notes", "weather"},
		Sessions: session.Config{DefaultExposure: session.ExposeAll}, Logger: slog.New(slog.DiscardHandler), Learner: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	if err := px.Rebuild(ctx, src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	cs := connectAs(t, px, server.Caller{Name: server.Anonymous, Quota: "mcp"}, nil)
	call := func(name string, args map[string]any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			if res != nil && len(res.Content) > 0 {
				t.Fatalf("%s: %v %+v", name, err, res.Content[0])
			}
			t.Fatalf("%s: %v %+v", name, err, res)
		}
	}
	call("weather__get_weather", map[string]any{})
	if got := reported(l); len(got) != 0 {
		t.Fatalf("a call before any prompt was reported: %v", got)
	}
	call(ToolAnalyze, map[string]any{"prompt": "get the weather with the weather tool"})
	call("weather__get_weather", map[string]any{})
	if got, want := reported(l), [][]string{{"weather", "weather/get_weather"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after one call: %v, want %v", got, want)
	}
	call(ToolCall, map[string]any{"server": "notes", "tool": "create_note"})
	if got, want := reported(l), [][]string{{"notes", "notes/create_note", "weather", "weather/get_weather"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after a second call: %v, want %v (one report, replaced)", got, want)
	}
	call(ToolAnalyze, map[string]any{"prompt": "create a note in my notebook"})
	call("notes__create_note", map[string]any{})
	got := reported(l)
	if len(got) != 2 || !slices.Equal(got[1], []string{"notes", "notes/create_note"}) {
		t.Fatalf("after a new prompt and a call: %v, want a second report of notes alone", got)
	}
	if src.calls[len(src.calls)-1] != "notes/create_note" || len(src.calls) != 4 {
		t.Fatalf("forwarded calls %v", src.calls)
	}
}
