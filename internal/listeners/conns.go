package listeners

import (
	"container/list"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/classifierd/classifierd/internal/peerkey"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxConnsPerPeer is --max-conns-per-peer's default: the most
// connections one peer (an IPv4 address, an IPv6 /64) may hold open on
// all of a process's listeners together. No client we ship or know needs
// more than a handful: a gRPC channel (Go, Python, Node) is one
// connection, the load test's 2,000 clients (short2000) and 400
// (retry400) share 8, a browser opens at most 6 per host. An HTTP/1.1
// client with a pool opens one per request in flight, and the daemon
// admits at most 2 x --concurrency model calls and lets --max-waiting
// (1,024) wait: a peer with more than about 1,024 requests in flight is
// refused calls anyway. So 1,024 leaves a hub, or a NAT or pod address
// many clients share, as many connections as the daemon could serve
// them, while one peer that opens 2,000 connections a second (the fourth
// hostile pass: 20,500 at a time, every descriptor of the daemon) holds
// at most 1,024 of them.
const DefaultMaxConnsPerPeer = 1024

// Headroom of the descriptor limit kept for the process's own files when
// the total cap is derived from RLIMIT_NOFILE: SQLite (the database, its
// -wal, -shm and journal), the model and index files, logs, Redis and
// MCP client connections, a per-identity backend's pipes (the proxy's
// --max-backends 64 stdio processes take 3 each), epoll and the runtime's
// pipes. An eighth of the limit, and at least 256.
const (
	minConnHeadroom   = 256
	connHeadroomShare = 8
)

// DefaultMaxConns is the total cap derived from the process's
// RLIMIT_NOFILE (Go raises the soft limit to the hard one at start): the
// limit less an eighth of it, at least 256, kept for the process's own
// files, so that connections can never take the descriptors SQLite or
// the log need, whatever number of peers open them. A limit too small to
// leave room gives 16.
func DefaultMaxConns() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1 << 16 // cannot happen on Linux; a cap that still bounds memory
	}
	return maxConnsFor(rl.Cur)
}

// maxConnsFor is DefaultMaxConns for a descriptor limit of nofile.
func maxConnsFor(nofile uint64) int {
	if nofile > math.MaxInt32 { // RLIM_INFINITY
		nofile = math.MaxInt32
	}
	n := int(nofile)
	return max(n-max(minConnHeadroom, n/connHeadroomShare), 16)
}

// ConnLimits are the caps of a Limiter.
type ConnLimits struct {
	// PerPeer is the most connections one peer may hold open on all the
	// listeners together (--max-conns-per-peer); 0: no per-peer cap.
	PerPeer int
	// Total is the most connections open on all the listeners together
	// (--max-conns); 0: DefaultMaxConns.
	Total int
	// EvictUnauthenticated, set when the process requires authentication
	// (a token file or client certificates), lets a new connection at
	// either cap take the place of the oldest open connection that has
	// carried no authenticated request yet (Limiter.Authenticated), of the
	// peer at the per-peer cap, of any peer at the total: a connection
	// that never authenticates cannot hold a place against one that does.
	EvictUnauthenticated bool
}

// Limiter counts the connections open on a process's listeners, by peer
// and in all, and has each listener it wraps (Wrap) close at once a
// connection past either cap. One Limiter serves every listener of a
// process, so a peer cannot multiply its share by the number of
// listeners, and the total bounds the descriptors they all take.
//
// A peer is the remote IP address: an IPv4 address (an IPv4-mapped IPv6
// address counts as its IPv4 address), or an IPv6 address's /64. A host
// is given a /64 (SLAAC, a provider's delegation), so keying by the whole
// address would let one host take a fresh peer's share with each of its
// 2^64 addresses; a /64 is the unit an IPv6 host can be held to, as an
// IPv4 NAT address is. Loopback (::1) and link-local addresses are keyed
// whole: every link-local peer shares fe80::/64.
//
// Connections to a Unix socket (--listen unix://) are counted in the
// total but have no per-peer cap: every local client has the same empty
// address, and the socket is 0600, so only the daemon's own user can
// connect, who can already signal or ptrace the daemon.
//
// On loopback every local client is one peer, 127.0.0.1: a local process
// that holds the per-peer cap keeps other local clients from opening new
// connections (those open go on working) until its own close. Give local
// clients their own source addresses (127.0.0.2, ...) or a Unix socket
// if that matters.
//
// With EvictUnauthenticated, a connection from a peer (TCP) is evictable
// from its accept until its first authenticated request: at a cap, before
// refusing a new connection, the Limiter closes the oldest evictable one
// (the peer's at the per-peer cap, anyone's at the total) and admits the
// new one. Connections to a Unix socket are never evicted.
type Limiter struct {
	perPeer, total int
	evict          bool
	log            *slog.Logger

	mu    sync.Mutex
	peers map[netip.Addr]int
	open  int
	// With evict: the evictable connections oldest first, of all and by
	// peer, and every open connection of a peer by its addresses.
	unauth     list.List
	peerUnauth map[netip.Addr]*list.List
	byAddr     map[connAddrs]*limitedConn

	refused *prometheus.CounterVec
	evicted *prometheus.CounterVec
	gauge   *prometheus.GaugeVec

	logMu   sync.Mutex
	lastLog map[string]time.Time
	quiet   map[string]int // refusals not logged since lastLog, by reason
}

