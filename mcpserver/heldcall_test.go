package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldState counts the admissions held in a test of HoldCall.
type heldState struct {
	mu   sync.Mutex
	held int
	log  []string
}

func (h *heldState) take(what string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held++
	h.log = append(h.log, "take "+what)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.held--
			h.log = append(h.log, "give "+what)
		})
	}
}

func (h *heldState) now() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// probeArg is an argument that notes, when the SDK decodes it (its
// validation of a typed tool's input), how many admissions are held.
type probeArg struct{}

var decoding struct {
	mu    sync.Mutex
	state *heldState
	seen  []int
}

func (p *probeArg) UnmarshalJSON([]byte) error {
	decoding.mu.Lock()
	defer decoding.mu.Unlock()
	decoding.seen = append(decoding.seen, decoding.state.now())
	return nil
}

type fwdIn struct {
	Probe probeArg       `json:"probe"`
	Args  map[string]any `json:"args"`
}

// backendProbe is a server a call is forwarded to: it notes how many
// admissions are held while it works, and answers big.
type backendProbe struct {
	state *heldState
	seen  []int
	args  []any
}

func (b *backendProbe) CallTool(_ context.Context, _ string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	b.seen = append(b.seen, b.state.now())
	b.args = append(b.args, p.Arguments)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("a", EncodeAdmitBytes)}}}, nil
}

// TestHeldCallReachesTheCall: a tool call admitted in front of the SDK
// (HoldCall, as httpguard.AdmitCalls does over HTTP) reaches Config.Admit
// in its context (HeldCallFrom), which keeps it as the call's own: it is
// held while the SDK decodes the call's arguments, given back while the
// server it is forwarded to works (Forward), taken again for a big
// answer, and every admission is given back in the end. A request
// without one (no tool call in its body) gets none, and the call is
// admitted on its own.
func TestHeldCallReachesTheCall(t *testing.T) {
	state := &heldState{}
	decoding.mu.Lock()
	decoding.state, decoding.seen = state, nil
	decoding.mu.Unlock()
	var sawHeld []bool
	admit := func(ctx context.Context, method, tool string, size int) (context.Context, func(), error) {
		if method != "tools/call" {
			return ctx, func() {}, nil
		}
		h := HeldCallFrom(ctx)
		sawHeld = append(sawHeld, h != nil)
		if h != nil {
			return ctx, h.End, nil
		}
		return ctx, state.take("own"), nil
	}
	s := NewBare(Config{Logger: discard(), Timeout: time.Minute, Admit: admit})
	backend := &backendProbe{state: state}
	AddTool(s, &mcp.Tool{Name: "fwd"}, func(ctx context.Context, _ *mcp.CallToolRequest, in fwdIn) (*mcp.CallToolResult, any, error) {
		return Forward(ctx, backend, "srv", "tool", in.Args), nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	admitBodies := true
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := readAllKeep(r)
		if admitBodies && strings.Contains(string(body), `"tools/call"`) {
			defer HoldCall(r.Header, state.take("http"))()
		}
		sdk.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(front)
	defer hs.Close()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func() {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fwd", Arguments: map[string]any{"probe": map[string]any{}, "args": map[string]any{"k": 1}}})
		if err != nil || res.IsError {
			if err == nil {
				err = errors.New(res.Content[0].(*mcp.TextContent).Text)
			}
			t.Fatalf("call: %v", err)
		}
		// The answer's admission ends with the request, after the
		// answer is sent.
		for end := time.Now().Add(time.Minute); state.now() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%d admissions never given back: %v", state.now(), state.log)
			}
		}
	}
	call()
	admitBodies = false
	call()
	decoding.mu.Lock()
	defer decoding.mu.Unlock()
	// Each call's admission, then its answer's (no HeldCall).
	if fmt.Sprint(sawHeld) != "[true false false false]" {
		t.Errorf("Admit saw a HeldCall %v, want [true false false false]", sawHeld)
	}
	if len(decoding.seen) != 2 || decoding.seen[0] != 1 || decoding.seen[1] != 1 {
		t.Errorf("admissions held while the SDK decoded the arguments: %v, want [1 1]", decoding.seen)
	}
	if len(backend.seen) != 2 || backend.seen[0] != 0 || backend.seen[1] != 0 {
		t.Errorf("admissions held while the server worked: %v, want [0 0]", backend.seen)
	}
	for _, a := range backend.args {
		if b, ok := a.(json.RawMessage); !ok || string(b) != `{"k":1}` {
			t.Errorf("forwarded arguments %#v, want them encoded before the server's work: {\"k\":1}", a)
		}
	}
	// Each call: its admission (the HTTP front's, then its own), given
	// back for the server's work; the answer's, given back at its end.
	want := "take http,give http,take own,give own," + "take own,give own,take own,give own"
	if got := strings.Join(state.log, ","); got != want {
		t.Errorf("admissions %s, want %s", got, want)
	}
}

// readAllKeep reads r's body and leaves it for the next reader.
func readAllKeep(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, err
}
