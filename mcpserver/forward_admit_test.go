package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// places is a fake Config.Admit that counts the places its tool calls
// hold; refuse, if set, refuses the nth tool-call admission (from 1).
type places struct {
	mu                   sync.Mutex
	held, taken, refused int
	refuse               func(n int) bool
}

func (p *places) admit(ctx context.Context, method, _ string, _ int) (context.Context, func(), error) {
	if method != "tools/call" {
		return ctx, func() {}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse != nil && p.refuse(p.taken+p.refused+1) {
		p.refused++
		return ctx, nil, status.Error(codes.ResourceExhausted, "server overloaded: test")
	}
	p.taken++
	p.held++
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			p.mu.Lock()
			p.held--
			p.mu.Unlock()
		})
	}, nil
}

func (p *places) now() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// waitNone waits for every place to be given back (a minute at most: a
// place never given back fails the test).
func (p *places) waitNone(t *testing.T) {
	t.Helper()
	for end := time.Now().Add(time.Minute); p.now() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d places never given back", p.now())
		}
	}
}

// backendFunc is a fake Caller.
type backendFunc func(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error)

func (f backendFunc) CallTool(ctx context.Context, _ string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return f(ctx, params)
}

// encodeProbe is a structured answer that records the places held each
// time it is encoded (by Forward measuring it, by the SDK writing it).
// It gives a place being given back during its encoding (by another
// goroutine: context.AfterFunc's) 50 ms to show: a slow machine can
// only miss it, never fail a correct build.
type encodeProbe struct {
	p    *places
	mu   sync.Mutex
	seen []int
}

func (e *encodeProbe) MarshalJSON() ([]byte, error) {
	for i := 0; i < 50 && e.p.now() > 0; i++ {
		time.Sleep(time.Millisecond)
	}
	e.mu.Lock()
	e.seen = append(e.seen, e.p.now())
	e.mu.Unlock()
	return []byte(`{"ok":true}`), nil
}

// forwardServer is a session on a server with one tool, fwd, that calls
// before(ctx) and then forwards its arguments to backend with Forward,
// as call_tool does.
func forwardServer(t *testing.T, p *places, before func(context.Context), backend backendFunc) *mcp.ClientSession {
	t.Helper()
	s := NewBare(Config{Logger: discard(), Admit: p.admit, Timeout: time.Minute}) // a default deadline, cancelled when guard returns
	type in struct {
		Args map[string]any `json:"args"`
	}
	AddTool(s, &mcp.Tool{Name: "fwd"}, func(ctx context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
		if before != nil {
			before(ctx)
		}
		return Forward(ctx, backend, "srv", "t", in.Args), nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestForwardedCallPlaces: a forwarded tool call holds an admission
// place while the SDK checks and decodes its arguments and while they
// are encoded for the backend (they reach it encoded), none while the
// backend works, and one again from the backend's answer until the SDK
// has written it (its encoding included); then none. On main (every
// place given back when the handler returned) the backend's work held
// one and the answer was written without.
func TestForwardedCallPlaces(t *testing.T) {
	p := &places{}
	probe := &encodeProbe{p: p}
	var atStart, inBackend int
	var sent json.RawMessage
	cs := forwardServer(t, p, func(context.Context) { atStart = p.now() },
		func(_ context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			inBackend = p.now()
			sent, _ = params.Arguments.(json.RawMessage)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}, StructuredContent: probe}, nil
		})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fwd", Arguments: map[string]any{"args": map[string]any{"q": []int{1, 2}}}})
	if err != nil || res.IsError {
		t.Fatalf("forwarded call: %v %v", res, err)
	}
	p.waitNone(t)
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if atStart != 1 || inBackend != 0 || string(sent) != `{"q":[1,2]}` {
		t.Fatalf("places held when the handler started %d, while the backend worked %d (arguments sent %q); want 1, 0 (encoded: {\"q\":[1,2]})",
			atStart, inBackend, sent)
	}
	if len(probe.seen) < 2 || !allOne(probe.seen) {
		t.Fatalf("places held at each encoding of the answer %v, want 1 at each (Forward's measure, the SDK's answer)", probe.seen)
	}
	if p.taken != 2 {
		t.Fatalf("%d places taken, want 2 (before the SDK's checks, for the answer)", p.taken)
	}
}

func allOne(v []int) bool {
	for _, n := range v {
		if n != 1 {
			return false
		}
	}
	return true
}

// TestForwardedCallPlacesNotLeaked: whatever ends a forwarded call (the
// backend fails; the client cancels while the backend works, or before
// the handler forwards, which must not give the place back while the
// call's handling goes on), every place taken is given back; a refused
// admission is the call's RESOURCE_EXHAUSTED error result and the
// backend is not called; a refused place for the answer loses no answer.
func TestForwardedCallPlacesNotLeaked(t *testing.T) {
	args := map[string]any{"args": map[string]any{"q": "x"}}
	t.Run("backend error", func(t *testing.T) {
		p := &places{}
		cs := forwardServer(t, p, nil, func(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			return nil, errors.New("boom")
		})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fwd", Arguments: args})
		if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "UNKNOWN") {
			t.Fatalf("failed backend: %v %v, want an UNKNOWN error result", res, err)
		}
		p.waitNone(t)
	})
	t.Run("cancel while the backend works", func(t *testing.T) {
		p := &places{}
		working := make(chan struct{})
		ended := make(chan struct{})
		cs := forwardServer(t, p, nil, func(ctx context.Context, _ *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			defer close(ended)
			close(working)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-working; cancel() }()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fwd", Arguments: args}); err == nil {
			t.Fatal("cancelled call answered")
		}
		<-ended
		p.waitNone(t)
	})
	t.Run("cancel before forwarding", func(t *testing.T) {
		p := &places{}
		var atCancel int
		started := make(chan struct{})
		called := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cs := forwardServer(t, p, func(hctx context.Context) {
			close(started)
			<-hctx.Done() // the client's cancel reached the server
			// A place given back on another goroutine: as encodeProbe.
			for i := 0; i < 50 && p.now() > 0; i++ {
				time.Sleep(time.Millisecond)
			}
			atCancel = p.now()
		}, func(ctx context.Context, _ *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			called <- struct{}{}
			return nil, ctx.Err()
		})
		go func() { <-started; cancel() }()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fwd", Arguments: args}); err == nil {
			t.Fatal("cancelled call answered")
		}
		<-called
		p.waitNone(t)
		if atCancel != 1 {
			t.Fatalf("%d places held after the client cancelled, the handler still working; want 1", atCancel)
		}
	})
	t.Run("refused", func(t *testing.T) {
		p := &places{refuse: func(n int) bool { return n == 1 }}
		var called atomic.Bool
		cs := forwardServer(t, p, nil, func(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			called.Store(true)
			return &mcp.CallToolResult{}, nil
		})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fwd", Arguments: args})
		if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "RESOURCE_EXHAUSTED: server overloaded") || called.Load() {
			t.Fatalf("refused call: %v %v (backend called %v), want a RESOURCE_EXHAUSTED error result, no backend call", res, err, called.Load())
		}
		p.waitNone(t)
	})
	t.Run("answer's place refused", func(t *testing.T) {
		p := &places{refuse: func(n int) bool { return n == 2 }}
		cs := forwardServer(t, p, nil, func(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer"}}}, nil
		})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fwd", Arguments: args})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "answer" {
			t.Fatalf("call whose answer's place was refused: %v %v, want its answer", res, err)
		}
		p.waitNone(t)
		if p.refused != 1 {
			t.Fatalf("%d admissions refused, want 1 (the answer's)", p.refused)
		}
	})
}
