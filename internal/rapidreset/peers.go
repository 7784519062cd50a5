// Package rapidreset counts, per peer and across its connections, the
// requests clients abandon before the server could answer them (an
// HTTP/2 "rapid reset": HEADERS then RST_STREAM, over and over), and
// penalizes the peers that make them most of their requests: their
// connections that go on are closed early, and their new connections are
// held back before any TLS or HTTP/2 work (Listener, a tarpit). The gRPC
// listener (package server) and the HTTP listeners (HTTP/JSON, MCP, the
// proxy's MCP: Handler) count to the same Peers, so a peer penalized on
// one is penalized on all of a process's listeners.
package rapidreset

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/internal/peerkey"
)

// EarlyResetsMin: a connection that has had this many early resets, more
// than half of its requests, is closed at once (PenalizedEarlyResetsMin
// if its peer is penalized), and its peer penalized. Each such request
// costs the server its headers' decoding, a handler and its teardown,
// and the client almost nothing: it reads no answer and never waits.
const EarlyResetsMin = 64

// The rule per peer, across its connections: a client that sent 63
// resets on a connection, closed it and opened another was never caught
// by the rule per connection (the twelfth hostile pass: 4 connections,
// 50,000 resets a second over 1,000 new connections a second, the daemon
// 8-10 s of CPU in 10 s and another identity's Route p99 1.6-4.8 s; the
// thirteenth, the same over TLS on the HTTP listeners). A peer is an IPv4
// address or an IPv6 /64 (peerkey), except that every loopback address
// and a Unix socket are one peer, Local: the thirteenth hostile pass
// reset from 1,000 loopback addresses, each a peer under its share, and
// was never caught. Once a peer's requests within PeerResetWindow have
// had PeerEarlyResetsMin early resets and they are more than half of its
// requests (a client whose short deadlines expire before the server
// reads some messages is not a resetter), or one of its connections is
// caught, the peer is penalized for PeerResetPenalty: each of its
// connections is closed at its PenalizedEarlyResetsMin-th early reset (if
// most of its requests), and the listeners serve at most
// PenalizedConnsPerSecond of its new connections a second (after a burst
// of PenalizedConnBurst), holding the others back unread, in order
// (Listener). The penalized peer's open connections whose requests are
// answered (another client behind the same address: a NAT, or another
// local agent) go on working; their new connections wait their turn.
const (
	PeerEarlyResetsMin      = 256
	PeerResetWindow         = 10 * time.Second
	PeerResetPenalty        = 30 * time.Second
	PenalizedEarlyResetsMin = 8
	PenalizedConnsPerSecond = 2
	PenalizedConnBurst      = 4
	maxPeers                = 1 << 16
	peersSweepThreshold     = 1 << 12
)

// Local is the one peer every loopback address and a Unix socket count
// as.
var Local = netip.IPv6Loopback()

// PeerOf is the peer a connection from addr counts as.
func PeerOf(addr net.Addr) netip.Addr {
	p, ok := peerkey.Remote(addr)
	if !ok || p.IsLoopback() {
		return Local
	}
	return p
}

// Peers counts the early resets of each peer in the current window and
// holds the penalized peers. Its zero value is not ready: use New.
type Peers struct {
	mu        sync.Mutex
	m         map[netip.Addr]*peerResets
	lastSweep time.Time
	now       func() time.Time
	// penalized counts the peers penalized, refused the held connections
	// closed (the queue full, or held too long), httpCloses the HTTP
	// connections closed by the rule.
	penalized, refused, httpCloses, held atomic.Int64
	// throttled counts the reads of HTTP/2 connections held back for
	// their cheap frames (FrameBudget), on every listener of the Peers.
	throttled atomic.Int64
	// unreadHeld counts the reads of gRPC connections held back for
	// their unread DATA (UnreadWait).
	unreadHeld atomic.Int64
	onPenalty  func(peer netip.Addr, resets, calls int64, until time.Time)
}

