package httpguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingBody counts what is read of it.
type countingBody struct {
	io.Reader
	n int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	b.n += n
	return n, err
}

func (*countingBody) Close() error { return nil }

// TestRefusalReadsLittle: a refused MCP request's answer carries its id,
// read from at most refusalReadBytes of its body, however long the body
// (64 KiB were read, and a longer body never decoded).
func TestRefusalReadsLittle(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"small", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "7"},
		{"long, id first", `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"arguments":{"x":"` + strings.Repeat("x", 1<<20) + `"}}}`, `"a-1"`},
		{"long, id past the read", `{"params":{"arguments":{"x":"` + strings.Repeat("x", 1<<20) + `"}},"jsonrpc":"2.0","id":9}`, ""},
		{"not JSON", strings.Repeat("\x00", 1<<20), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{Reader: strings.NewReader(tc.body)}
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Body = body
			w := httptest.NewRecorder()
			WriteMCPError(w, r, http.StatusUnauthorized, CodeUnauthenticated, errors.New("no token"))
			if body.n > refusalReadBytes {
				t.Fatalf("read %d bytes of the body, want at most %d", body.n, refusalReadBytes)
			}
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				t.Fatalf("answer %q: %v", w.Body.String(), err)
			}
			if got := string(m.ID); got != tc.want && !(tc.want == "" && got == "null") {
				t.Fatalf("id %s, want %q (answer %s)", got, tc.want, w.Body.String())
			}
		})
	}
}

// TestMembersRefusedAsRead: a JSON body past the members bound is
// refused at the chunk that breaks it, not read whole first (60,000
// keys in 769 KB were read and scanned before the refusal: the sixteenth
// pass's re-verification), and a body within the bounds is counted
// once, as it is read, and served whole.
func TestMembersRefusedAsRead(t *testing.T) {
	var wide strings.Builder
	wide.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{`)
	for i := range 60_000 {
		if i > 0 {
			wide.WriteByte(',')
		}
		fmt.Fprintf(&wide, `"k%d":1`, i)
	}
	wide.WriteString(`}}}`)
	served := ""
	g := Guard{MaxBody: 4 << 20, CheckBody: CheckMCPBody, CountValues: true, Refuse: RefuseMCP}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		served = string(b)
	}))
	body := &countingBody{Reader: strings.NewReader(wide.String())}
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Body, req.ContentLength = body, int64(wide.Len())
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "members") {
		t.Fatalf("%d %s, want 400 naming the members bound", rec.Code, rec.Body.String())
	}
	if limit := 128 << 10; body.n > limit || body.n >= wide.Len() {
		t.Fatalf("read %d bytes of a %d-byte body before refusing it, want at most %d", body.n, wide.Len(), limit)
	}
	if served != "" {
		t.Fatal("the refused body was served")
	}
	ok := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2,3],"b":"{,,,}"}}}`
	req = httptest.NewRequest("POST", "/mcp", strings.NewReader(ok))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || served != ok {
		t.Fatalf("%d %s, served %q; want 200 and the body whole", rec.Code, rec.Body.String(), served)
	}
}

// TestMCPGuardTakesJSONOnly: an MCP guard refuses a POST of another API
// type (protobuf, Connect, gRPC) from its head, 415, before reading its
// body (the seventeenth hostile pass: read whole and scanned first, at
// 4-7 times the client's CPU); application/json with parameters passes.
func TestMCPGuardTakesJSONOnly(t *testing.T) {
	h := PlainMCP(4 << 20).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tc := range []struct {
		ct   string
		want int
	}{
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"Application/JSON", 200},
		{"application/proto", http.StatusUnsupportedMediaType},
		{"application/connect+json", http.StatusUnsupportedMediaType},
		{"application/grpc-web+json", http.StatusUnsupportedMediaType},
	} {
		body := &countingBody{Reader: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + strings.Repeat(" ", 1<<20))}
		req := httptest.NewRequest("POST", "/mcp", nil)
		req.Body, req.ContentLength = body, int64(1<<20+40)
		req.Header.Set("Content-Type", tc.ct)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.ct, rec.Code, rec.Body.String(), tc.want)
		}
		if tc.want != 200 && body.n > 0 {
			t.Errorf("%s: %d bytes of the body read before the refusal", tc.ct, body.n)
		}
	}
}

// TestGetWithBodyRefusedFromHead: a GET or HEAD with a body is refused
// 400 from its head, its body never read (the transcoder read it whole
// to answer 500, never early: the twenty-third hostile pass had 31,000
// such answers in 10 s from one token at 4 times its CPU); a GET without
// a body, and a POST with one, pass.
func TestGetWithBodyRefusedFromHead(t *testing.T) {
	served := 0
	g := Guard{MaxBody: 4 << 20, Refuse: func(w http.ResponseWriter, _ *http.Request, code int, err error) {
		http.Error(w, err.Error(), code)
	}}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		served++
	}))
	for _, tc := range []struct {
		method     string
		body       int
		length     int64 // -1: unknown (chunked, or HTTP/2 without Content-Length)
		wantCode   int
		wantServed bool
	}{
		{http.MethodGet, 70_000, 70_000, http.StatusBadRequest, false},
		{http.MethodGet, 70_000, -1, http.StatusBadRequest, false},
		{http.MethodHead, 10, 10, http.StatusBadRequest, false},
		{http.MethodGet, 0, 0, http.StatusOK, true},
		{http.MethodPost, 100, 100, http.StatusOK, true},
	} {
		served = 0
		body := &countingBody{Reader: strings.NewReader(strings.Repeat("x", tc.body))}
		req := httptest.NewRequest(tc.method, "/tools", nil)
		if tc.body > 0 {
			req.Body = body
		}
		req.ContentLength = tc.length
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.wantCode || (served == 1) != tc.wantServed {
			t.Errorf("%s with %d bytes (length %d): %d, served %v; want %d, served %v", tc.method, tc.body, tc.length, rec.Code, served == 1, tc.wantCode, tc.wantServed)
		}
		if !tc.wantServed && body.n > 0 {
			t.Errorf("%s with %d bytes: %d of them read before the refusal", tc.method, tc.body, body.n)
		}
	}
}
