package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/server"
)

// envelope is one gRPC-Web/Connect message frame holding msg.
func envelope(msg string) string {
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
	return string(prefix[:]) + msg
}

// TestGuard drives the guard of every HTTP listener through a real
// listener with requests written on the wire (rawRequest): who is refused
// before the body is read, what a handler behind it sees.
func TestGuard(t *testing.T) {
	const max = 1 << 10
	g := httpguard.Guard{
		Auth: func(r *http.Request) (server.Caller, error) {
			switch r.Header.Get("Authorization") {
			case "Bearer ok":
				return server.Caller{Name: "ok"}, nil
			case "Bearer noscope":
				return server.Caller{}, status.Error(codes.PermissionDenied, "needs scope route")
			}
			return server.Caller{}, status.Error(codes.Unauthenticated, "missing bearer token")
		},
		Public:   httpguard.BodilessRead,
		MaxBody:  max,
		ReadWait: 300 * time.Millisecond,
		Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
			w.WriteHeader(code)
			_, _ = io.WriteString(w, status.Convert(err).Message())
		},
	}
	srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("handler read: %v", err)
		}
		fmt.Fprintf(w, "caller=%s body=%d length=%d header=%s", server.CallerFrom(r.Context()).Name, len(b), r.ContentLength, r.Header.Get("Content-Length"))
	})))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ok := map[string]string{"Authorization": "Bearer ok", "Content-Type": "application/json"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	full := strings.Repeat("x", max)
	for _, tc := range []struct {
		name string
		rq   rawRequest
		want int
		body string
	}{
		{"a GET without a body is public", rawRequest{method: "GET", path: "/"}, 200, "caller= body=0 length=0"},
		{"a GET with a body is not", rawRequest{method: "GET", path: "/", body: []byte("x")}, 401, "missing bearer token"},
		{"a POST without a body is not", rawRequest{method: "POST", path: "/"}, 401, "missing bearer token"},
		{"no token, a body over the limit", rawRequest{method: "POST", path: "/", body: []byte(full + "x")}, 401, "missing bearer token"},
		{"no scope, a body over the limit", rawRequest{method: "POST", path: "/", header: map[string]string{"Authorization": "Bearer noscope"},
			body: []byte(full + "x")}, 403, "needs scope route"},
		{"a body at the limit", rawRequest{method: "POST", path: "/", header: ok, body: []byte(full)}, 200, "caller=ok body=1024 length=1024 header=1024"},
		{"a chunked body at the limit gets its length", rawRequest{method: "POST", path: "/", header: ok, body: []byte(full), declare: -1}, 200,
			"caller=ok body=1024 length=1024 header=1024"},
		{"declared over the limit", rawRequest{method: "POST", path: "/", header: ok, body: []byte("x"), declare: max + 1}, 413, "over the limit of 1024 bytes"},
		{"chunked over the limit", rawRequest{method: "POST", path: "/", header: ok, body: []byte(full + "x"), declare: -1}, 413, "over the limit of 1024 bytes"},
		{"gzip", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Encoding", "gzip"), body: []byte("x")}, 415, `Content-Encoding "gzip" is not accepted`},
		{"identity", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Encoding", "identity"), body: []byte("x")}, 200, "body=1"},
		{"identity, then gzip", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Encoding", "identity, gzip"), body: []byte("x")}, 415, "gzip"},
		{"Connect streaming gzip", rawRequest{method: "POST", path: "/", header: with(ok, "Connect-Content-Encoding", "gzip"), body: []byte("x")}, 415, "Connect-Content-Encoding"},
		{"gRPC-Web gzip", rawRequest{method: "POST", path: "/", header: with(ok, "Grpc-Encoding", "gzip"), body: []byte("x")}, 415, "Grpc-Encoding"},
		{"gRPC-Web frames", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Type", "application/grpc-web+proto"),
			body: []byte(envelope("abc") + envelope(""))}, 200, "body=13"},
		{"a frame claiming more than was sent", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Type", "application/grpc-web+proto"),
			body: []byte(envelope("abc")[:5] + "ab")}, 400, "declares 3 bytes, the body holds 2"},
		{"a cut prefix", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Type", "application/connect+json"),
			body: []byte(envelope("abc") + "\x00\x00")}, 400, "prefix is cut short"},
		{"not enveloped JSON is not parsed", rawRequest{method: "POST", path: "/", header: with(ok, "Content-Type", "application/json"),
			body: []byte("\x00\x00\x40\x00\x00")}, 200, "body=5"},
		{"a body that never ends", rawRequest{method: "POST", path: "/", header: ok, body: []byte("x"), declare: 10}, 400, "could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := tc.rq.do(t, addr)
			if code != tc.want || !strings.Contains(body, tc.body) {
				t.Errorf("got %d %q, want %d with %q", code, body, tc.want, tc.body)
			}
		})
	}
}

// TestGuardMCPBatch checks that an MCP listener's guard refuses a
// JSON-RPC batch of more than httpguard's bound of messages with a JSON-RPC error
// before the SDK serves any of them, and passes smaller batches, single
// messages and bodies it cannot parse (the SDK answers those).
func TestGuardMCPBatch(t *testing.T) {
	served := 0
	srv := httptest.NewServer(httpguard.PlainMCP(4 << 20).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		_, _ = io.WriteString(w, "served")
	})))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	batch := func(n int) string {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"x"}}}`, i)
		}
		return "[" + strings.Join(msgs, ",") + "]"
	}
	json := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name, body string
		want       int
		has        string
	}{
		{"one message", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, "served"},
		{"a batch at the bound", batch(64), 200, "served"},
		{"a batch over it", batch(65), 400, "at most 64 per request"},
		// Refused as it is read, for its objects' members together,
		// before the whole batch is read and its messages counted.
		{"a batch of 20000", " \n" + batch(20000), 400, "members together"},
		{"a batch of 2000", batch(2000), 400, "a JSON-RPC batch of 2000 messages"},
		{"not JSON", "[[[", 200, "served"},
		// The twelfth hostile pass: the SDK quotes an unknown method or
		// tool escaped, 4-5 times the bytes sent.
		{"a method of 4 KB", `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("\x7f", 4096) + `"}`, 400, "a JSON-RPC method of 4096 bytes"},
		{"a tool name of 1 MB", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + strings.Repeat("a", 1<<20) + `","arguments":{}}}`, 400, "params.name of 1048576 bytes"},
		{"a long name in a batch", "[" + batch(2)[1:len(batch(2))-1] + `,{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"` + strings.Repeat("b", 600) + `"}}]`, 400, "params.name of 600 bytes"},
		{"a long query, a short name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"` + strings.Repeat("q ", 50000) + `"}}}`, 200, "served"},
		{"positional params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["` + strings.Repeat("a", 1000) + `"]}`, 200, "served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := served
			code, _, body := rawRequest{method: "POST", path: "/mcp", header: json, body: []byte(tc.body)}.do(t, addr)
			if code != tc.want || !strings.Contains(body, tc.has) {
				t.Errorf("got %d %q, want %d with %q", code, body, tc.want, tc.has)
			}
			if tc.want != 200 && served != before {
				t.Errorf("the refused batch reached the handler")
			}
		})
	}
}
