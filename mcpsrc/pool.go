package mcpsrc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Errors of CallTool.
var (
	// ErrUnknownServer: no server of that name is configured.
	ErrUnknownServer = errors.New("mcpsrc: unknown server")
	// ErrUnavailable: the server is configured but not connected now.
	ErrUnavailable = errors.New("mcpsrc: server unavailable")
)

// MaxTools bounds the tools kept for one server; a server listing more is
// an error (and keeps its last known tools). MaxEmptyPages bounds the
// pages of one listing that hold no tool (every other page holds one at
// least, so MaxTools bounds them), and MaxListBytes its tools'
// definitions in JSON; a cursor given twice ends it as an error too. A listing was bounded by Timeout alone: a
// backend looping over empty pages answered 2,000-6,000 a second for its
// 10 s, and one of 4,000 tools of 70 KB took the proxy from 294 to 588 MB
// at each listing (the sixteenth hostile pass).
const (
	MaxTools      = 5000
	MaxEmptyPages = 16
	MaxListBytes  = 16 << 20
)

// relistFactor spaces a server's listings by their cost: the next at
// least this many times the last one's duration after it began (and
// MinRelist). healthySession is how long a session must have lasted for
// its end to be followed by a reconnection after RetryMin, not the
// backoff.
const (
	relistFactor   = 10
	healthySession = time.Minute
)

// errListBound marks a listing ended by one of the bounds above: the
// server's fault, not a passing failure, so it is tried again after
// Options.BoundRetry, not the reconnection backoff.
var errListBound = errors.New("a listing bound")

// boundError is a listing's error for breaking a bound.
func boundError(format string, args ...any) error {
	return &listBoundError{msg: fmt.Sprintf(format, args...)}
}

type listBoundError struct{ msg string }

func (e *listBoundError) Error() string        { return e.msg }
func (e *listBoundError) Is(target error) bool { return target == errListBound }

// Options tunes a Pool. The zero value uses the defaults below.
type Options struct {
	// Timeout bounds connecting (with initialisation) and each tools/list
	// (default 10s).
	Timeout time.Duration
	// Refresh, if positive, lists every connected server's tools again at
	// this interval, for servers that do not send list_changed.
	Refresh time.Duration
	// RetryMin and RetryMax bound the exponential wait before reconnecting
	// to a failed server (default 1s and 1m).
	RetryMin, RetryMax time.Duration
	// BoundRetry bounds the wait before reconnecting to a server whose
	// listing broke a bound (MaxTools, MaxEmptyPages, MaxListBytes, a
	// cursor given twice): twice RetryMax at first, doubled at each such
	// listing up to BoundRetry (default DefaultBoundRetry, at least
	// RetryMax), back to the usual backoff once a listing succeeds.
	BoundRetry time.Duration
	// MinRelist is the least time between two tools/list of one server
	// (default DefaultMinRelist): the notifications/tools/list_changed
	// a server sends meanwhile are answered by one tools/list when it has
	// passed, which sees the server's latest tools.
	MinRelist time.Duration
	// KeepAlive, if positive, pings each server at this interval; a server
	// that stops answering is marked degraded and reconnected.
	KeepAlive time.Duration
	// Stderr receives stdio servers' standard error (default: discarded).
	Stderr io.Writer
	// ClientName is the name the pool gives servers (default "classifierd").
	ClientName, ClientVersion string
}

// DefaultMinRelist is Options.MinRelist's default: a server sending
// notifications/tools/list_changed without pause is listed, and its tools
// decoded and compared by the daemon or the proxy, once a second at most
// (what the daemon and the proxy then index is bounded apart: the
// proxy's MinReindexInterval and embedding budget, the daemon's
// rebuild budget).
const DefaultMinRelist = time.Second

// DefaultBoundRetry is Options.BoundRetry's default. Such a server was
// restarted and listed again after the backoff, at most a minute, each
// time up to MaxListBytes of definitions decoded (the sixteenth hostile
// pass's re-verification; times --max-backends for the proxy's
// per-identity backends); what it lists seldom changes by itself, so it
// is tried 2, 4, 8, ... minutes later, then hourly.
const DefaultBoundRetry = time.Hour

