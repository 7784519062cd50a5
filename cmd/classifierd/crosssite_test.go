package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/listeners"
)

// TestCrossSitePOSTRefused: on a daemon run without a token file (the
// `make run` set-up), a web page must not reach the API. A page's
// fetch(url, {method: 'POST', mode: 'no-cors', body: new Blob([json])})
// goes without a CORS preflight, with no Content-Type and the page's
// Origin; before, --http-listen read such a body as JSON and the seventh
// hostile pass did ReportUse, ResetLearning, CreateSession and POST
// /tools/metrics/reset from a page. Now every HTTP listener (HTTP/JSON,
// the daemon's and the proxy's MCP) refuses a request from another origin
// 403 and a POST without the API's Content-Type 415, while the page
// served by the daemon itself (same origin) and clients that send no
// Origin (curl, the SDKs) are served.
func TestCrossSitePOSTRefused(t *testing.T) {
	httpAddr, mcpAddr, proxyAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--http-listen", httpAddr, "--mcp-listen", mcpAddr)
	waitFor(t, d, "classifierd serving HTTP/JSON")
	config, _ := proxySetup(t)
	startProxyHTTP(t, config, proxyAddr)

	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	type listener struct {
		name, addr, path, body string
	}
	for _, l := range []listener{
		{"HTTP/JSON", httpAddr, "/classifier.v1.ClassifierService/ReportUse", `{"query":"query the postgres database","servers":["slack"]}`},
		{"HTTP/JSON REST shape", httpAddr, "/tools/metrics/reset", ``},
		{"daemon MCP", mcpAddr, listeners.MCPPath, initialize},
		{"proxy MCP", proxyAddr, listeners.MCPPath, initialize},
	} {
		self := "http://" + l.addr
		other := "http://" + strings.Replace(l.addr, "127.0.0.1", "localhost", 1) // another origin of the same host
		h := func(kv ...string) map[string]string {
			m := map[string]string{"Accept": "application/json, text/event-stream"}
			for i := 0; i < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		json := "application/json"
		for _, tc := range []struct {
			name   string
			header map[string]string
			body   string
			want   int
			says   string
		}{
			{"a page's no-cors POST", h("Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"), l.body, 403, "evil.example"},
			{"another origin, JSON", h("Content-Type", json, "Origin", "https://evil.example"), l.body, 403, "evil.example"},
			{"another port or host of the same site", h("Content-Type", json, "Origin", other, "Sec-Fetch-Site", "same-site"), l.body, 403, "only pages of this listener's own origin"},
			{"Sec-Fetch-Site cross-site without Origin", h("Content-Type", json, "Sec-Fetch-Site", "cross-site"), l.body, 403, "cross-site"},
			{"origin null", h("Content-Type", json, "Origin", "null"), l.body, 403, "null"},
			{"no Content-Type, no Origin", h(), l.body, 415, "Content-Type"},
			{"no Content-Type, no body", h(), ``, 415, "Content-Type"},
			{"text/plain", h("Content-Type", "text/plain"), l.body, 415, "text/plain"},
			{"the daemon's own page", h("Content-Type", json, "Origin", self, "Sec-Fetch-Site", "same-origin"), l.body, 200, ""},
			{"a client without Origin", h("Content-Type", json), l.body, 200, ""},
		} {
			t.Run(l.name+"/"+tc.name, func(t *testing.T) {
				code, _, body := rawRequest{method: "POST", path: l.path, header: tc.header, body: []byte(tc.body)}.do(t, l.addr)
				if code != tc.want || !strings.Contains(body, tc.says) {
					t.Errorf("got %d %.300s, want %d saying %q", code, body, tc.want, tc.says)
				}
			})
		}
	}

	// A link from another site to the explain page still opens it.
	code, _, _ := rawRequest{method: "GET", path: "/", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}.do(t, httpAddr)
	if code != http.StatusOK {
		t.Errorf("GET / from a link on another site: %d, want 200", code)
	}
}
