package mcpsrc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/classifierd/classifierd/internal/sweep"
)

// ErrTooManyBackends is Isolated.CallTool's refusal to start one more
// backend: the caller holds its share (IsolatedOptions.MaxPerIdentity), or
// every place is taken (MaxBackends) by backends that are busy, or idle
// ones of identities holding less than two more than the caller (an idle
// backend of the identity holding the most otherwise gives way).
var ErrTooManyBackends = errors.New("mcpsrc: too many backends")

// Caller calls a tool on a named server: a *Pool, or an *Isolated.
type Caller interface {
	CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
}

// IsolatedOptions bound an Isolated's backends. Zero values take the
// defaults.
type IsolatedOptions struct {
	// Identity names the caller of ctx (the daemon's server.Caller name);
	// required.
	Identity func(ctx context.Context) string
	// MaxBackends bounds the backends in all (default 64): a stdio
	// backend is a process (the memory server's is about 70 MB).
	MaxBackends int
	// MaxPerIdentity bounds one identity's backends (default: every
	// per-identity server, one each).
	MaxPerIdentity int
	// IdleTimeout stops a backend no call has used for this long (default
	// 10 minutes); what it kept in memory goes with it.
	IdleTimeout time.Duration
	// StartsPerSecond and StartBurst pace the backends started, in all
	// (default 2 a second after a burst of 8): a call that needs a new
	// backend waits for its turn within its deadline, or is refused
	// ErrTooManyBackends at once when its deadline would pass first. A
	// stdio backend's start is a process's (the memory server's node
	// takes about half a second of CPU): 40 identities' first calls at
	// once started 40 of them together (the sixteenth hostile pass).
	StartsPerSecond float64
	StartBurst      int
	// Pool configures each backend's connection (timeouts, stderr).
	Pool Options
}

// Isolated calls the tools of per-identity servers on a connection of the
// calling identity's own, a backend: for a stdio server its own process,
// started at the identity's first call with IdentityPlaceholder expanded
// to the identity's IdentityKey, and stopped once idle; for an HTTP or
// SSE server its own MCP session with the same URL and headers (expanded
// likewise), which separates only what the server keeps per session.
// Other servers' calls go to the shared Caller. Backends are bounded per
// identity and in all, so isolation is not a way to start processes
// without end.
type Isolated struct {
	shared  Caller
	servers map[string]ServerConfig // the per-identity servers, by name
	opts    IsolatedOptions
	stop    chan struct{}
	reaped  sync.WaitGroup
	starts  *rate.Limiter
	// turns are the calls waiting for a turn to start a backend, by
	// identity (under mu): closed when the wait is done.
	turns map[string]chan struct{}

	mu       sync.Mutex
	backends map[backendKey]*backend
	byID     map[string]int // backends per identity, closing ones included
	closing  int            // backends being stopped: they count until gone
	closed   bool
}

type backendKey struct{ identity, server string }

// backend is one identity's connection to one server.
type backend struct {
	pool     *Pool
	inflight int       // calls using it now
	last     time.Time // when the last call ended
}

// NewIsolated returns an Isolated that calls the servers of perIdentity on
// backends of each identity and every other server through shared. Close
// stops every backend.
func NewIsolated(shared Caller, perIdentity []ServerConfig, opts IsolatedOptions) (*Isolated, error) {
	if opts.Identity == nil || shared == nil {
		return nil, errors.New("mcpsrc: an isolated caller needs a shared caller and an identity function")
	}
	if opts.MaxBackends <= 0 {
		opts.MaxBackends = 64
	}
	if opts.MaxPerIdentity <= 0 {
		opts.MaxPerIdentity = max(len(perIdentity), 1)
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	if opts.StartsPerSecond <= 0 {
		opts.StartsPerSecond = 2
	}
	if opts.StartBurst <= 0 {
		opts.StartBurst = 8
	}
	i := &Isolated{shared: shared, servers: map[string]ServerConfig{}, opts: opts, stop: make(chan struct{}),
		backends: map[backendKey]*backend{}, byID: map[string]int{}, turns: map[string]chan struct{}{}, starts: rate.NewLimiter(rate.Limit(opts.StartsPerSecond), opts.StartBurst)}
	for _, sc := range perIdentity {
		i.servers[sc.Name] = sc
	}
	i.reaped.Add(1)
	go i.reap()
	return i, nil
}

// CallTool calls a tool on server: on the caller's own backend if server
// is per-identity (starting it if need be, ErrTooManyBackends past the
// bounds), else through the shared caller.
func (i *Isolated) CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	sc, ok := i.servers[server]
	if !ok {
		return i.shared.CallTool(ctx, server, params)
	}
	key := backendKey{identity: i.opts.Identity(ctx), server: server}
	b, err := i.acquire(ctx, key, sc)
	if err != nil {
		return nil, err
	}
	defer i.release(b)
	// A new backend connects and lists its tools first; a call waits for
	// that (within the connect timeout and its own deadline), not for
	// retries after a failure.
	if _, err := b.pool.WaitReady(ctx); err != nil {
		return nil, err
	}
	return b.pool.CallTool(ctx, server, params)
}

