package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
)

// TestHostileFullMCPSessionsTakeFromTheBusiest: through the real daemon's
// --mcp-listen and the real proxy over real sockets, with the SDK's
// client. Identities that fill --max-sessions between them cannot refuse
// a quiet identity an MCP session: its initialize takes the place of the
// busiest identity's least recently used session, which is gone (404)
// while that identity's other sessions live on; the busiest (or one as
// busy) is still refused 503 RESOURCE_EXHAUSTED, and the displaced
// sessions are counted. Before, a new caller got 503 until the others'
// sessions expired (tools/hostile/mcpsessfill11.py).
func TestHostileFullMCPSessionsTakeFromTheBusiest(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,call "+aliceToken+"\nbob route,call "+bobToken+
		"\ncarol route,call "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	limits := []string{"--auth-token-file", tokens, "--max-sessions", "5", "--max-sessions-per-client", "3"}
	for _, tc := range []struct {
		name, counter string
		start         func(t *testing.T, mcpAddr, metricsAddr string)
	}{
		{"daemon", "classifierd_mcp_sessions_displaced_total", func(t *testing.T, mcpAddr, metricsAddr string) {
			startDaemon(t, genIndex(t, "testdata/mini.json"), append([]string{"--mcp-listen", mcpAddr, "--metrics-listen", metricsAddr}, limits...)...)
		}},
		{"proxy", "classifierd_proxy_sessions_displaced_total", func(t *testing.T, mcpAddr, metricsAddr string) {
			config, _ := proxySetup(t)
			startProxyHTTP(t, config, mcpAddr, append([]string{"--metrics-listen", metricsAddr}, limits...)...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mcpAddr, metricsAddr := freeAddr(t), freeAddr(t)
			tc.start(t, mcpAddr, metricsAddr)
			endpoint := "http://" + mcpAddr + listeners.MCPPath
			token := map[string]string{"alice": aliceToken, "bob": bobToken, "carol": carolToken}
			held := map[string]*mcp.ClientSession{}
			owner := map[string]string{}
			use := func(name string) error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := held[name].ListTools(ctx, nil)
				return err
			}
			for _, s := range [][2]string{{"carol", "c0"}, {"carol", "c1"}, {"alice", "a0"}, {"alice", "a1"}, {"alice", "a2"}} {
				held[s[1]], owner[s[1]] = mustConnect(t, endpoint, bearerClient(token[s[0]])), s[0]
			}
			// Each session used in turn, a0 last: carol's least recently
			// used is c0, alice's a1, and c0 is older than a2.
			for _, name := range []string{"c0", "c1", "a1", "a2", "a0"} {
				time.Sleep(5 * time.Millisecond)
				if err := use(name); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			for i, s := range []struct {
				who, name, gone string // caller, its new session, the session that makes way
			}{
				{"bob", "b0", "a1"}, // alice holds 3, the most
				{"alice", "", ""},   // alice 2, as carol: the busiest, refused
				{"bob", "b1", "c0"}, // alice and carol at 2: carol's c0 is older than alice's a2
				{"bob", "", ""},     // bob 2, as alice and carol: refused
			} {
				time.Sleep(5 * time.Millisecond)
				if s.name == "" {
					code, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, initializeBody, bearer(token[s.who]))
					if id, msg := rpcError(t, body); code != http.StatusServiceUnavailable || id != 7 ||
						!strings.HasPrefix(msg, "RESOURCE_EXHAUSTED: too many sessions (limit 5)") {
						t.Fatalf("step %d: %s's initialize: %d %s, want 503 RESOURCE_EXHAUSTED", i, s.who, code, body)
					}
					continue
				}
				cs, err := mcpConnect(t, endpoint, bearerClient(token[s.who]))
				if err != nil {
					t.Fatalf("step %d: %s's initialize with every session taken: %v", i, s.who, err)
				}
				held[s.name], owner[s.name] = cs, s.who
				// The session that made way is gone, to its owner too.
				gone := held[s.gone]
				code, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`,
					sessionHeader(gone, bearer(token[owner[s.gone]])))
				if code != http.StatusNotFound {
					t.Fatalf("step %d: %s's %s, which made way: %d %q, want 404", i, owner[s.gone], s.gone, code, body)
				}
				if err := use(s.gone); err == nil {
					t.Fatalf("step %d: %s, which made way, still serves the SDK's client", i, s.gone)
				}
				delete(held, s.gone)
			}
			for name := range held {
				if err := use(name); err != nil {
					t.Fatalf("%s's %s, which did not make way: %v", owner[name], name, err)
				}
			}
			if got := scrape(t, metricsAddr)[tc.counter]; got != 2 {
				t.Fatalf("%s %v, want 2", tc.counter, got)
			}
		})
	}
}