func (o Options) withDefaults() Options {
	if o.MinRelist <= 0 {
		o.MinRelist = DefaultMinRelist
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(time.Minute, o.RetryMin)
	}
	if o.BoundRetry <= 0 {
		o.BoundRetry = DefaultBoundRetry
	}
	o.BoundRetry = max(o.BoundRetry, o.RetryMax)
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.ClientName == "" {
		o.ClientName = "classifierd"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "v0"
	}
	return o
}

// ServerState is what the pool knows of one server. Tools are the last
// list the server returned and are never emptied by a failure.
type ServerState struct {
	Name      string
	Transport string
	// Tools are the server's tools in the order it listed them; treat them
	// as read-only.
	Tools []*mcp.Tool
	// Listed is true once a tools/list has succeeded.
	Listed bool
	// Connected is true while a session is open.
	Connected bool
	// Degraded is true when the last attempt to connect or list failed, or
	// the connection was lost: Tools are then the last known ones.
	Degraded bool
	// LastError is the last failure, secrets redacted ("" after a success).
	LastError string
	// LastSync is when Tools were last listed successfully.
	LastSync time.Time
	// Attempted is true once a first connection attempt has ended.
	Attempted bool
}

// Snapshot is an immutable view of every server, in configuration order.
type Snapshot struct {
	// Version increases with every change of any server's state.
	Version uint64
	Servers []ServerState
	// Changed is closed when a newer snapshot exists.
	Changed <-chan struct{}
}

// Ready reports whether every server has had a first connection attempt.
func (s Snapshot) Ready() bool {
	for _, st := range s.Servers {
		if !st.Attempted {
			return false
		}
	}
	return true
}

// Pool keeps a live connection to every configured server.
type Pool struct {
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	servers []*conn // in configuration order
	version uint64
	snap    Snapshot
	changed chan struct{}
}

// conn is one server's connection, owned by its goroutine.
type conn struct {
	cfg    ServerConfig
	p      *Pool
	cancel context.CancelFunc

	mu      sync.Mutex
	state   ServerState
	session *mcp.ClientSession
}

// Open starts connecting to every server of cfg in the background and
// returns at once; Snapshot tells what is known so far, WaitReady waits for
// the first attempt on every server. Close stops everything.
func Open(cfg *Config, opts Options) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{opts: opts.withDefaults(), ctx: ctx, cancel: cancel, changed: make(chan struct{})}
	p.Update(cfg)
	return p
}

// Update makes the pool follow a new configuration: a server whose entry
// is unchanged keeps its connection and its last known tools, a changed
// or new one is (re)connected, and a removed one is disconnected.
func (p *Pool) Update(cfg *Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := map[string]*conn{}
	for _, c := range p.servers {
		old[c.cfg.Name] = c
	}
	var next []*conn
	for _, sc := range cfg.Servers {
		if c, ok := old[sc.Name]; ok && reflect.DeepEqual(c.cfg, sc) {
			delete(old, sc.Name)
			next = append(next, c)
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		c := &conn{cfg: sc, p: p, cancel: cancel, state: ServerState{Name: sc.Name, Transport: sc.Transport}}
		next = append(next, c)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			c.run(ctx)
		}()
	}
	for _, c := range old {
		c.cancel()
	}
	p.servers = next
	p.publishLocked()
}

// Snapshot returns the current view of every server.
func (p *Pool) Snapshot() Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap
}

// WaitReady waits until every server has had a first connection attempt
// (successful or not), or ctx ends.
func (p *Pool) WaitReady(ctx context.Context) (Snapshot, error) {
	for {
		s := p.Snapshot()
		if s.Ready() {
			return s, nil
		}
		select {
		case <-s.Changed:
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}

// CallTool calls a tool on the named server over its live session.
// The error keeps the SDK's error for errors.Is and errors.As, but its
// message has the server's configured secrets redacted.
func (p *Pool) CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	p.mu.Lock()
	var c *conn
	for _, x := range p.servers {
		if x.cfg.Name == server {
			c = x
		}
	}
	p.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	c.mu.Lock()
	cs := c.session
	c.mu.Unlock()
	if cs == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnavailable, server)
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return nil, &redactedError{msg: c.cfg.redact(err.Error()), err: err}
	}
	return res, nil
}

