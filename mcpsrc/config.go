// Package mcpsrc is the live source of MCP tools: it reads an MCP client
// configuration (the "mcpServers" file Claude Desktop, Cursor and hubs use,
// or VS Code's "servers"), connects to every server with the official Go
// SDK (stdio commands, streamable HTTP and SSE URLs), lists their tools,
// follows notifications/tools/list_changed, and keeps each server's last
// known tools when it fails: a failure marks the server degraded and never
// empties its tool list.
//
// A Pool runs one goroutine per server. Snapshot returns an immutable view
// with a channel that is closed when a newer view exists; CallTool calls a
// tool on a named server. The package does not log: errors are kept in each
// server's state, with every secret of the configuration (env values,
// headers, URL credentials and query) redacted.
package mcpsrc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
)

// ErrConfig reports an MCP client configuration that cannot be used; the
// message names the offending server.
var ErrConfig = errors.New("mcpsrc: invalid config")

// MaxConfigBytes bounds a configuration file.
const MaxConfigBytes = 4 << 20

// Transport kinds of a ServerConfig.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http" // streamable HTTP
	TransportSSE   = "sse"  // the older HTTP+SSE transport
)

// Config is a parsed MCP client configuration: the servers to connect to,
// sorted by name.
type Config struct {
	Servers []ServerConfig
}

// ServerConfig is one server of the configuration. Env and Headers often
// hold secrets: LogValue hides their values.
type ServerConfig struct {
	// Name is the server's key in the configuration, verbatim.
	Name      string
	Transport string
	// Command, Args, Env and Dir start a stdio server. Env is added to the
	// daemon's environment.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	// URL and Headers reach an HTTP or SSE server.
	URL     string
	Headers map[string]string
}

// LogValue implements slog.LogValuer: the name, transport, command or URL
// without credentials or query, and the names (never the values) of
// environment variables and headers.
func (s ServerConfig) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("name", s.Name), slog.String("transport", s.Transport)}
	if s.Command != "" {
		attrs = append(attrs, slog.String("command", s.Command), slog.Int("args", len(s.Args)))
	}
	if s.URL != "" {
		attrs = append(attrs, slog.String("url", redactURL(s.URL)))
	}
	if len(s.Env) > 0 {
		attrs = append(attrs, slog.Any("env", sortedKeys(s.Env)))
	}
	if len(s.Headers) > 0 {
		attrs = append(attrs, slog.Any("headers", sortedKeys(s.Headers)))
	}
	return slog.GroupValue(attrs...)
}

// secrets are the strings of s that must not appear in an error kept in
// the server's state: env and header values, URL user info and query.
func (s ServerConfig) secrets() []string {
	var out []string
	add := func(v string) {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	for _, v := range s.Env {
		add(v)
	}
	for _, v := range s.Headers {
		add(v)
		// "Bearer TOKEN": the token alone may appear too.
		if _, tok, ok := strings.Cut(v, " "); ok {
			add(tok)
		}
	}
	for _, a := range s.Args {
		// Arguments carry tokens as often as env does (--token=..., URLs).
		if strings.Contains(a, "=") || strings.Contains(a, "://") {
			if _, v, ok := strings.Cut(a, "="); ok {
				add(v)
			}
		}
	}
	if u, err := url.Parse(s.URL); err == nil {
		if u.User != nil {
			add(u.User.String())
		}
		add(u.RawQuery)
	}
	// Longest first so a secret containing another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redact replaces every secret of s in msg.
func (s ServerConfig) redact(msg string) string {
	for _, v := range s.secrets() {
		msg = strings.ReplaceAll(msg, v, "[redacted]")
	}
	return msg
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable url]"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "[redacted]"
	}
	u.Fragment = ""
	return u.String()
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// serverJSON is one entry of either format.
type serverJSON struct {
	Type      string            `json:"type"`
	Command   string            `json:"command"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"`
	Cwd       string            `json:"cwd"`
	URL       string            `json:"url"`
	ServerURL string            `json:"serverUrl"` // Windsurf
	Headers   map[string]string `json:"headers"`
	Disabled  bool              `json:"disabled"`
}

// LoadConfig reads and parses the configuration at path.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrConfig, path, MaxConfigBytes)
	}
	return ParseConfig(data)
}