// Reasons a connection is refused, as classifierd_connections_refused_total
// labels them.
const (
	RefusedPerPeer = "per_peer" // the peer holds --max-conns-per-peer
	RefusedTotal   = "total"    // the listeners hold --max-conns
)

// Reasons a connection is evicted, as classifierd_connections_evicted_total
// labels them: the cap a new connection found full.
const (
	EvictedPerPeer = "per_peer"
	EvictedTotal   = "total"
)

// connAddrs names an open connection: its local and remote addresses.
type connAddrs struct{ local, remote string }

// refusalLogEvery is how often at most a refusal is logged, per reason:
// a flood of 2,000 connections a second would write 2,000 lines.
const refusalLogEvery = 10 * time.Second

// NewLimiter returns a Limiter with lim's caps whose metrics are
// registered on reg (nil: none): classifierd_connections_open{listener}
// and classifierd_connections_refused_total{listener,reason}.
func NewLimiter(lim ConnLimits, reg prometheus.Registerer, log *slog.Logger) (*Limiter, error) {
	if lim.PerPeer < 0 || lim.Total < 0 {
		return nil, errors.New("listeners: connection caps must not be negative")
	}
	if lim.Total == 0 {
		lim.Total = DefaultMaxConns()
	}
	l := &Limiter{perPeer: lim.PerPeer, total: lim.Total, evict: lim.EvictUnauthenticated, log: log, peers: map[netip.Addr]int{},
		peerUnauth: map[netip.Addr]*list.List{}, byAddr: map[connAddrs]*limitedConn{},
		lastLog: map[string]time.Time{}, quiet: map[string]int{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_connections_refused_total",
			Help: "Connections closed as soon as accepted, by listener and reason: per_peer (the peer held --max-conns-per-peer), total (the listeners held --max-conns)."},
			[]string{"listener", "reason"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "classifierd_connections_evicted_total",
			Help: "Connections that had carried no authenticated request, closed to admit a new connection at a cap (authentication required), by the evicted one's listener and the cap: per_peer (--max-conns-per-peer), total (--max-conns)."},
			[]string{"listener", "reason"}),
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "classifierd_connections_open",
			Help: "Connections open, by listener."}, []string{"listener"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{l.refused, l.evicted, l.gauge} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// Limits are the caps in force (Total resolved).
func (l *Limiter) Limits() ConnLimits {
	return ConnLimits{PerPeer: l.perPeer, Total: l.total, EvictUnauthenticated: l.evict}
}

// Count is the number of connections open on the listeners, and of them
// the peer's of addr ("" for none).
func (l *Limiter) Count(addr string) (total, peer int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a, err := netip.ParseAddr(addr); err == nil {
		peer = l.peers[peerkey.Of(a)]
	}
	return l.open, peer
}

// admit counts c, a connection of key (keyed: it has one), as open, or
// says why it is refused. With evict, a keyed connection at a cap takes
// the place of the oldest evictable one, the peer's at the per-peer cap
// first (which frees a place in the total too), anyone's at the total; the
// victims it returns are released here, under the lock, and are the
// caller's to close.
func (l *Limiter) admit(c *limitedConn, key netip.Addr, keyed bool) (reason string, victims []*limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	atPeer := keyed && l.perPeer > 0 && l.peers[key] >= l.perPeer
	if !l.evict || !keyed {
		if l.open >= l.total {
			return RefusedTotal, nil
		}
		if atPeer {
			return RefusedPerPeer, nil
		}
	} else {
		if atPeer {
			v := l.evictOldest(l.peerUnauth[key], EvictedPerPeer)
			if v == nil {
				if l.open >= l.total {
					return RefusedTotal, nil
				}
				return RefusedPerPeer, nil
			}
			victims = append(victims, v)
		}
		if l.open >= l.total {
			v := l.evictOldest(&l.unauth, EvictedTotal)
			if v == nil {
				return RefusedTotal, victims // a victim of the peer's is gone all the same
			}
			victims = append(victims, v)
		}
	}
	if keyed && l.perPeer > 0 {
		l.peers[key]++
	}
	l.open++
	if l.evict && keyed {
		l.byAddr[c.addrs] = c
		c.all = l.unauth.PushBack(c)
		pl := l.peerUnauth[key]
		if pl == nil {
			pl = list.New()
			l.peerUnauth[key] = pl
		}
		c.peer = pl.PushBack(c)
	}
	return "", victims
}

// evictOldest takes the place of the oldest connection of evictable (nil:
// none) whose own Close has not yet taken it, releases it (l.mu held) and
// returns it, or nil when there is none.
func (l *Limiter) evictOldest(evictable *list.List, reason string) *limitedConn {
	if evictable == nil {
		return nil
	}
	for e := evictable.Front(); e != nil; e = e.Next() {
		v := e.Value.(*limitedConn)
		if !v.released.CompareAndSwap(false, true) {
			continue // closing: its Close releases it
		}
		l.releaseLocked(v)
		v.gauge.Dec()
		l.evicted.WithLabelValues(v.listener, reason).Inc()
		return v
	}
	return nil
}

// release counts c closed.
func (l *Limiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

func (l *Limiter) releaseLocked(c *limitedConn) {
	l.open--
	if c.keyed && l.perPeer > 0 {
		if l.peers[c.key]--; l.peers[c.key] <= 0 {
			delete(l.peers, c.key)
		}
	}
	if !l.evict || !c.keyed {
		return
	}
	l.forgetLocked(c)
	if l.byAddr[c.addrs] == c {
		delete(l.byAddr, c.addrs)
	}
}

// forgetLocked takes c off the evictable lists.
func (l *Limiter) forgetLocked(c *limitedConn) {
	if c.all != nil {
		l.unauth.Remove(c.all)
		c.all = nil
	}
	if c.peer != nil {
		pl := l.peerUnauth[c.key]
		pl.Remove(c.peer)
		c.peer = nil
		if pl.Len() == 0 {
			delete(l.peerUnauth, c.key)
		}
	}
}

// Authenticated marks the open connection whose local and remote
// addresses are local and remote (as net.Addr.String spells them) as
// having carried an authenticated request: it is never evicted. Callers
// call it for each request authenticated by a token or a client
// certificate (not an anonymous one); an unknown connection (one not
// accepted by a listener of l, or closed) is ignored. Without
// EvictUnauthenticated it does nothing.
func (l *Limiter) Authenticated(local, remote string) {
	if l == nil || !l.evict {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.byAddr[connAddrs{local, remote}]; c != nil {
		l.forgetLocked(c)
	}
}

// logRefused writes at most one line per reason every refusalLogEvery,
// with the number refused since the last one. The peer is an address,
// never a token or anything the peer sent.
func (l *Limiter) logRefused(listener, reason string, peer netip.Addr) {
	if l.log == nil {
		return
	}
	l.logMu.Lock()
	now := time.Now()
	if now.Sub(l.lastLog[reason]) < refusalLogEvery {
		l.quiet[reason]++
		l.logMu.Unlock()
		return
	}
	n := l.quiet[reason] + 1
	l.lastLog[reason], l.quiet[reason] = now, 0
	l.logMu.Unlock()
	flag, limit := "--max-conns-per-peer", l.perPeer
	if reason == RefusedTotal {
		flag, limit = "--max-conns", l.total
	}
	l.log.Warn("connections refused: closed as soon as accepted", "listener", listener, "reason", reason,
		"limit", limit, "flag", flag, "peer", peer.String(), "refused_since_last_line", n)
}

// Wrap returns lis counting its connections under l, named name in the
// metrics ("grpc", "http", "mcp", "metrics"); a nil l returns lis.
//
// Accept closes a connection past a cap as soon as it is accepted,
// before TLS or a byte is read (with SO_LINGER 0, so its client gets a
// reset at once and no TIME_WAIT is left), and accepts the next: the
// kernel's backlog keeps draining and a refused client learns at once.
// A connection it returns gives its place back on its first Close.
// Accept errors of a process out of descriptors or memory (EMFILE,
// ENFILE, ENOBUFS, ENOMEM) are waited out, 5 ms doubling to 1 s as
// net/http and grpc-go do, rather than retried at once in a loop.
func (l *Limiter) Wrap(name string, lis net.Listener) net.Listener {
	if l == nil {
		return lis
	}
	return &limitedListener{Listener: lis, l: l, name: name, gauge: l.gauge.WithLabelValues(name), closed: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	l         *Limiter
	name      string
	gauge     prometheus.Gauge
	closed    chan struct{}
	closeOnce sync.Once
}

// maxAcceptDelay is the longest wait after a failed accept.
const maxAcceptDelay = time.Second

func (ll *limitedListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			if !outOfResources(err) {
				return nil, err
			}
			delay = min(max(2*delay, 5*time.Millisecond), maxAcceptDelay)
			if ll.l.log != nil {
				ll.l.logAcceptError(ll.name, err, delay)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ll.closed:
				t.Stop()
			}
			continue // a closed listener's Accept returns its error
		}
		delay = 0
		key, keyed := peerkey.Remote(c.RemoteAddr())
		lc := &limitedConn{Conn: c, l: ll.l, key: key, keyed: keyed, listener: ll.name, gauge: ll.gauge}
		if ll.l.evict && keyed {
			lc.addrs = connAddrs{c.LocalAddr().String(), c.RemoteAddr().String()}
		}
		reason, victims := ll.l.admit(lc, key, keyed)
		for _, v := range victims {
			refuse(v.Conn) // released by admit; the server's own Close only closes it again
		}
		if reason != "" {
			// Counted before the close, so that whoever sees the reset
			// sees the count.
			ll.l.refused.WithLabelValues(ll.name, reason).Inc()
			ll.l.logRefused(ll.name, reason, key)
			refuse(c)
			continue
		}
		ll.gauge.Inc()
		return lc, nil
	}
}

func (ll *limitedListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.closed) })
	return ll.Listener.Close()
}

