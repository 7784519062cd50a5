package security

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/server/auth"
)

const testToken = "alice-0123456789abcdef"

// TestGuardsReportAuthenticatedConnections: RPCGuard and MCPGuard tell
// OnAuthenticated the addresses of the connection of each request
// authenticated by a token, and nothing of one refused or without a
// token file (every caller anonymous).
func TestGuardsReportAuthenticatedConnections(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withTokens, err := Open(Config{TokenFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	open, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sec   *Security
		guard func(*Security) httpguard.Guard
		token string
		want  bool
	}{
		{"rpc with a token", withTokens, func(s *Security) httpguard.Guard { return s.RPCGuard(1 << 20) }, testToken, true},
		{"rpc without a token", withTokens, func(s *Security) httpguard.Guard { return s.RPCGuard(1 << 20) }, "", false},
		{"rpc with an unknown token", withTokens, func(s *Security) httpguard.Guard { return s.RPCGuard(1 << 20) }, "nope-0123456789abcdef", false},
		{"rpc, no token file", open, func(s *Security) httpguard.Guard { return s.RPCGuard(1 << 20) }, "", false},
		{"mcp with a token", withTokens, func(s *Security) httpguard.Guard { return s.MCPGuard(1<<20, auth.ScopeRoute) }, testToken, true},
		{"mcp without a token", withTokens, func(s *Security) httpguard.Guard { return s.MCPGuard(1<<20, auth.ScopeRoute) }, "", false},
		{"mcp without the scope", withTokens, func(s *Security) httpguard.Guard { return s.MCPGuard(1<<20, auth.ScopeAdmin) }, testToken, false},
		{"mcp, no token file", open, func(s *Security) httpguard.Guard { return s.MCPGuard(1<<20, auth.ScopeRoute) }, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got [][2]string
			tc.sec.OnAuthenticated = func(local, remote string) {
				mu.Lock()
				got = append(got, [2]string{local, remote})
				mu.Unlock()
			}
			defer func() { tc.sec.OnAuthenticated = nil }()
			srv := httptest.NewServer(tc.guard(tc.sec).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
			defer srv.Close()
			var remote string // the client's end of its connection
			client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					remote = c.LocalAddr().String()
				}
				return c, err
			}}}
			req, err := http.NewRequest("POST", srv.URL+"/classifier.v1.ClassifierService/Route", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if !tc.want {
				if len(got) != 0 {
					t.Errorf("OnAuthenticated(%v) for a request not authenticated by a token (%s)", got, resp.Status)
				}
				return
			}
			if len(got) != 1 || got[0][0] != srv.Listener.Addr().String() || got[0][1] != remote {
				t.Errorf("OnAuthenticated calls %v, want one with (%s, %s) (%s)", got, srv.Listener.Addr(), remote, resp.Status)
			}
		})
	}
}

// TestPublicRead: --http-listen serves the explain page's bodiless reads
// without a token, and authenticates those of the API's routes at its
// guard (an OPTIONS anywhere stays public).
func TestPublicRead(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/", true}, {"GET", "/static/app.js", true}, {"HEAD", "/favicon.ico", true},
		{"GET", "/tools", false}, {"GET", "/tools/metrics", false}, {"HEAD", "/tools", false},
		{"GET", "/classifier.v1.ClassifierService/Route", false}, {"GET", "/grpc.health.v1.Health/Check", false},
		{"OPTIONS", "/tools", true}, {"POST", "/", false},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if got := publicRead(r); got != tc.want {
			t.Errorf("%s %s: public %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
