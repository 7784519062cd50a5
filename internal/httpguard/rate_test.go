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
// rate gets the same under "id": null; a batch's messages each count; another
// caller is served meanwhile; each refusal is counted.
func TestRateRefusesBeforeTheHandler(t *testing.T) {
	ts, rate, handled := rateServer(t, 3, func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) })
	type answer struct {
		ID    json.RawMessage `json:"id"` // "null" for null, empty for no member
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
		id := string(a.ID)
		if resp.StatusCode != http.StatusTooManyRequests || a.Error == nil || a.Error.Code != CodeResourceExhausted ||
			!strings.HasPrefix(a.Error.Message, "RESOURCE_EXHAUSTED: ") || id != wantID {
			t.Fatalf("past the rate: %s %+v (id %s); want 429, %d RESOURCE_EXHAUSTED under id %q (\"\": no member)", resp.Status, a.Error, id, CodeResourceExhausted, wantID)
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
	refused(resp, a, "null")
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
	refused(resp, a, "null")
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

// TestRefusalWithoutIDSaysNull: a refusal past the rate whose request's
// id was not found (past the first 4 KiB of the body, a batch, a
// notification, a GET) is the exact JSON-RPC error JSON-RPC 2.0 asks
// for, with "id": null; one whose id was found carries it. The
// nineteenth hostile pass (LOW 8): no id member at all.
func TestRefusalWithoutIDSaysNull(t *testing.T) {
	ts, _, _ := rateServer(t, 1, func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) })
	send := func(method, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+"/mcp", strings.NewReader(body))
		if body == "" {
			req.Body = http.NoBody
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	if code, _ := send(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); code != http.StatusAccepted {
		t.Fatalf("carol's burst of 1: %d", code)
	}
	const msg = `"message":"RESOURCE_EXHAUSTED: more than 0.001 MCP requests a second (after a burst of 1) from this caller: retry later, or raise --mcp-requests-per-second"}}`
	const null = `{"jsonrpc":"2.0","id":null,"error":{"code":-32029,` + msg
	for _, c := range []struct{ name, method, body, want string }{
		{"id after 4 KiB", http.MethodPost, `{"jsonrpc":"2.0","method":"tools/list","params":{"cursor":"` + strings.Repeat("x", 5<<10) + `"},"id":9}`, null},
		{"batch", http.MethodPost, `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`, null},
		{"notification", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, null},
		{"GET", http.MethodGet, "", null},
		{"id found", http.MethodPost, `{"jsonrpc":"2.0","id":"a<b>&","method":"ping"}`, `{"jsonrpc":"2.0","id":"a<b>&","error":{"code":-32029,` + msg},
	} {
		code, body := send(c.method, c.body)
		if code != http.StatusTooManyRequests || body != c.want {
			t.Errorf("%s past the rate: %d %s\nwant 429 %s", c.name, code, body, c.want)
		}
	}
	// Any refusal written with no id says null too (413 here).
	rec := httptest.NewRecorder()
	WriteMCPErrorNoID(rec, http.StatusRequestEntityTooLarge, CodeTooLarge, tooLarge(10))
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32013,"message":"RESOURCE_EXHAUSTED: request body is over the limit of 10 bytes"}}`; rec.Body.String() != want {
		t.Errorf("WriteMCPErrorNoID: %s\nwant %s", rec.Body, want)
	}
}

// TestRateCountsGetAndDelete: an MCP listener's GETs (the event stream)
// and DELETEs (a session's end) count one each against their caller's
// rate with its POSTs: past it they are refused 429 with Retry-After, a
// JSON-RPC -32029 error and Connection: close, before the handler (the
// SDK, which answered an unknown session 404 however many came); another
// caller's are served. The nineteenth hostile pass (LOW 6): 83,000 GETs
// (or DELETEs) of an unknown session in 8 s on 4 kept-alive connections,
// none refused or closed, at 1.5 times the flooder's CPU.
func TestRateCountsGetAndDelete(t *testing.T) {
	ts, rate, handled := rateServer(t, 4, func(w http.ResponseWriter) {
		http.Error(w, "session not found", http.StatusNotFound) // the SDK, of an unknown session
	})
	send := func(who, method string) *http.Response {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		req, _ := http.NewRequest(method, ts.URL+"/mcp", body)
		req.Header.Set("X-Who", who)
		req.Header.Set("Mcp-Session-Id", "NOSUCHSESSION")
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		} else if method == http.MethodGet {
			req.Header.Set("Accept", "text/event-stream")
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPost, http.MethodGet} {
		if resp := send("carol", m); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("carol's %s within her burst of 4: %s", m, resp.Status)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPost} {
		resp := send("carol", m)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("carol's %s past her rate: %s, Retry-After %q, Connection: close %v, %s; want 429, 1, closed, a JSON-RPC error",
				m, resp.Status, resp.Header.Get("Retry-After"), resp.Close, resp.Header.Get("Content-Type"))
		}
	}
	if got := handled.Load(); got != 4 {
		t.Errorf("%d requests reached the handler, want carol's 4 within her burst", got)
	}
	if got := rate.Refused(); got != 3 {
		t.Errorf("%d refusals counted, want 3", got)
	}
	if resp := send("bob", http.MethodGet); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob's GET while carol is past her rate: %s", resp.Status)
	}
}

// rateServer serves, behind a guard holding each caller (X-Who, carol
// when none) to burst MCP requests (no refill within a test), a handler
// that reads the body and answers with answer; it returns the server
// (closed with the test), the rate and how many requests the handler saw.
func rateServer(t *testing.T, burst int, answer func(http.ResponseWriter)) (*httptest.Server, *RequestRate, *atomic.Int64) {
	t.Helper()
	rate := NewRequestRate(0.001, burst)
	handled := new(atomic.Int64)
	g := Guard{MaxBody: 1 << 20, JSONOnly: true, CountValues: true, Messages: MCPMessages, Refuse: RefuseMCP, Rate: rate,
		Auth: func(r *http.Request) (server.Caller, error) {
			who := r.Header.Get("X-Who")
			if who == "" {
				who = "carol"
			}
			return server.Caller{Name: who}, nil
		}}
	ts := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		answer(w)
	})))
	t.Cleanup(ts.Close)
	return ts, rate, handled
}
