package httpguard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/server"
)

// TestAdmitCalls: behind the guard, a POST whose body holds a tools/call
// (wherever its method is, however it is escaped, in a batch) is admitted
// under the guard's caller before the handler behind (the MCP SDK) runs,
// and the admission is given back once the request is answered; other
// requests pass unadmitted. A refused call is answered 429 with a
// JSON-RPC error RESOURCE_EXHAUSTED under its id, and the handler never
// runs.
func TestAdmitCalls(t *testing.T) {
	big := strings.Repeat(`"x",`, 10000)
	for _, tc := range []struct {
		name, body string
		call       bool
	}{
		{"call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"call_tool","arguments":{}}}`, true},
		{"method last", `{"jsonrpc":"2.0","id":1,"params":{"name":"t","arguments":{"q":[` + big + `"x"]}},"method":"tools/call"}`, true},
		{"escaped", `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t"}}`, true},
		{"key case", `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"name":"t"}}`, true},
		{"twice", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"t"}}`, true},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}}]`, true},
		{"list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"name only", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"tools/call"}}`, false},
		{"not JSON", `tools/call`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var admitted, released int
			var who string
			admit := func(ctx context.Context) (func(), error) {
				admitted++
				who = server.CallerFrom(ctx).Name
				return func() { released++ }, nil
			}
			ran := false
			h := AdmitCalls(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran = true
				if admitted != map[bool]int{true: 1, false: 0}[tc.call] || released != 0 {
					t.Errorf("handler ran with %d admitted, %d released; want %v admitted, none released", admitted, released, tc.call)
				}
			}), admit)
			g := Guard{Auth: func(*http.Request) (server.Caller, error) { return server.Caller{Name: "alice", Quota: "alice"}, nil },
				MaxBody: 1 << 20, CheckBody: CheckMCPBody, Refuse: RefuseMCP}
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			g.Wrap(h).ServeHTTP(w, r)
			if !ran {
				t.Fatalf("handler did not run: %d %s", w.Code, w.Body.String())
			}
			want := 0
			if tc.call {
				want = 1
			}
			if admitted != want || released != want {
				t.Fatalf("admitted %d, released %d, want %d and %d", admitted, released, want, want)
			}
			if tc.call && who != "alice" {
				t.Fatalf("admitted for %q, want the guard's caller alice", who)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		h := AdmitCalls(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("a refused call reached the handler")
		}), func(context.Context) (func(), error) {
			return nil, status.Error(codes.ResourceExhausted, "server overloaded: test")
		})
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":"c-9","method":"tools/call","params":{"name":"t"}}`))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		Guard{MaxBody: 1 << 20, Refuse: RefuseMCP}.Wrap(h).ServeHTTP(w, r)
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != http.StatusTooManyRequests || string(m.ID) != `"c-9"` ||
			m.Error.Code != CodeResourceExhausted || m.Error.Message != "RESOURCE_EXHAUSTED: server overloaded: test" {
			t.Fatalf("refusal %d %s (%v), want 429, id \"c-9\", code %d RESOURCE_EXHAUSTED", w.Code, w.Body.String(), err, CodeResourceExhausted)
		}
	})
}
