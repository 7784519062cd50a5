package rapidreset

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"time"
)

// A penalized peer's new connections past its PenalizedConnsPerSecond are
// held back, unread, in a queue per peer and handed to the server in
// their order as the peer's places come (a tarpit), rather than closed at
// accept: closed, every other client behind the address (on loopback,
// every local agent) was kept out for as long as the resets went on (the
// thirteenth hostile pass: bob's new connections 30 of 30 UNAVAILABLE),
// and the resetting client connected again at once, 3,600-7,100 times a
// second. Held, a client that waits for its connection (as a reset loop
// does, and as grpc-go does) waits its turn: the resetter gets its places
// a second, and another client behind the address gets in after the
// connections queued before its own. A queue holds PenalizedConnsQueued
// connections; past it, or after PenalizedConnWait in it, a connection is
// closed (Refused: classifierd_grpc_penalized_connections_refused_total).
// A held connection whose client has closed or reset it (a reset loop
// writes and closes without waiting) is dropped from the queue, so that
// it takes neither a place in the queue nor one of its peer's.
//
// The local peer (every loopback address and the Unix socket) is held
// at most LocalMaxHold, then served, and never refused: every local
// agent is that one peer, and held like a remote peer any local process,
// with no token, kept the others' new connections waiting their turn
// behind its own, 2 a second (the fourteenth hostile pass: 4 reset loops
// took 0.08 s of CPU and a client opening a connection per call waited
// 2.4 s p50; 40 empty connections a second and 80 idle ones had half of
// its calls fail). Not held at all, a reset loop reconnected at will and
// cost the daemon twice its own CPU, a core for as long as it ran (the
// fifteenth): a short hold slows each of its loops to a few connections
// a second and delays another local agent's new connection by a fraction
// of a second at most.
const (
	PenalizedConnsQueued = 64
	PenalizedConnWait    = 10 * time.Second
	LocalMaxHold         = 200 * time.Millisecond
	tarpitTick           = 50 * time.Millisecond
)

type accepted struct {
	c   net.Conn
	err error
}

// Listener wraps lis (before any TLS: a held connection costs no
// handshake) so that it holds back the new connections of penalized
// peers, and hands each connection it serves through wrap with its
// count (nil: a connection that counts its end, found by ConnOf). The
// connection wrap returns must call the count's Closed when it closes.
func (r *Peers) Listener(lis net.Listener, wrap func(net.Conn, *Conn) net.Conn) net.Listener {
	if wrap == nil {
		wrap = func(c net.Conn, n *Conn) net.Conn { return &countedConn{Conn: c, n: n} }
	}
	return &tarpit{Listener: lis, peers: r, wrap: wrap, out: make(chan accepted), done: make(chan struct{})}
}

// tarpit is Listener's: one goroutine accepts (acceptLoop), another
// releases the held connections (releaseLoop), both from the first
// Accept; Accept returns what they hand over.
type tarpit struct {
	net.Listener
	peers *Peers
	wrap  func(net.Conn, *Conn) net.Conn
	start sync.Once
	out   chan accepted
	done  chan struct{}
	close sync.Once

	mu     sync.Mutex
	queues map[netip.Addr]*list.List // of *heldConn, oldest first
	held   int
}

type heldConn struct {
	c     net.Conn
	since time.Time
}

func (l *tarpit) Accept() (net.Conn, error) {
	l.start.Do(func() {
		l.queues = map[netip.Addr]*list.List{}
		go l.acceptLoop()
		go l.releaseLoop()
	})
	select {
	case a := <-l.out:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tarpit) Close() error {
	err := l.Listener.Close()
	l.close.Do(func() {
		close(l.done)
		l.mu.Lock()
		defer l.mu.Unlock()
		for peer, q := range l.queues {
			for e := q.Front(); e != nil; e = e.Next() {
				_ = e.Value.(*heldConn).c.Close()
			}
			delete(l.queues, peer)
		}
		l.held = 0
	})
	return err
}

// hand gives a to Accept, or reports false once the listener is closed.
func (l *tarpit) hand(a accepted) bool {
	select {
	case l.out <- a:
		return true
	case <-l.done:
		if a.c != nil {
			_ = a.c.Close()
		}
		return false
	}
}

func (l *tarpit) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !l.hand(accepted{nil, err}) {
				return
			}
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				continue // the server waits and accepts again
			}
			return
		}
		peer := PeerOf(c.RemoteAddr())
		// Served now when the peer has a place, or when hold does not
		// keep it (a local connection past a full queue).
		if l.peers.Admit(peer) && !l.queued(peer) || !l.hold(peer, c) {
			if !l.hand(l.served(c, peer)) {
				return
			}
		}
	}
}

