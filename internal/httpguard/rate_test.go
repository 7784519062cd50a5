package httpguard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/classifierd/classifierd/server"
)

// TestRateRefusesBeforeTheHandler: an MCP listener's guard with a rate
// of requests per caller serves each caller's burst, then refuses its
// next request 429 with a JSON-RPC error RESOURCE_EXHAUSTED under the
// request's id (read from the first bytes of its body, wherever the
// client put the id), Retry-After, and Connection: close on HTTP/1.1,
// without the handler (the MCP SDK) seeing it; a notification past the
// rate gets the same with no id; a batch's messages each count; another
// caller is served meanwhile; each refusal is counted.
func TestRateRefusesBeforeTheHandler(t *testing.T) {
	rate := NewRequestRate(0.001, 3) // no refill within the test
	var handled atomic.Int64
	g := Guard{MaxBody: 1 << 20, JSONOnly: true, CountValues: true, Messages: MCPMessages, Refuse: RefuseMCP, Rate: rate,
		Auth: func(r *http.Request) (server.Caller, error) { return server.Caller{Name: r.Header.Get("X-Who")}, nil }}
	ts := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	})))
	defer ts.Close()
	type answer struct {
		ID    *json.RawMessage `json:"id"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	post := func(who, body string) (*http.Response, answer) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Who", who)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var a answer
		if resp.StatusCode != http.StatusAccepted {
			if err := json.Unmarshal(data, &a); err != nil {
				t.Fatalf("%s: %q: %v", resp.Status, data, err)
			}
		}
		return resp, a
	}
	refused := func(resp *http.Response, a answer, wantID string) {
		t.Helper()
		id := ""
		if a.ID != nil {
			id = string(*a.ID)
		}
		if resp.StatusCode != http.StatusTooManyRequests || a.Error == nil || a.Error.Code != CodeResourceExhausted ||
			!strings.HasPrefix(a.Error.Message, "RESOURCE_EXHAUSTED: ") || id != wantID {
			t.Fatalf("past the rate: %s %+v (id %s); want 429, %d RESOURCE_EXHAUSTED under id %q (\"\": none)", resp.Status, a.Error, id, CodeResourceExhausted, wantID)
		}
		if !resp.Close || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("past the rate: Connection: close %v, Retry-After %q; want the connection closed, 1", resp.Close, resp.Header.Get("Retry-After"))
		}
	}
	for i := range 3 {
		if resp, _ := post("carol", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("carol's request %d of her burst of 3: %s", i, resp.Status)
		}
	}
	// The TypeScript SDK writes the id last.
	resp, a := post("carol", `{"method":"tools/list","params":{},"jsonrpc":"2.0","id":"c-4"}`)
	refused(resp, a, `"c-4"`)
	resp, a = post("carol", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"q":"`+strings.Repeat("a", 64<<10)+`"}}}`)
	refused(resp, a, `5`)
	resp, a = post("carol", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	refused(resp, a, "")
	if handled.Load() != 3 {
		t.Fatalf("%d requests reached the handler, want carol's 3 within her burst", handled.Load())
	}
	if resp, _ := post("bob", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("bob, another caller, while carol is past her rate: %s", resp.Status)
	}
	// A batch's messages each count: dave's 2 pass, his next 3 do not
	// (one left), and no id names the batch.
	if resp, _ := post("dave", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("dave's batch of 2: %s", resp.Status)
	}
	resp, a = post("dave", `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	refused(resp, a, "")
	if got := rate.Refused(); got != 4 {
		t.Fatalf("%d refusals counted, want 4", got)
	}
	if handled.Load() != 5 {
		t.Fatalf("%d requests reached the handler, want 5", handled.Load())
	}
}

// TestLeadingIDAsTheSDKHoldsIt: the id of a refused request is the
// SDK's reading of the one rpcid.Leading finds.
func TestLeadingIDAsTheSDKHoldsIt(t *testing.T) {
	for body, want := range map[string]any{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`:             int64(7),
		`{"method":"ping","jsonrpc":"2.0","id":"x"}`:           "x",
		`{"jsonrpc":"2.0","id":12,"params":{"q":"cut here`:     int64(12),
		`{"jsonrpc":"2.0","method":"notifications/cancelled"}`: nil,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`:          nil,
	} {
		id, ok := leadingID([]byte(body))
		if ok != (want != nil) || ok && id.Raw() != want {
			t.Errorf("leadingID(%s) = %v, %v; want %v", body, id.Raw(), ok, want)
		}
	}
}
