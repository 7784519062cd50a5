package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/mcpproxy"
)

// These tests cover the proxy's --mcp-listen with --auth-token-file,
// --tls-cert and --tls-client-ca: the real proxy binary in front of the
// real stdio test servers (proxySetup), driven over real sockets by the
// SDK's client and by plain HTTP requests where a test needs to send what
// the SDK's client would not (another identity's session id).

// rawMCP sends one JSON-RPC message to the MCP endpoint as a streamable
// HTTP client would, with header added; it returns the status and body.
func rawMCP(t *testing.T, hc *http.Client, method, endpoint, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		req.Header[k] = vs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, endpoint, err)
	}
	defer resp.Body.Close()
	// A GET that is served opens an event stream, and a served tools/list
	// is long: the first bytes suffice.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(b)
}

// sessionHeader is what a client sends with every request of session cs.
func sessionHeader(cs *mcp.ClientSession, extra http.Header) http.Header {
	h := http.Header{"Mcp-Session-Id": {cs.ID()}, "Mcp-Protocol-Version": {cs.InitializeResult().ProtocolVersion}}
	for k, vs := range extra {
		h[k] = vs
	}
	return h
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

const initializeBody = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestProxyTokens runs the proxy with a token file on loopback (plain
// HTTP, as a local agent host would): every request needs a token of the
// file; route may search and analyze, call may call the servers' tools;
// a session is its identity's; SIGHUP re-reads the file.
func TestProxyTokens(t *testing.T) {
	config, _ := proxySetup(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	file := "alice route,call " + aliceToken + "\nbob route,call " + bobToken + "\nreader route " + routerToken + "\nterm terminal,sessions,admin " + carolToken + "\n"
	if err := os.WriteFile(tokens, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	d := startProxyHTTP(t, config, addr, "--auth-token-file", tokens, "--log-level", "info") // info: the reloads
	waitFor(t, d, `msg="MCP listener authenticates callers" by=tokens tls=false`)
	endpoint := "http://" + addr + listeners.MCPPath
	plain := &http.Client{Timeout: 30 * time.Second}
	as := bearerClient
	connect := func(token string) *mcp.ClientSession { return mustConnect(t, endpoint, as(token)) }
	callArgs := map[string]any{"server": "weather", "tool": "get_weather", "arguments": map[string]any{"city": "Oslo"}}

	t.Run("no or an unknown token is 401 with a reason", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			header http.Header
			want   string
		}{
			{"no token", nil, "UNAUTHENTICATED: missing bearer token"},
			{"unknown token", bearer("nobody-0123456789abcdef"), "UNAUTHENTICATED: unknown bearer token"},
			{"not a bearer token", http.Header{"Authorization": {"Basic " + aliceToken}}, "UNAUTHENTICATED: missing bearer token"},
		} {
			code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, tc.header)
			var resp struct {
				ID    int `json:"id"`
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusUnauthorized ||
				resp.ID != 7 || !strings.HasPrefix(resp.Error.Message, tc.want) {
				t.Errorf("%s: %d %s, want 401 and a JSON-RPC error for id 7 starting %q", tc.name, code, body, tc.want)
			}
		}
		// The SDK's client reports the reason.
		if _, err := mcpConnect(t, endpoint, plain); err == nil || !strings.Contains(err.Error(), "missing bearer token") {
			t.Errorf("SDK client without a token: %v, want an error naming the missing bearer token", err)
		}
		if _, err := mcpConnect(t, endpoint, as("nobody-0123456789abcdef")); err == nil || !strings.Contains(err.Error(), "unknown bearer token") {
			t.Errorf("SDK client with an unknown token: %v, want an error naming the unknown token", err)
		}
	})
	t.Run("a token with no scope of the proxy is 403", func(t *testing.T) {
		code, body := rawMCP(t, plain, http.MethodPost, endpoint, initializeBody, bearer(carolToken))
		if code != http.StatusForbidden || !strings.Contains(body, "PERMISSION_DENIED: term holds none of the scopes route, call") {
			t.Errorf("terminal token: %d %s, want 403 PERMISSION_DENIED", code, body)
		}
	})
	t.Run("route searches and analyzes but may not call", func(t *testing.T) {
		reader := connect(routerToken)
		var out mcpproxy.SearchOutput
		callTool(t, reader, mcpproxy.ToolSearch, map[string]any{"query": "will it rain in Paris tomorrow", "k": 1}, &out)
		if len(out.Tools) != 1 || out.Tools[0].Server != "weather" {
			t.Fatalf("search_tools: %+v, want a weather tool", out.Tools)
		}
		var an mcpproxy.AnalyzeOutput
		callTool(t, reader, mcpproxy.ToolAnalyze, map[string]any{"prompt": "create a new note in my notebook: buy milk"}, &an)
		if !an.Changed {
			t.Fatalf("hub__analyze_prompt in its own session: %+v, want a change", an)
		}
		for _, tool := range []string{mcpproxy.ToolCall, "notes__create_note"} {
			args := map[string]any(nil)
			if tool == mcpproxy.ToolCall {
				args = callArgs
			}
			if err := mcpCallErr(reader, tool, args); err == nil || !strings.Contains(err.Error(), `PERMISSION_DENIED: `+tool+` needs scope "call"`) {
				t.Errorf("%s with route only: %v, want PERMISSION_DENIED naming the call scope", tool, err)
			}
		}
	})
	alice := connect(aliceToken)
	t.Run("call calls the servers' tools", func(t *testing.T) {
		res := callToolResult(t, alice, mcpproxy.ToolCall, callArgs)
		if res.IsError || resultText(res) != "get_weather" {
			t.Fatalf("call_tool: isError %v %q, want the weather server's answer", res.IsError, resultText(res))
		}
	})
	t.Run("another identity may not use a session", func(t *testing.T) {
		list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
		call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"call_tool","arguments":{"server":"weather","tool":"get_weather"}}}`
		for _, tc := range []struct {
			name, method, body string
		}{
			{"tools/list", http.MethodPost, list},
			{"tools/call", http.MethodPost, call},
			{"its event stream", http.MethodGet, ""},
			{"ending it", http.MethodDelete, ""},
		} {
			code, body := rawMCP(t, plain, tc.method, endpoint, tc.body, sessionHeader(alice, bearer(bobToken)))
			if code != http.StatusForbidden || !strings.Contains(body, "session user mismatch") {
				t.Errorf("bob, alice's session, %s: %d %q, want 403 session user mismatch", tc.name, code, body)
			}
		}
		// The same requests with alice's token are served: the refusal is
		// bob's, not the request's.
		if code, body := rawMCP(t, plain, http.MethodPost, endpoint, list, sessionHeader(alice, bearer(aliceToken))); code != http.StatusOK {
			t.Fatalf("alice, her session, tools/list: %d %q", code, body)
		}
		if res := callToolResult(t, alice, mcpproxy.ToolCall, callArgs); res.IsError {
			t.Fatalf("alice's session after bob's tries: %q", resultText(res))
		}
	})
	t.Run("SIGHUP re-reads the token file", func(t *testing.T) {
		// carol gets a token; bob loses his.
		next := "alice route,call " + aliceToken + "\ncarol route,call carol-new-0123456789abcdef\n"
		if err := os.WriteFile(tokens, []byte(next), 0o600); err != nil {
			t.Fatal(err)
		}
		bob := connect(bobToken)
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, d, `msg=reloaded what="auth tokens"`)
		carol := connect("carol-new-0123456789abcdef")
		if res := callToolResult(t, carol, mcpproxy.ToolCall, callArgs); res.IsError {
			t.Fatalf("carol after SIGHUP: %q", resultText(res))
		}
		if err := mcpCallErr(bob, mcpproxy.ToolSearch, map[string]any{"query": "weather"}); err == nil || !strings.Contains(err.Error(), "unknown bearer token") {
			t.Errorf("bob after his token left the file: %v, want unknown bearer token", err)
		}
		if res := callToolResult(t, alice, mcpproxy.ToolCall, callArgs); res.IsError {
			t.Fatalf("alice after SIGHUP: %q", resultText(res))
		}
	})
	log := d.stderr.String()
	for _, tok := range []string{aliceToken, bobToken, routerToken, carolToken, "carol-new-0123456789abcdef"} {
		if strings.Contains(log, tok) {
			t.Fatalf("a token reached the log:\n%s", log)
		}
	}
	if strings.Contains(log, "panic") {
		t.Fatalf("proxy log has a panic:\n%s", log)
	}
}

// TestProxyMTLS runs the proxy with TLS and a client CA and no token file:
// the handshake needs a client certificate of the CA, its common name is
// the caller (with every scope, as on the daemon), a session is its
// certificate's, and SIGHUP swaps the server certificate.
func TestProxyMTLS(t *testing.T) {
	config, _ := proxySetup(t)
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd-proxy")
	_, hubCert := pki.leaf(t, "hub")
	_, otherCert := pki.leaf(t, "other")
	addr := freeAddr(t)
	// 0.0.0.0 would need no --insecure-listen with a client CA; the test
	// listens on loopback all the same, as tests here do.
	d := startProxyHTTP(t, config, addr, "--tls-cert", serverCert, "--tls-key", serverCert+".key",
		"--tls-client-ca", filepath.Join(pki.dir, "ca.pem"), "--log-level", "info")
	waitFor(t, d, `msg="MCP listener authenticates callers" by="client certificates" tls=true`)
	waitFor(t, d, "classifierd serving MCP over streamable HTTP")
	endpoint := "https://" + addr + listeners.MCPPath
	hub, other, noCert := pki.httpsClient(&hubCert), pki.httpsClient(&otherCert), pki.httpsClient(nil)
	callArgs := map[string]any{"server": "notes", "tool": "search_notes"}

	t.Run("plain text and no client certificate are refused", func(t *testing.T) {
		if _, err := mcpConnect(t, "http://"+addr+listeners.MCPPath, &http.Client{Timeout: 30 * time.Second}); err == nil {
			t.Error("a plain text MCP client connected")
		}
		if _, err := mcpConnect(t, endpoint, noCert); err == nil {
			t.Error("an MCP client without a client certificate connected")
		}
		spoof := &http.Client{Transport: withHeader{noCert.Transport, spoofed}}
		if _, err := mcpConnect(t, endpoint, spoof); err == nil {
			t.Error("an MCP client without a client certificate but with the identity header connected")
		}
	})
	hubMCP, err := mcpConnect(t, endpoint, hub)
	if err != nil {
		t.Fatalf("MCP over TLS with a client certificate: %v", err)
	}
	t.Run("a certificate calls the servers' tools", func(t *testing.T) {
		res := callToolResult(t, hubMCP, mcpproxy.ToolCall, callArgs)
		if res.IsError || resultText(res) != "search_notes" {
			t.Fatalf("call_tool: isError %v %q", res.IsError, resultText(res))
		}
		var an mcpproxy.AnalyzeOutput
		callTool(t, hubMCP, mcpproxy.ToolAnalyze, map[string]any{"prompt": "search my notes for the agenda"}, &an)
		if !an.Changed {
			t.Fatalf("hub__analyze_prompt: %+v, want a change", an)
		}
	})
	t.Run("another certificate may not use the session", func(t *testing.T) {
		list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
		// Also when other claims hub in the identity header.
		for _, extra := range []http.Header{nil, spoofed} {
			code, body := rawMCP(t, other, http.MethodPost, endpoint, list, sessionHeader(hubMCP, extra))
			if code != http.StatusForbidden || !strings.Contains(body, "session user mismatch") {
				t.Errorf("other, hub's session (header %v): %d %q, want 403 session user mismatch", extra, code, body)
			}
		}
		if code, body := rawMCP(t, hub, http.MethodPost, endpoint, list, sessionHeader(hubMCP, nil)); code != http.StatusOK {
			t.Fatalf("hub, its session: %d %q", code, body)
		}
		otherMCP, err := mcpConnect(t, endpoint, other)
		if err != nil {
			t.Fatal(err)
		}
		if res := callToolResult(t, otherMCP, mcpproxy.ToolCall, callArgs); res.IsError {
			t.Fatalf("other in its own session: %q", resultText(res))
		}
	})
	t.Run("SIGHUP swaps the certificate", func(t *testing.T) {
		_, renewed := pki.leaf(t, "classifierd-proxy") // the same files, a new certificate
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, d, `msg=reloaded what="TLS certificate"`)
		wantServedCert(t, addr, hub.Transport.(*http.Transport).TLSClientConfig.Clone(), renewed.Leaf)
		if res := callToolResult(t, hubMCP, mcpproxy.ToolCall, callArgs); res.IsError {
			t.Fatalf("hub's session after SIGHUP: %q", resultText(res))
		}
	})
	if strings.Contains(d.stderr.String(), "panic") {
		t.Fatalf("proxy log has a panic:\n%s", d.stderr.String())
	}
}

// TestProxyRefusesUnsafeStart checks that the proxy refuses, before it
// loads the model, to serve a non-loopback address to anyone, and bad
// security files, each with a reason and a non-zero exit.
func TestProxyRefusesUnsafeStart(t *testing.T) {
	bin, _ := binaries(t)
	config, _ := proxySetup(t)
	dir := t.TempDir()
	open := filepath.Join(dir, "open-tokens")
	if err := os.WriteFile(open, []byte("alice route "+aliceToken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd-proxy")
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"all interfaces without authentication", []string{"--mcp-listen", "0.0.0.0:0"}, 2, "add --auth-token-file"},
		{"all interfaces with TLS only", []string{"--mcp-listen", "0.0.0.0:0", "--tls-cert", serverCert, "--tls-key", serverCert + ".key"}, 2, "add --auth-token-file"},
		{"a token file others may read", []string{"--mcp-listen", "127.0.0.1:0", "--auth-token-file", open}, 1, "chmod 600"},
		{"a missing client CA", []string{"--mcp-listen", "127.0.0.1:0", "--tls-cert", serverCert, "--tls-key", serverCert + ".key",
			"--tls-client-ca", filepath.Join(dir, "none.pem")}, 1, "--tls-client-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, proxyArgs(config, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.wantCode || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("got %v, want exit %d with %q:\n%s", err, tc.wantCode, tc.want, stderr.String())
			}
			if strings.Contains(stderr.String(), aliceToken) {
				t.Fatalf("a token reached the log:\n%s", stderr.String())
			}
		})
	}
}