// served is c, of peer, as handed to the server: wrapped with its count.
func (l *tarpit) served(c net.Conn, peer netip.Addr) accepted {
	return accepted{l.wrap(c, NewConn(l.peers, peer)), nil}
}

// queued reports whether peer has connections held (a new one waits
// behind them). The place admit took is then given back.
func (l *tarpit) queued(peer netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[peer]; q != nil && q.Len() > 0 {
		l.peers.GiveBack(peer)
		return true
	}
	return false
}

// hold queues c, of a penalized peer, or closes it when the peer's queue
// is full; a local connection is served instead (hold reports false).
func (l *tarpit) hold(peer netip.Addr, c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[peer]
	if q == nil {
		q = list.New()
		l.queues[peer] = q
	}
	if q.Len() >= PenalizedConnsQueued {
		l.dropGoneLocked(q)
	}
	if q.Len() >= PenalizedConnsQueued {
		if peer == Local {
			return false
		}
		l.peers.refused.Add(1)
		_ = c.Close()
		return true
	}
	q.PushBack(&heldConn{c: c, since: time.Now()})
	l.held++
	l.peers.held.Add(1)
	return true
}

// releaseLoop hands the held connections to the server as their peers' places
// come, oldest first, and closes those held PenalizedConnWait.
func (l *tarpit) releaseLoop() {
	t := time.NewTicker(tarpitTick)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		for _, a := range l.release(time.Now()) {
			if !l.hand(a) {
				return
			}
		}
	}
}

// release takes off the queues the connections whose peers have a place
// (wrapped, to hand to the server), and closes the ones held too long.
func (l *tarpit) release(now time.Time) []accepted {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []accepted
	for peer, q := range l.queues {
		l.dropGoneLocked(q)
		for e := q.Front(); e != nil; e = q.Front() {
			h := e.Value.(*heldConn)
			if peer == Local && now.Sub(h.since) >= LocalMaxHold {
				out = append(out, l.served(h.c, peer))
			} else if now.Sub(h.since) >= PenalizedConnWait {
				l.peers.refused.Add(1)
				_ = h.c.Close()
			} else if l.peers.Admit(peer) {
				out = append(out, l.served(h.c, peer))
			} else {
				break
			}
			q.Remove(e)
			l.held--
		}
		if q.Len() == 0 {
			delete(l.queues, peer)
		}
	}
	return out
}

// dropGoneLocked closes and takes off q the connections whose clients
// have given up (peerGone): a reset loop writes its resets and closes
// without waiting for the server, and its dead connections filled the
// queue ahead of a live client's.
func (l *tarpit) dropGoneLocked(q *list.List) {
	for e := q.Front(); e != nil; {
		next := e.Next()
		if h := e.Value.(*heldConn); peerGone(h.c) {
			_ = h.c.Close()
			q.Remove(e)
			l.held--
		}
		e = next
	}
}

// countedConn is a served connection counting its end (Conn.Closed).
type countedConn struct {
	net.Conn
	n *Conn
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.n.wire.Add(int64(n))
		c.n.lastRead.Store(c.n.io.Add(1))
	}
	return n, err
}

// Write numbers itself before it writes, Read after it has read: the
// client may answer what is written before Write returns, and its
// answer must not be numbered before the write it follows (Pipelined).
func (c *countedConn) Write(p []byte) (int, error) {
	if len(p) > 0 {
		c.n.lastWrite.Store(c.n.io.Add(1))
	}
	return c.Conn.Write(p)
}

func (c *countedConn) Close() error {
	c.n.Closed()
	return c.Conn.Close()
}

// NetConn is the connection underneath.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// ConnOf is the count of c, a connection of Listener (through any
// wrappers with a NetConn method, as *tls.Conn has), or nil.
func ConnOf(c net.Conn) *Conn {
	for c != nil {
		if cc, ok := c.(*countedConn); ok {
			return cc.n
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}
