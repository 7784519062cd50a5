package mcpsrc

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []ServerConfig // Name, Transport, Command or URL checked
		err  string
	}{
		{"claude desktop", `{"mcpServers":{"github":{"command":"npx","args":["-y","@mcp/github"],"env":{"GITHUB_TOKEN":"ghp_x"}},"remote":{"url":"https://h.example/mcp","headers":{"Authorization":"Bearer t"}}}}`,
			[]ServerConfig{{Name: "github", Transport: "stdio", Command: "npx"}, {Name: "remote", Transport: "http", URL: "https://h.example/mcp"}}, ""},
		{"vs code", `{"servers":{"fs":{"type":"stdio","command":"mcp-fs"},"web":{"type":"http","url":"http://127.0.0.1:9/mcp"},"old":{"type":"sse","url":"http://127.0.0.1:9/sse"}}}`,
			[]ServerConfig{{Name: "fs", Transport: "stdio", Command: "mcp-fs"}, {Name: "old", Transport: "sse", URL: "http://127.0.0.1:9/sse"}, {Name: "web", Transport: "http", URL: "http://127.0.0.1:9/mcp"}}, ""},
		{"vs code settings", `{"mcp":{"servers":{"a":{"command":"x"}}}}`, []ServerConfig{{Name: "a", Transport: "stdio", Command: "x"}}, ""},
		{"windsurf serverUrl", `{"mcpServers":{"w":{"serverUrl":"https://w.example/mcp"}}}`, []ServerConfig{{Name: "w", Transport: "http", URL: "https://w.example/mcp"}}, ""},
		{"disabled skipped", `{"mcpServers":{"a":{"command":"x"},"b":{"command":"y","disabled":true}}}`, []ServerConfig{{Name: "a", Transport: "stdio", Command: "x"}}, ""},
		{"any name", `{"mcpServers":{"MCP Yahoo Finance":{"command":"x"}}}`, []ServerConfig{{Name: "MCP Yahoo Finance", Transport: "stdio", Command: "x"}}, ""},
		{"no servers", `{}`, nil, "no servers"},
		{"not json", `{"mcpServers":`, nil, "invalid config"},
		{"neither", `{"mcpServers":{"a":{}}}`, nil, `"a" has neither`},
		{"both", `{"mcpServers":{"a":{"command":"x","url":"http://h/"}}}`, nil, "both command and url"},
		{"bad type", `{"servers":{"a":{"type":"ws","url":"http://h/"}}}`, nil, `unknown type "ws"`},
		{"bad url", `{"mcpServers":{"a":{"url":"ftp://h/x?token=s3cr3t"}}}`, nil, "not an http(s) URL"},
		{"stdio without command", `{"servers":{"a":{"type":"stdio"}}}`, nil, "has no command"},
		{"twice", `{"mcpServers":{"a":{"command":"x"}},"servers":{"a":{"command":"y"}}}`, nil, "configured twice"},
		{"empty name", `{"mcpServers":{" ":{"command":"x"}}}`, nil, "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q shows the URL's query", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Servers) != len(tt.want) {
				t.Fatalf("got %d servers, want %d: %+v", len(got.Servers), len(tt.want), got.Servers)
			}
			for i, w := range tt.want {
				g := got.Servers[i]
				if g.Name != w.Name || g.Transport != w.Transport || g.Command != w.Command || g.URL != w.URL {
					t.Errorf("server %d = %s/%s/%s/%s, want %s/%s/%s/%s", i, g.Name, g.Transport, g.Command, g.URL, w.Name, w.Transport, w.Command, w.URL)
				}
			}
		})
	}
}

func TestSecretsStayOutOfLogsAndErrors(t *testing.T) {
	sc := ServerConfig{Name: "gh", Transport: "http", URL: "https://user:pw1234@h.example/mcp?key=k3y-abcdef",
		Env: map[string]string{"GITHUB_TOKEN": "ghp_secretvalue"}, Headers: map[string]string{"Authorization": "Bearer tok-123456"},
		Args: []string{"--api-key=argsecret99"}}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("server", "cfg", sc)
	msg := sc.redact("failed: GET https://user:pw1234@h.example/mcp?key=k3y-abcdef with tok-123456 ghp_secretvalue argsecret99")
	for _, secret := range []string{"pw1234", "k3y-abcdef", "ghp_secretvalue", "tok-123456", "argsecret99"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("log %s shows %q", buf.String(), secret)
		}
		if strings.Contains(msg, secret) {
			t.Errorf("redacted error %q shows %q", msg, secret)
		}
	}
	for _, name := range []string{"GITHUB_TOKEN", "Authorization", "h.example"} {
		if !strings.Contains(buf.String(), name) {
			t.Errorf("log %s lacks %q", buf.String(), name)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","args":["y"]}}}`))
	f.Add([]byte(`{"servers":{"a":{"type":"http","url":"http://h/mcp"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			return
		}
		for _, s := range cfg.Servers {
			if s.Transport == TransportStdio && s.Command == "" || s.Transport != TransportStdio && s.URL == "" {
				t.Fatalf("unusable server accepted: %+v", s)
			}
		}
	})
}