type peerResets struct {
	window       time.Time // when the current window started
	calls, early int64     // requests ended in it, and early resets
	until        time.Time // penalized until (zero: not)
	// The connections a penalized peer may still open: a token bucket.
	tokens float64
	last   time.Time
	// The peer's cheap frames past its connections' own budgets
	// (FrameBudget): a token bucket, in frames, at ftokens when flast
	// (zero: full).
	ftokens float64
	flast   time.Time
	// The own rates of the peer's connections (FrameBudget,
	// PeerOwnRate): what they queued is paid until opaid.
	opaid time.Time
	// The unread DATA of the peer's gRPC connections (UnreadWait) is
	// paid until upaid.
	upaid time.Time
}

// New returns empty Peers on the wall clock.
func New() *Peers { return NewAt(time.Now) }

// NewAt returns empty Peers on the clock now (tests move it).
func NewAt(now func() time.Time) *Peers {
	return &Peers{m: map[netip.Addr]*peerResets{}, now: now}
}

// OnPenalty has f told of each peer penalized (the log). Set before
// serving.
func (r *Peers) OnPenalty(f func(peer netip.Addr, resets, calls int64, until time.Time)) {
	r.onPenalty = f
}

// Log logs each peer penalized. Set before serving.
func (r *Peers) Log(log *slog.Logger) {
	r.OnPenalty(func(peer netip.Addr, resets, calls int64, until time.Time) {
		who := peer.String()
		if peer == Local {
			who = "local (loopback or Unix socket)"
		}
		log.Warn("a peer reset many requests before their answer: its connections that do so are closed and its new ones limited",
			"peer", who, "early_resets", resets, "requests", calls, "within", PeerResetWindow.String(),
			"until", until.UTC().Format(time.RFC3339), "new_conns_per_second", PenalizedConnsPerSecond)
	})
}

// Penalties is how many times a peer was penalized; Refused, how many
// new connections of penalized peers were closed unserved (the queue
// full, or held PenalizedConnWait); HTTPCloses, how many HTTP
// connections the rule closed (Handler).
func (r *Peers) Penalties() int64 { return r.penalized.Load() }

// Refused: see Penalties.
func (r *Peers) Refused() int64 { return r.refused.Load() }

// Held is how many new connections of penalized peers were held back
// (never the local peer's).
func (r *Peers) Held() int64 { return r.held.Load() }

// HTTPCloses: see Penalties.
func (r *Peers) HTTPCloses() int64 { return r.httpCloses.Load() }

// entryLocked is peer's record, created if room is left; nil if not
// (the rule per connection still applies).
func (r *Peers) entryLocked(peer netip.Addr, now time.Time) *peerResets {
	if p, ok := r.m[peer]; ok {
		return p
	}
	if len(r.m) >= peersSweepThreshold && now.Sub(r.lastSweep) >= PeerResetWindow {
		r.lastSweep = now
		for k, p := range r.m {
			if now.Sub(p.window) >= 2*PeerResetWindow && !now.Before(p.until) {
				delete(r.m, k)
			}
		}
	}
	if len(r.m) >= maxPeers {
		return nil
	}
	p := &peerResets{window: now}
	r.m[peer] = p
	return p
}

// Ended counts a request of peer that ended, early or not, penalizes the
// peer past the rule (or at once when caught says one of its connections
// was), and reports whether it is penalized.
func (r *Peers) Ended(peer netip.Addr, early, caught bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	p := r.entryLocked(peer, now)
	if p == nil {
		return false
	}
	if now.Sub(p.window) >= PeerResetWindow {
		p.window, p.calls, p.early = now, 0, 0
	}
	if !caught {
		p.calls++
		if early {
			p.early++
		}
	}
	if penalized := now.Before(p.until); !penalized && (caught || p.early >= PeerEarlyResetsMin && 2*p.early > p.calls) {
		p.until = now.Add(PeerResetPenalty)
		p.tokens, p.last = PenalizedConnBurst, now
		r.penalized.Add(1)
		if r.onPenalty != nil {
			r.onPenalty(peer, p.early, p.calls, p.until)
		}
		p.calls, p.early = 0, 0
	}
	return now.Before(p.until)
}