// redactedError is an error whose message has secrets redacted; Unwrap
// gives the original for errors.Is and errors.As (whose own message
// callers must not log).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Close stops every connection (stdio servers get their stdin closed, then
// a signal) and waits for the goroutines to end.
func (p *Pool) Close() error {
	p.cancel()
	p.wg.Wait()
	return nil
}

// publish rebuilds the snapshot after a server's state changed.
func (p *Pool) publish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.publishLocked()
}

func (p *Pool) publishLocked() {
	p.version++
	s := Snapshot{Version: p.version, Changed: make(chan struct{})}
	for _, c := range p.servers {
		c.mu.Lock()
		s.Servers = append(s.Servers, c.state)
		c.mu.Unlock()
	}
	old := p.changed
	p.changed = make(chan struct{})
	s.Changed = p.changed
	p.snap = s
	close(old)
}

// update changes the server's state under its lock and publishes.
func (c *conn) update(f func(*ServerState)) {
	c.mu.Lock()
	f(&c.state)
	c.mu.Unlock()
	c.p.publish()
}

func (c *conn) fail(err error) {
	msg := c.cfg.redact(err.Error())
	c.update(func(s *ServerState) {
		s.Degraded, s.Connected, s.Attempted, s.LastError = true, false, true, msg
	})
}

// run connects, lists, follows changes and reconnects until ctx ends.
func (c *conn) run(ctx context.Context) {
	wait := c.p.opts.RetryMin
	bound := c.p.opts.RetryMax // the wait after a listing over a bound, doubled each time
	for ctx.Err() == nil {
		began := time.Now()
		listed, err := c.session1(ctx)
		if ctx.Err() != nil {
			return
		}
		next := wait
		switch {
		case errors.Is(err, errListBound):
			bound = min(bound*2, c.p.opts.BoundRetry)
			next = bound
			err = fmt.Errorf("%w (tried again in %v)", err, next)
		case listed && time.Since(began) >= healthySession:
			// The server was healthy: reconnect soon. One that lists
			// and exits at once backs off (a 15 MB listing then an exit
			// was restarted every 2.3 s: the seventeenth hostile pass).
			next, bound = c.p.opts.RetryMin, c.p.opts.RetryMax
		}
		c.fail(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		wait = min(next*2, c.p.opts.RetryMax)
	}
}

// session1 runs one session: connect, list, then relist on every
// list_changed (and Refresh tick) until the session ends or ctx does. It
// returns whether a list succeeded and why the session ended (never nil
// unless ctx ended).
func (c *conn) session1(ctx context.Context) (listed bool, _ error) {
	changed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: c.p.opts.ClientName, Version: c.p.opts.ClientVersion},
		&mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{},
			KeepAlive:    c.p.opts.KeepAlive,
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default:
				}
			},
		})
	cctx, cancel := context.WithTimeout(ctx, c.p.opts.Timeout)
	cs, err := client.Connect(cctx, c.transport(), nil)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	c.mu.Lock()
	c.session = cs
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.session = nil
		c.mu.Unlock()
		_ = cs.Close()
	}()
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()

	var tick <-chan time.Time
	if c.p.opts.Refresh > 0 {
		t := time.NewTicker(c.p.opts.Refresh)
		defer t.Stop()
		tick = t.C
	}
	// relist fires MinRelist after the last list, once told of a change.
	relist := time.NewTimer(time.Hour)
	relist.Stop()
	defer relist.Stop()
	var wait <-chan time.Time
	for {
		select {
		case <-changed: // this list covers what was announced before it
		default:
		}
		last := time.Now()
		if err := c.list(ctx, cs); err != nil {
			return listed, err
		}
		listed = true
		// A listing's cost spaces the next: one that took 0.5 s is
		// followed by one 5 s later at the soonest. A backend listing 15 MB
		// under the bounds and announcing a change every 100 ms was listed
		// every second (MinRelist), 28 s of the proxy's CPU in 30 s (the
		// seventeenth hostile pass).
		gap := max(c.p.opts.MinRelist, relistFactor*time.Since(last))
	waiting:
		for {
			select {
			case <-ctx.Done():
				return listed, nil
			case err := <-ended:
				if err == nil {
					err = errors.New("server closed the connection")
				}
				return listed, fmt.Errorf("session ended: %w", err)
			case <-changed:
				if wait != nil {
					continue // a list is due already
				}
				if d := time.Until(last.Add(gap)); d > 0 {
					relist.Reset(d)
					wait = relist.C
					continue
				}
				break waiting
			case <-wait:
				wait = nil
				break waiting
			case <-tick:
				if wait != nil {
					relist.Stop()
					wait = nil
				}
				break waiting
			}
		}
	}
}