// acquire returns key's backend, started if need be, with one more call
// in flight. When every place is taken, an idle backend of the identity
// holding the most gives way (giveWay): identities within their own
// shares cannot keep another out until their backends idle out.
// A backend is started in its turn (StartsPerSecond), waited for
// within ctx's deadline. An identity has one call at most waiting for a
// turn: its other calls that need a backend wait for that call to have
// started its own, then try again.
func (i *Isolated) acquire(ctx context.Context, key backendKey, sc ServerConfig) (*backend, error) {
	paced := false
	defer func() {
		if paced {
			i.endTurn(key.identity)
		}
	}()
	for {
		b, victim, err := i.place(key, sc, paced)
		if errors.Is(err, errStartUnpaced) {
			if paced, err = i.turn(ctx, key.identity); err != nil {
				return nil, err
			}
			continue
		}
		if victim == nil {
			return b, err
		}
		i.stopBackend(victim)
	}
}

// turn waits, within ctx, for a turn to start a backend of identity
// (StartsPerSecond), and reports true when it has taken one (its caller
// then calls endTurn once it has placed its backend); false when it
// waited for another call of identity's turn to end instead (its caller
// then tries again: that call may have started the backend it needs). A
// turn is taken when it comes, never reserved ahead: a wait given up
// uses none (reservations cancelled out of order were not given back:
// 200 calls cancelled in a second put the next start a minute away, the
// seventeenth hostile pass).
func (i *Isolated) turn(ctx context.Context, identity string) (bool, error) {
	i.mu.Lock()
	if done, ok := i.turns[identity]; ok {
		i.mu.Unlock()
		select {
		case <-done:
			return false, nil
		case <-ctx.Done():
			return false, fmt.Errorf("mcpsrc: waiting for a backend to start: %w", ctx.Err())
		}
	}
	i.turns[identity] = make(chan struct{})
	i.mu.Unlock()
	for {
		now := time.Now()
		if i.starts.AllowN(now, 1) {
			return true, nil
		}
		wait := time.Duration((1 - i.starts.TokensAt(now)) / i.opts.StartsPerSecond * float64(time.Second))
		wait = max(wait, time.Millisecond)
		if dl, ok := ctx.Deadline(); ok && now.Add(wait).After(dl) {
			i.endTurn(identity)
			return false, fmt.Errorf("%w: backends start at most %v a second, and this call's deadline comes before its turn; retry later",
				ErrTooManyBackends, i.opts.StartsPerSecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			i.endTurn(identity)
			return false, fmt.Errorf("mcpsrc: waiting for a turn to start a backend: %w", ctx.Err())
		}
	}
}

// endTurn ends identity's wait for a turn (turn): its other calls
// waiting for it try again.
func (i *Isolated) endTurn(identity string) {
	i.mu.Lock()
	done := i.turns[identity]
	delete(i.turns, identity)
	i.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// errStartUnpaced is place's answer when key needs a new backend and
// its caller has not waited for its turn to start one.
var errStartUnpaced = errors.New("mcpsrc: a backend start not paced")

// place returns key's backend as acquire does, or an idle backend to stop
// first (taken out of the map and counted as closing) before trying
// again; errStartUnpaced if it would start one and paced is false.
func (i *Isolated) place(key backendKey, sc ServerConfig, paced bool) (*backend, *stopping, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnavailable, key.server)
	}
	if b, ok := i.backends[key]; ok {
		b.inflight++
		return b, nil, nil
	}
	switch {
	case i.byID[key.identity] >= i.opts.MaxPerIdentity:
		return nil, nil, fmt.Errorf("%w: this caller has %d backends (limit %d)", ErrTooManyBackends, i.byID[key.identity], i.opts.MaxPerIdentity)
	case len(i.backends)+i.closing >= i.opts.MaxBackends:
		// Refused before its turn is taken: refusals past the bound
		// do not use up the starts of others.
		v := i.giveWay(key.identity)
		switch {
		case v == nil:
			return nil, nil, fmt.Errorf("%w: %d backends run (limit %d); retry once one is idle", ErrTooManyBackends, len(i.backends)+i.closing, i.opts.MaxBackends)
		case !paced:
			return nil, nil, errStartUnpaced
		}
		delete(i.backends, v.key)
		i.closing++
		return nil, v, nil
	case !paced:
		return nil, nil, errStartUnpaced
	}
	b := &backend{pool: Open(&Config{Servers: []ServerConfig{sc.ForIdentity(IdentityKey(key.identity))}}, i.opts.Pool), inflight: 1}
	i.backends[key] = b
	i.byID[key.identity]++
	return b, nil, nil
}