// Admit reports whether a new connection of peer may be served now:
// always, unless the peer is penalized and has used its places for now
// (then Listener holds it back).
func (r *Peers) Admit(peer netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.m[peer]
	if !ok {
		return true
	}
	now := r.now()
	if !now.Before(p.until) {
		return true
	}
	p.tokens = min(PenalizedConnBurst, p.tokens+now.Sub(p.last).Seconds()*PenalizedConnsPerSecond)
	p.last = now
	if p.tokens < 1 {
		return false
	}
	p.tokens--
	return true
}

// GiveBack returns a place Admit took for peer.
func (r *Peers) GiveBack(peer netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.m[peer]; ok && r.now().Before(p.until) {
		p.tokens = min(PenalizedConnBurst, p.tokens+1)
	}
}

// Conn counts one connection's requests and early resets for the rule
// per connection, and its peer's (Peers may be nil: the rule per
// connection alone).
type Conn struct {
	Peers        *Peers
	Peer         netip.Addr
	calls, early atomic.Int64
	caught, done atomic.Bool

	// io numbers the connection's reads and writes that moved bytes (on
	// Listener's connections); lastRead and lastWrite are the latest
	// of each (Pipelined).
	io, lastRead, lastWrite atomic.Int64
	// wire counts the bytes read (on Listener's connections), for the
	// overhead of a chunked body (ChunkedOverhead).
	wire atomic.Int64
	// requests counts the HTTP requests that reached the handler
	// (Serve), credited to the connection's FrameBudget; active, the
	// requests (or gRPC calls) under way (Begin).
	requests, active atomic.Int64
	// settled counts its requests that passed authentication
	// (MarkAuthenticated) or ended without (Unsettled), and wake is told
	// of each (NewConn).
	settled atomic.Int64
	wake    chan struct{}
	// refusing counts its HTTP/2 refusals written and not yet ended
	// (catches); goaway is set once one of them closes it by GOAWAY.
	refusing atomic.Int64
	goaway   atomic.Bool
}

// NewConn is a connection's count, of peer to peers (nil: the rule per
// connection alone).
func NewConn(peers *Peers, peer netip.Addr) *Conn {
	return &Conn{Peers: peers, Peer: peer, wake: make(chan struct{}, 1)}
}

