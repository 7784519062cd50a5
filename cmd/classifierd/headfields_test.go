package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/listeners"
)

// tinyFields is a map of n header fields of a few bytes each ("H1: a").
func tinyFields(n int) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h[fmt.Sprintf("H%d", i)] = "a"
	}
	return h
}

// TestHostileManyHeaderFields is the eleventh hostile pass's HIGH finding:
// a request head of many tiny header fields, under the 64 KiB head bound
// (6,500 fields such as "h1: a"), costs net/http about 0.6 MB of map
// entries and strings as it parses them, before any token is checked,
// held while the head is incomplete (up to ReadHeaderTimeout): 1,000 such
// heads from one address with no token raised the daemon's RSS from 249
// to 858 MB (64 MB sent). With a token and a body held, 504 requests of
// 50 identities +318 MB on --http-listen and 378 of two identities +686
// MB on the proxy's listener. Now a plaintext listener counts a head's
// lines as they arrive and closes the connection with a 431 past
// listeners.MaxHeadLines (256 fields); the guard refuses 431 a request of
// more than httpguard.MaxHeaderFields (over TLS too).
func TestHostileManyHeaderFields(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,sessions "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, mcpAddr, metricsAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens,
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr, "--metrics-listen", metricsAddr)
	waitFor(t, d, "classifierd serving HTTP/JSON")
	waitFor(t, d, "metrics serving")

	t.Run("a head of more than 256 fields is 431 on every HTTP listener", func(t *testing.T) {
		for _, s := range []struct{ name, addr, method, path string }{
			{"HTTP/JSON", httpAddr, "POST", "/classifier.v1.ClassifierService/Route"},
			{"daemon MCP", mcpAddr, "POST", listeners.MCPPath},
			{"metrics", metricsAddr, "GET", "/metrics"},
		} {
			t.Run(s.name, func(t *testing.T) {
				for _, tc := range []struct {
					fields int
					want   int
				}{{200, 0}, {6500, 431}} {
					h := tinyFields(tc.fields)
					h["Content-Type"] = "application/json"
					h["Authorization"] = "Bearer " + aliceToken
					code, _, body := rawRequest{method: s.method, path: s.path, header: h, body: []byte(`{"query":"x"}`)}.do(t, s.addr)
					switch {
					case tc.want == 431 && code != 431:
						t.Errorf("%d header fields: got %d %.200q, want 431", tc.fields, code, body)
					case tc.want == 0 && code == 431:
						t.Errorf("%d header fields: refused 431 %.200q, want served", tc.fields, body)
					}
				}
			})
		}
	})

	t.Run("memory", func(t *testing.T) {
		head := "POST " + listeners.MCPPath + " HTTP/1.1\r\nHost: " + mcpAddr + "\r\n"
		var b strings.Builder
		b.WriteString(head)
		for i := range 6500 {
			fmt.Fprintf(&b, "h%d: a\r\n", i)
		}
		meter := startPeakMeter(t, d.cmd.Process.Pid)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var held []net.Conn
		// 600 connections, each a head of 6,500 tiny fields that never
		// ends, no token.
		for range 600 {
			wg.Go(func() {
				nc, err := net.Dial("tcp", mcpAddr)
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, nc)
				mu.Unlock()
				_, _ = nc.Write([]byte(b.String()))
			})
		}
		wg.Wait()
		time.Sleep(3 * time.Second) // what arrived is read
		grew, how := meter.growth()
		for _, c := range held {
			c.Close()
		}
		t.Logf("600 MCP heads of 6,500 header fields, never ended, no token: +%d MB (%s)", grew>>20, how)
		if grew > 50<<20 {
			t.Errorf("the daemon's memory grew by %d MB, want at most 50 MB", grew>>20)
		}
	})
}