// list lists every page of the server's tools and, on success, replaces
// its tools and clears its degraded state.
func (c *conn) list(ctx context.Context, cs *mcp.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, c.p.opts.Timeout)
	defer cancel()
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	seen := map[string]bool{}
	size := 0
	for empty := 0; ; {
		res, err := cs.ListTools(lctx, params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if len(res.Tools) == 0 {
			if empty++; empty > MaxEmptyPages {
				return boundError("tools/list: more than %d pages without a tool", MaxEmptyPages)
			}
		}
		for _, t := range res.Tools {
			if len(tools) == MaxTools {
				return boundError("tools/list: more than %d tools", MaxTools)
			}
			if size += toolBytes(t); size > MaxListBytes {
				return boundError("tools/list: more than %d bytes of tool definitions", MaxListBytes)
			}
			tools = append(tools, t)
		}
		if res.NextCursor == "" {
			break
		}
		if seen[res.NextCursor] {
			return boundError("tools/list: a page's cursor given again")
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	now := time.Now()
	c.update(func(s *ServerState) {
		s.Tools, s.Listed, s.Connected, s.Degraded, s.LastError, s.LastSync, s.Attempted = tools, true, true, false, "", now, true
	})
	return nil
}

// toolBytes is the size of t's definition in JSON.
func toolBytes(t *mcp.Tool) int {
	b, _ := json.Marshal(t)
	return len(b)
}

func (c *conn) transport() mcp.Transport {
	sc := c.cfg
	switch sc.Transport {
	case TransportStdio:
		cmd := exec.Command(sc.Command, sc.Args...)
		cmd.Env = InheritedEnv(os.Environ())
		for _, k := range sortedKeys(sc.Env) {
			cmd.Env = append(cmd.Env, k+"="+sc.Env[k])
		}
		cmd.Dir = sc.Dir
		cmd.Stderr = c.p.opts.Stderr
		return &commandTransport{cmd: cmd, terminate: 2 * time.Second}
	case TransportSSE:
		return &mcp.SSEClientTransport{Endpoint: sc.URL, HTTPClient: c.httpClient()}
	default:
		return &mcp.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: c.httpClient(), MaxRetries: 2}
	}
}

func (c *conn) httpClient() *http.Client {
	return &http.Client{Transport: headerTransport{headers: c.cfg.Headers, base: http.DefaultTransport}}
}

// headerTransport adds the configured headers to every request, and caps
// the messages of every answer (MaxMessage).
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := h.base.RoundTrip(r)
	if err == nil {
		resp.Body = cappedBody(resp.Body, resp.Header.Get("Content-Type"))
	}
	return resp, err
}

// InheritedEnv is the environment a stdio backend inherits from environ
// (the daemon's or the proxy's): all of it but classifierd's own
// configuration and secrets, every CLASSIFIERD_ variable (the Redis
// password of --state, $CLASSIFIERD_STATE_PASSWORD) and the OTLP
// exporter's headers (OTEL_EXPORTER_OTLP_HEADERS and its per-signal
// forms, which carry the collector's credentials). A backend is another
// program, often from a registry, and some answer their environment to
// any caller (server-everything's get-env did, with the Redis password, in
// the tenth hostile pass). A server's own "env" in the configuration is
// added after, so one that needs such a variable is given it by name.
func InheritedEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if ownSecret(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func ownSecret(name string) bool {
	up := strings.ToUpper(name)
	return strings.HasPrefix(up, "CLASSIFIERD_") ||
		strings.HasPrefix(up, "OTEL_EXPORTER_OTLP_") && strings.HasSuffix(up, "HEADERS")
}