// ParseConfig parses an MCP client configuration. It accepts
//
//	{"mcpServers": {"NAME": {"command": "...", "args": [...], "env": {...}}}}
//	{"mcpServers": {"NAME": {"url": "https://...", "headers": {...}}}}
//
// (Claude Desktop, Cursor, Cline, Windsurf's "serverUrl", hubs) and VS
// Code's {"servers": {"NAME": {"type": "stdio"|"http"|"sse", ...}}}, also
// nested under "mcp". An entry with "disabled": true is skipped. An entry
// with a url and no type is streamable HTTP, or SSE when the type says so.
// Values are taken verbatim: "${env:X}" and "${input:X}" are not expanded.
func ParseConfig(data []byte) (*Config, error) {
	var top struct {
		MCPServers map[string]serverJSON `json:"mcpServers"`
		Servers    map[string]serverJSON `json:"servers"`
		MCP        *struct {
			Servers map[string]serverJSON `json:"servers"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	entries := map[string]serverJSON{}
	for _, m := range []map[string]serverJSON{top.MCPServers, top.Servers} {
		for k, v := range m {
			if _, dup := entries[k]; dup {
				return nil, fmt.Errorf("%w: server %q is configured twice", ErrConfig, k)
			}
			entries[k] = v
		}
	}
	if top.MCP != nil {
		for k, v := range top.MCP.Servers {
			if _, dup := entries[k]; dup {
				return nil, fmt.Errorf("%w: server %q is configured twice", ErrConfig, k)
			}
			entries[k] = v
		}
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: no servers (expected \"mcpServers\" or \"servers\")", ErrConfig)
	}
	cfg := &Config{}
	for name, e := range entries {
		if e.Disabled {
			continue
		}
		sc, err := e.server(name)
		if err != nil {
			return nil, err
		}
		cfg.Servers = append(cfg.Servers, sc)
	}
	slices.SortFunc(cfg.Servers, func(a, b ServerConfig) int { return strings.Compare(a.Name, b.Name) })
	return cfg, nil
}

func (e serverJSON) server(name string) (ServerConfig, error) {
	if strings.TrimSpace(name) == "" {
		return ServerConfig{}, fmt.Errorf("%w: a server has an empty name", ErrConfig)
	}
	u := e.URL
	if u == "" {
		u = e.ServerURL
	}
	sc := ServerConfig{Name: name, Command: e.Command, Args: e.Args, Env: e.Env, Dir: e.Cwd, URL: u, Headers: e.Headers}
	switch strings.ToLower(e.Type) {
	case "":
		switch {
		case e.Command != "" && u != "":
			return sc, fmt.Errorf("%w: server %q has both command and url", ErrConfig, name)
		case e.Command != "":
			sc.Transport = TransportStdio
		case u != "":
			sc.Transport = TransportHTTP
		default:
			return sc, fmt.Errorf("%w: server %q has neither command nor url", ErrConfig, name)
		}
	case "stdio":
		sc.Transport = TransportStdio
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		sc.Transport = TransportHTTP
	case "sse":
		sc.Transport = TransportSSE
	default:
		return sc, fmt.Errorf("%w: server %q has unknown type %q (want stdio, http or sse)", ErrConfig, name, e.Type)
	}
	switch sc.Transport {
	case TransportStdio:
		if sc.Command == "" {
			return sc, fmt.Errorf("%w: stdio server %q has no command", ErrConfig, name)
		}
	default:
		p, err := url.Parse(sc.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return sc, fmt.Errorf("%w: server %q: url %s is not an http(s) URL", ErrConfig, name, redactURL(sc.URL))
		}
	}
	return sc, nil
}
