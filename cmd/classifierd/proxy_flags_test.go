package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/security"
)

func TestParseProxyFlags(t *testing.T) {
	ok := []string{"--config", "mcp.json", "--model", "m"}
	cases := []struct {
		args    []string
		wantErr string
	}{
		{ok, ""},
		{append(ok, "--mcp-listen", "127.0.0.1:0", "--default-exposure", "all"), ""},
		{[]string{"--model", "m"}, "--config is required"},
		{[]string{"--config", "c"}, "--model is required"},
		{append(ok, "--default-exposure", "minimal"), "is not meta-only or all"},
		{append(ok, "--timeout", "0s"), "must be positive"},
		{append(ok, "--max-sessions", "0"), "must be positive"},
		{append(ok, "--log-format", "xml"), "is not text or json"},
		{append(ok, "extra"), "unexpected arguments"},
		{append(ok, "--max-backends", "0"), "--max-backends and --backend-idle-timeout must be positive"},
		{append(ok, "--max-backends-per-client", "-1"), "--max-backends-per-client not negative"},
		{append(ok, "--backend-idle-timeout", "0s"), "--max-backends and --backend-idle-timeout must be positive"},
	}
	for _, tc := range cases {
		_, err := parseProxyFlags(tc.args, io.Discard)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("parseProxyFlags(%v) = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestParseProxySessionsPerClient checks --max-sessions-per-client: a
// tenth of --max-sessions' default unless set, never more than
// --max-sessions.
func TestParseProxySessionsPerClient(t *testing.T) {
	base := []string{"--config", "mcp.json", "--model", "m"}
	for _, tc := range []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"default", nil, 100, ""},
		{"default under a smaller --max-sessions", []string{"--max-sessions", "20"}, 20, ""},
		{"default under a larger --max-sessions", []string{"--max-sessions", "5000"}, 100, ""},
		{"set", []string{"--max-sessions-per-client", "7"}, 7, ""},
		{"set to --max-sessions", []string{"--max-sessions", "20", "--max-sessions-per-client", "20"}, 20, ""},
		{"more than --max-sessions", []string{"--max-sessions", "20", "--max-sessions-per-client", "21"}, 0, "--max-sessions-per-client 21 is more than --max-sessions 20"},
		{"zero", []string{"--max-sessions-per-client", "0"}, 0, "must be positive"},
		{"negative", []string{"--max-sessions-per-client", "-1"}, 0, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseProxyFlags(append(slices.Clone(base), tc.args...), io.Discard)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr == "" && c.MaxSessionsPerClient != tc.want:
				t.Fatalf("--max-sessions-per-client = %d, want %d", c.MaxSessionsPerClient, tc.want)
			}
		})
	}
}

// TestParseProxyListenSecurity checks the security flags of the proxy:
// they go together as the daemon's do, apply to --mcp-listen only, and a
// listener beyond loopback needs a token file or a client CA unless
// --insecure-listen says otherwise.
func TestParseProxyListenSecurity(t *testing.T) {
	base := []string{"--config", "mcp.json", "--model", "m"}
	tokens := []string{"--auth-token-file", "tokens"}
	tlsArgs := []string{"--tls-cert", "c.pem", "--tls-key", "c.key"}
	mtls := append(slices.Clone(tlsArgs), "--tls-client-ca", "ca.pem")
	listen := func(addr string, extra ...string) []string { return append([]string{"--mcp-listen", addr}, extra...) }
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" for none; security.ErrOpenListen's cases say "open"
	}{
		{"loopback IPv4, no auth", listen("127.0.0.1:8765"), ""},
		{"loopback range", listen("127.1.2.3:8765"), ""},
		{"loopback IPv6", listen("[::1]:8765"), ""},
		{"localhost", listen("localhost:8765"), ""},
		{"LOCALHOST", listen("LOCALHOST:8765"), ""},
		{"all interfaces", listen("0.0.0.0:8765"), "open"},
		{"all interfaces, IPv6", listen("[::]:8765"), "open"},
		{"empty host", listen(":8765"), "open"},
		{"another address", listen("192.0.2.10:8765"), "open"},
		{"a host name is not resolved", listen("proxy.example:8765"), "open"},
		{"all interfaces, tokens", listen("0.0.0.0:8765", tokens...), ""},
		{"all interfaces, tokens and TLS", listen("0.0.0.0:8765", append(slices.Clone(tokens), tlsArgs...)...), ""},
		{"all interfaces, mTLS", listen("0.0.0.0:8765", mtls...), ""},
		{"all interfaces, TLS is no authentication", listen("0.0.0.0:8765", tlsArgs...), "open"},
		{"all interfaces, --insecure-listen", listen("0.0.0.0:8765", "--insecure-listen"), ""},
		{"loopback, --insecure-listen", listen("127.0.0.1:8765", "--insecure-listen"), ""},
		{"no port", listen("127.0.0.1"), "--mcp-listen"},
		{"certificate without key", listen("127.0.0.1:8765", "--tls-cert", "c.pem"), "--tls-cert and --tls-key go together"},
		{"client CA without certificate", listen("127.0.0.1:8765", "--tls-client-ca", "ca.pem"), "--tls-client-ca needs --tls-cert"},
		{"stdio with tokens", tokens, "apply to --mcp-listen"},
		{"stdio with TLS", tlsArgs, "apply to --mcp-listen"},
		{"stdio with --insecure-listen", []string{"--insecure-listen"}, "apply to --mcp-listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseProxyFlags(append(slices.Clone(base), tc.args...), io.Discard)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr == "open" && !errors.Is(err, security.ErrOpenListen):
				t.Fatalf("got %v, want security.ErrOpenListen", err)
			case tc.wantErr == "open":
				for _, s := range []string{"--auth-token-file", "--tls-client-ca", "--insecure-listen", "127.0.0.1"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not tell the operator about %s", err, s)
					}
				}
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestParseFlagsOpenMCPListen: the daemon refuses what the proxy refuses,
// an MCP listener beyond loopback that offers call_tool to callers it
// cannot identify.
func TestParseFlagsOpenMCPListen(t *testing.T) {
	base := []string{"--index", "x.idx", "--model", "m"}
	calls := []string{"--mcp-servers", "mcp.json"}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool // security.ErrOpenListen
	}{
		{"all interfaces with call_tool", append([]string{"--mcp-listen", "0.0.0.0:8765"}, calls...), true},
		{"another address with live servers", []string{"--mcp-listen", "192.0.2.10:8765", "--mcp-config", "mcp.json"}, true},
		{"all interfaces, no call_tool", []string{"--mcp-listen", "0.0.0.0:8765"}, false},
		{"loopback with call_tool", append([]string{"--mcp-listen", "127.0.0.1:8765"}, calls...), false},
		{"all interfaces with call_tool and tokens", append([]string{"--mcp-listen", "0.0.0.0:8765", "--auth-token-file", "tokens"}, calls...), false},
		{"all interfaces with call_tool, --insecure-mcp-listen", append([]string{"--mcp-listen", "0.0.0.0:8765", "--insecure-mcp-listen"}, calls...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(append(slices.Clone(base), tc.args...), io.Discard)
			if got := errors.Is(err, security.ErrOpenListen); got != tc.wantErr {
				t.Fatalf("got %v, want security.ErrOpenListen %v", err, tc.wantErr)
			}
		})
	}
}
