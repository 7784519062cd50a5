package httpguard

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestScopeRefusalKeepsTheConnection: a 403 for a missing scope (valid
// credentials) keeps its HTTP/1.1 keep-alive connection when the body
// comes whole, so an honest client whose token lacks one scope is not
// disconnected on each such answer (every one closed its connection: the
// eighteenth hostile pass, 12 of 12); a body past RefusalDrainBytes, one
// that does not come, and a 401 still close it, and an MCP refusal still
// finds the request's id.
func TestScopeRefusalKeepsTheConnection(t *testing.T) {
	for _, mcp := range []bool{false, true} {
		refuse := WriteRPCError
		if mcp {
			refuse = RefuseMCP
		}
		g := Guard{MaxBody: 1 << 20, Refuse: refuse,
			Auth: func(r *http.Request) (server.Caller, error) {
				switch r.Header.Get("Authorization") {
				case "Bearer ok":
					if strings.HasSuffix(r.URL.Path, "/Denied") {
						return server.Caller{Name: "carol"}, status.Error(codes.PermissionDenied, "Denied needs scope \"sessions\"")
					}
					return server.Caller{Name: "carol"}, nil
				default:
					return server.Caller{}, status.Error(codes.Unauthenticated, "no token")
				}
			}}
		ts := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "{}")
		})))
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		// send writes a request of path with token and body (sent: the
		// part of it sent) and reads its answer.
		send := func(path, token, body string, sent int) (*http.Response, string) {
			t.Helper()
			_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				path, token, len(body), body[:sent])
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("mcp %v, %s: %v", mcp, path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp, string(b)
		}
		small := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
		for i := range 12 {
			resp, b := send("/x.Y/Denied", "ok", small, len(small))
			if resp.StatusCode != http.StatusForbidden || resp.Close {
				t.Fatalf("mcp %v, 403 %d: %s, closing %v; want 403, the connection kept", mcp, i, resp.Status, resp.Close)
			}
			if mcp && !strings.Contains(b, `"id":7`) {
				t.Fatalf("mcp: the 403 %s does not carry the request's id", b)
			}
			if resp, _ := send("/x.Y/Allowed", "ok", small, len(small)); resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("mcp %v, after 403 %d: %s, closing %v; want 200 on the same connection", mcp, i, resp.Status, resp.Close)
			}
		}
		big := `{"jsonrpc":"2.0","id":7,"method":"tools/list","x":"` + strings.Repeat("x", RefusalDrainBytes) + `"}`
		next := func(why string, c func() (*http.Response, string)) {
			t.Helper()
			if resp, _ := c(); resp.StatusCode/100 != 4 || !resp.Close {
				t.Fatalf("mcp %v, %s: %s, closing %v; want refused, the connection closed", mcp, why, resp.Status, resp.Close)
			}
			conn.Close()
			if conn, err = net.Dial("tcp", ts.Listener.Addr().String()); err != nil {
				t.Fatal(err)
			}
			br = bufio.NewReader(conn)
		}
		next("a body past RefusalDrainBytes", func() (*http.Response, string) { return send("/x.Y/Denied", "ok", big, len(big)) })
		next("a body never sent whole", func() (*http.Response, string) { return send("/x.Y/Denied", "ok", small, 10) })
		next("no token", func() (*http.Response, string) { return send("/x.Y/Allowed", "bad", small, len(small)) })
		conn.Close()
		ts.Close()
	}
}