// stopping is a backend taken out of the map, to be stopped.
type stopping struct {
	key backendKey
	b   *backend
}

// giveWay picks, when every place is taken, the backend to stop for a new
// one of identity: an idle one (no call in flight) of the identity that
// holds the most, the least recently used of its idle ones, if that
// identity holds at least two more than identity does (so that, having
// given one up, it still holds at least as many as identity then: two
// identities never take a place back and forth); nil if there is none
// (every backend busy, or places shared evenly). The caller takes it out
// of the map, counted as closing until stopBackend has stopped it. i.mu
// is held.
func (i *Isolated) giveWay(identity string) *stopping {
	var pick *stopping
	for k, b := range i.backends {
		if b.inflight > 0 || k.identity == identity || i.byID[k.identity] < i.byID[identity]+2 {
			continue
		}
		if pick == nil || i.byID[k.identity] > i.byID[pick.key.identity] ||
			i.byID[k.identity] == i.byID[pick.key.identity] && b.last.Before(pick.b.last) {
			pick = &stopping{k, b}
		}
	}
	return pick
}

// stopBackend stops a backend taken out of the map (Reap, giveWay) and
// gives its place back once its process has ended.
func (i *Isolated) stopBackend(s *stopping) {
	_ = s.b.pool.Close()
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closing--
	if i.byID[s.key.identity]--; i.byID[s.key.identity] <= 0 {
		delete(i.byID, s.key.identity)
	}
}

func (i *Isolated) release(b *backend) {
	i.mu.Lock()
	defer i.mu.Unlock()
	b.inflight--
	b.last = time.Now()
}

// reap stops backends idle for IdleTimeout, every quarter of it (1s to
// 1m), until Close.
func (i *Isolated) reap() {
	defer i.reaped.Done()
	t := time.NewTicker(sweep.Interval(i.opts.IdleTimeout))
	defer t.Stop()
	for {
		select {
		case <-i.stop:
			return
		case <-t.C:
			i.Reap(time.Now())
		}
	}
}

// Reap stops every backend that no call uses and that has been idle for
// IdleTimeout at now, and returns how many it stopped. A stopped backend
// keeps its place until its process has ended.
func (i *Isolated) Reap(now time.Time) int {
	var stop []*stopping
	i.mu.Lock()
	for k, b := range i.backends {
		if b.inflight == 0 && now.Sub(b.last) >= i.opts.IdleTimeout {
			stop = append(stop, &stopping{k, b})
			delete(i.backends, k)
			i.closing++
		}
	}
	i.mu.Unlock()
	for _, s := range stop {
		i.stopBackend(s)
	}
	return len(stop)
}

// Backends returns how many backends run (or are stopping), in all and of
// identity.
func (i *Isolated) Backends(identity string) (total, ofIdentity int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.backends) + i.closing, i.byID[identity]
}

// Close stops the reaper and every backend; calls after it are
// ErrUnavailable. It does not close the shared caller.
func (i *Isolated) Close() error {
	i.mu.Lock()
	if i.closed {
		i.mu.Unlock()
		return nil
	}
	i.closed = true
	all := i.backends
	i.backends = map[backendKey]*backend{}
	i.mu.Unlock()
	close(i.stop)
	i.reaped.Wait()
	var wg sync.WaitGroup
	for _, b := range all {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.pool.Close() }()
	}
	wg.Wait()
	return nil
}