// logAcceptError logs a failed accept at most every refusalLogEvery.
func (l *Limiter) logAcceptError(listener string, err error, delay time.Duration) {
	l.logMu.Lock()
	now := time.Now()
	if now.Sub(l.lastLog["accept"]) < refusalLogEvery {
		l.quiet["accept"]++
		l.logMu.Unlock()
		return
	}
	n := l.quiet["accept"] + 1
	l.lastLog["accept"], l.quiet["accept"] = now, 0
	l.logMu.Unlock()
	l.log.Warn("accept failed; retrying", "listener", listener, "err", err, "retry_in", delay, "failures_since_last_line", n)
}

// outOfResources reports whether an accept failed for want of
// descriptors or memory, which a wait may cure.
func outOfResources(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// refuse closes c at once, with a reset for TCP.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// limitedConn gives its place back on its first Close, or when the
// Limiter evicts it, whichever takes released first.
type limitedConn struct {
	net.Conn
	released atomic.Bool
	l        *Limiter
	key      netip.Addr
	keyed    bool
	listener string
	gauge    prometheus.Gauge
	// With the Limiter's evict, under its lock: the connection's
	// addresses, and its elements in the evictable lists (nil: not
	// evictable, or no longer).
	addrs     connAddrs
	all, peer *list.Element
}

func (c *limitedConn) Close() error {
	if c.released.CompareAndSwap(false, true) {
		c.l.release(c)
		c.gauge.Dec()
	}
	return c.Conn.Close()
}

// NetConn is the connection c wraps (as tls.Conn.NetConn).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection when it can (net/http does so
// before closing an HTTP/1 connection it answered with an error).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil // the caller closes next
}

// GRPCUserTimeout is the TCP_USER_TIMEOUT of a gRPC connection: grpc-go
// sets its keepalive timeout (20 s) on the plain TCP connections it is
// given, and a wrapped connection is not one, so WithUserTimeout sets it
// before the wrapping.
const GRPCUserTimeout = 20 * time.Second

// WithUserTimeout sets TCP_USER_TIMEOUT d on each TCP connection lis
// accepts, so a peer that vanished without a reset is dropped after d
// of unacknowledged data rather than the kernel's ~15 minutes.
func WithUserTimeout(lis net.Listener, d time.Duration) net.Listener {
	return userTimeoutListener{Listener: lis, d: d}
}

type userTimeoutListener struct {
	net.Listener
	d time.Duration
}

func (l userTimeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		setUserTimeout(c, l.d)
	}
	return c, err
}
