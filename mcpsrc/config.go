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
// tool on a named server. An Isolated calls the servers marked
// per-identity on backends of each calling identity's own, bounded and
// stopped when idle. The package does not log: errors are kept in each
// server's state, with every secret of the configuration (env values,
// headers, URL credentials and query) redacted.
package mcpsrc

import (
	"crypto/sha256"
	"encoding/hex"
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
	// Isolation is the entry's "isolation": IsolationShared,
	// IsolationPerIdentity, or "" when it sets none (the consumer's
	// default applies).
	Isolation string
}

// Isolations of a ServerConfig: whether the callers of a server's tools
// share one connection to it (one process, for a stdio server) or each
// identity gets its own (Isolated).
const (
	IsolationShared      = "shared"
	IsolationPerIdentity = "per-identity"
)

// IdentityPlaceholder, in a per-identity server's args, env values,
// working directory or header values, is replaced by the identity's
// IdentityKey: a server that keeps its data in a file (the memory server's
// MEMORY_FILE_PATH) needs one file per identity, or its processes share
// the data all the same.
const IdentityPlaceholder = "${identity}"

// UsesIdentity reports whether s's args, env, working directory or
// headers hold IdentityPlaceholder.
func (s ServerConfig) UsesIdentity() bool {
	has := func(v string) bool { return strings.Contains(v, IdentityPlaceholder) }
	if has(s.Dir) || slices.ContainsFunc(s.Args, has) {
		return true
	}
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			if has(v) {
				return true
			}
		}
	}
	return false
}

// ForIdentity returns a copy of s with IdentityPlaceholder replaced by key
// (an IdentityKey) in its args, env values, working directory and header
// values.
func (s ServerConfig) ForIdentity(key string) ServerConfig {
	r := func(v string) string { return strings.ReplaceAll(v, IdentityPlaceholder, key) }
	out := s
	out.Dir = r(s.Dir)
	if s.Args != nil {
		out.Args = make([]string, len(s.Args))
		for i, a := range s.Args {
			out.Args[i] = r(a)
		}
	}
	rm := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		o := make(map[string]string, len(m))
		for k, v := range m {
			o[k] = r(v)
		}
		return o
	}
	out.Env, out.Headers = rm(s.Env), rm(s.Headers)
	return out
}

// Isolate applies def (IsolationShared or IsolationPerIdentity) to the
// servers that set no isolation and splits c: listing is c with every
// per-identity server's IdentityPlaceholder expanded to "catalog", for
// the one connection that lists its tools (an IdentityKey always ends in
// a hash, so no identity shares it); perIdentity are the per-identity
// servers as configured, for Isolated. A shared server that uses
// IdentityPlaceholder is an error: it has no identity to expand it to.
func (c *Config) Isolate(def string) (listing *Config, perIdentity []ServerConfig, err error) {
	if def != IsolationShared && def != IsolationPerIdentity {
		return nil, nil, fmt.Errorf("%w: isolation %q (want %s or %s)", ErrConfig, def, IsolationShared, IsolationPerIdentity)
	}
	listing = &Config{}
	for _, sc := range c.Servers {
		if sc.Isolation == "" {
			sc.Isolation = def
		}
		switch {
		case sc.Isolation == IsolationPerIdentity:
			perIdentity = append(perIdentity, sc)
			listing.Servers = append(listing.Servers, sc.ForIdentity("catalog"))
		case sc.UsesIdentity():
			return nil, nil, fmt.Errorf("%w: server %q uses %s but is shared (isolation %q): set \"isolation\": %q", ErrConfig, sc.Name,
				IdentityPlaceholder, sc.Isolation, IsolationPerIdentity)
		default:
			listing.Servers = append(listing.Servers, sc)
		}
	}
	return listing, perIdentity, nil
}

// IdentityKey is the form of an identity's name that IdentityPlaceholder
// expands to: up to 32 of its letters, digits, '-' and '_' (others become
// '_'), then '-' and 12 hex digits of its SHA-256, so two names never
// share a key and no key is a path ("..", "/") whatever the name.
func IdentityKey(name string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() == 32 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(name))
	return b.String() + "-" + hex.EncodeToString(sum[:6])
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
	Isolation string            `json:"isolation"` // classifierd's own: IsolationShared or IsolationPerIdentity
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
	sc := ServerConfig{Name: name, Command: e.Command, Args: e.Args, Env: e.Env, Dir: e.Cwd, URL: u, Headers: e.Headers, Isolation: e.Isolation}
	switch e.Isolation {
	case "", IsolationShared, IsolationPerIdentity:
	default:
		return sc, fmt.Errorf("%w: server %q has isolation %q (want %s or %s)", ErrConfig, name, e.Isolation, IsolationShared, IsolationPerIdentity)
	}
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
