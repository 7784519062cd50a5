package httpguard

import (
	"encoding/json"
	"errors"
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