// settle counts a request that passed authentication or ended without,
// and wakes a reader waiting for it (AwaitSettled).
func (c *Conn) settle() {
	c.settled.Add(1)
	if c.wake != nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Begin counts a request (or call) of the connection under way until
// end is called: only a connection with one under way takes its peer's
// spare of cheap frames (TakeFrames).
func (c *Conn) Begin() (end func()) {
	c.active.Add(1)
	return func() { c.active.Add(-1) }
}

// Pipelined reports whether the connection has written since it last
// read: asked as an HTTP/1.1 request starts, whether the request was
// read before the answer to the one before it was written, that is
// pipelined (an honest client waits for each answer, so its next
// request is read after it). False on a connection not of Listener.
func (c *Conn) Pipelined() bool { return c.lastWrite.Load() > c.lastRead.Load() }

// Ended counts a request of the connection that ended, early or not,
// and reports true once, for the request that has the connection caught:
// EarlyResetsMin early resets (PenalizedEarlyResetsMin if its peer is
// penalized), more than half of its requests. Its peer is then penalized
// at once; the caller closes the connection.
func (c *Conn) Ended(early bool) bool { return c.ended(early, false) }

// catches reports whether ended(true, first) would catch the connection
// once the refusals written and not yet ended, refusing of them counting
// this one, have ended, without counting anything: asked as a refusal is
// written, so that its answer can close the connection by GOAWAY
// (Serve). Refusals in flight together write their headers before any of
// them has ended: counted from the ended alone, none predicted the catch,
// and the one that caught closed the connection at once, the others'
// answers cut after their headers (the twenty-seventh hostile pass, ten
// 404s at once). Requests ending meanwhile may make it wrong either way;
// ended decides.
func (c *Conn) catches(first bool, refusing int64) bool {
	if c.caught.Load() {
		return false
	}
	n, calls := c.early.Load()+refusing, c.calls.Load()+refusing
	if c.Peers == nil || !c.Peers.Penalized(c.Peer) {
		return n >= EarlyResetsMin && 2*n > calls
	}
	return first || n >= PenalizedEarlyResetsMin && 2*n > calls
}

// ended is Ended; with first, a connection of a penalized peer is
// caught at this early request, whatever came before it (on HTTP, a
// request refused without passing authentication: Serve).
func (c *Conn) ended(early, first bool) bool {
	calls := c.calls.Add(1)
	n := c.early.Load()
	if early {
		n = c.early.Add(1)
	}
	least, most := int64(EarlyResetsMin), 2*n > calls
	if c.Peers != nil && c.Peers.Ended(c.Peer, early, false) {
		least = PenalizedEarlyResetsMin
		if first {
			least, most = 1, true
		}
	}
	if !early || n < least || !most || !c.caught.CompareAndSwap(false, true) {
		return false
	}
	if c.Peers != nil {
		c.Peers.Ended(c.Peer, false, true)
	}
	return true
}

// Closed counts the connection's end: one that carried no request at
// all (a TCP or TLS handshake, an HTTP/2 preface, then nothing) counts
// as an early reset of its peer. The thirteenth hostile pass opened
// 3,900 such connections a second from one address, with no token: the
// daemon 6.3 s of CPU in 10 s, another identity's Route p99 252 ms. Such
// a peer is now penalized as a resetter is, and its new connections are
// held back before any handshake. Counted once.
func (c *Conn) Closed() {
	if c.done.CompareAndSwap(false, true) && c.calls.Load() == 0 && c.Peers != nil {
		c.Peers.Ended(c.Peer, true, false)
	}
}

// closesByGoaway reports whether a refusal has closed the connection by
// GOAWAY (Serve): net/http ends the streams open before it and closes
// it, and the request the rule catches leaves it to that.
func (c *Conn) closesByGoaway() bool { return c.goaway.Load() }

// Caught reports whether Ended has had the connection caught.
func (c *Conn) Caught() bool { return c.caught.Load() }

// Unsettled reports whether an HTTP/2 connection's reader must take no
// more of its client's frames for now: its peer is penalized, and a
// stream it opened (opened: the header blocks the reader has seen) has
// neither passed authentication nor ended (MarkAuthenticated, Serve).
// A penalized peer's connections so open one stream at a time until each
// is authenticated, and one that is refused for it is closed (Serve): the
// twenty-fourth hostile pass opened 16 streams with bodies at a time on
// each of 256 connections from the loopback peer, no token, each
// connection closed after 14 refusals and opened again at once, and the
// daemon spent 2.4 times the client's CPU on them, its heap to 3.9 GB
// with the bodies' buffers. An honest client's streams pass
// authentication as soon as their handlers start.
func (c *Conn) Unsettled(opened int64) bool {
	return c != nil && c.Peers != nil && opened > c.settled.Load() && c.Peers.Penalized(c.Peer)
}

// AwaitSettled waits while the connection is Unsettled(opened), at most
// UnsettledWait; false if gone is closed first. Past UnsettledWait the
// streams it waited for count as settled: a stream the HTTP/2 server
// refuses itself (a malformed head) never reaches a handler. A Conn not
// made by NewConn (no wake) is woken by neither, and waits it out.
func (c *Conn) AwaitSettled(opened int64, gone <-chan struct{}) bool {
	t := time.NewTimer(UnsettledWait)
	defer t.Stop()
	for c.Unsettled(opened) {
		select {
		case <-c.wake:
		case <-t.C:
			for s := c.settled.Load(); s < opened && !c.settled.CompareAndSwap(s, opened); s = c.settled.Load() {
			}
			return true
		case <-gone:
			return false
		}
	}
	return true
}

// UnsettledWait bounds an Unsettled connection's wait.
const UnsettledWait = time.Second

// Penalized reports whether peer is penalized now.
func (r *Peers) Penalized(peer netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.m[peer]
	return ok && r.now().Before(p.until)
}
