package rapidreset

import (
	"math"
	"net"
	"net/netip"
	"time"
)

// The nineteenth hostile pass sent request bodies of 64 KiB in DATA
// frames of one byte over TLS with no token: each request was refused
// 401 from its headers, and each frame after that, on a stream the
// server had closed, was read and answered with a RST_STREAM of its own
// (net/http's HTTP/2 server writes one per such frame): the daemon 14.75
// s of CPU in 10 s against the client's 2.24 s (6.6×), another
// identity's Route p50 2.6 → 35 ms. The pass after the first fix (which
// closed a connection past a count of DATA frames, and so closed honest
// clients that stream a body in small writes, or keep one gRPC
// reflection stream open) sent WINDOW_UPDATE, RST_STREAM, SETTINGS and
// PRIORITY frames by the thousand per TLS record: 20 to 45 times the
// client's CPU, every listener, with no token. A server spends about
// 1.5 µs on each frame whatever it carries; a client that packs them
// spends a few nanoseconds, and an honest client sends few such frames
// for the requests it makes and the answers it reads.
//
// So a connection's frames that carry no request or large body (H2Scan
// Cheap: control frames, and DATA frames under DataFrameBytes) are
// counted against its own budget: FrameBurst, FramesPerRequest more for
// each request the server handled and one more for each FrameCreditBytes
// it wrote (an honest client's DATA, END_STREAM, WINDOW_UPDATE and
// RST_STREAM frames), and FrameRate a second, up to FrameBurst. Past it,
// a connection takes what its peer has left of PeerFrameRate a second
// (after PeerFrameBurst), shared by the peer's connections and never
// lent, or its next read waits for its own rate: the client is slowed,
// never cut, and no connection waits behind another's frames. The
// second pass over this rule (500 a second per connection, waited a
// frame at a time) had 704 connections of one peer take 2 cores of the
// daemon's CPU and another identity's Route p50 to 73 ms: the reader now
// reads a TLS record at a time (the HTTP listeners' h2Conn), so a wait
// comes per record, not per frame, and the rate of a connection is 200;
// a connection whose client has gone is closed rather than read on
// (PeerGone). An honest connection stays within its own budget (its
// requests and answers pay for its frames).
//
// The pass after that kept each of 500 to 1,500 loopback connections
// just inside its own budget (FrameRate cheap frames a second, a TLS
// record a second): none was ever held, and the daemon spent 2.2 to 3
// times the client's CPU (0.3-0.6 of a core), since a connection's own
// rate was charged to no one. So what is past a connection's burst,
// credits and its peer's spare is paid at its own rate and also queued
// on its peer's share of its connections' own rates, PeerOwnRate a
// second (Conn.ReserveOwn), in the order it came: the connections of a
// peer that pay for nothing get that much a second across them however
// many they are, each waiting its turn (one whose turn is further than
// FrameWaitMax is closed), while each of its honest connections goes on
// paying its way with its requests and answers.
const (
	FrameBurst       = 256
	FramesPerRequest = 5
	FrameCreditBytes = 4 << 10
	FrameRate        = 200
	PeerFrameRate    = 2000
	PeerFrameBurst   = 4096
	// PeerOwnRate: the own rates (FrameRate) of a peer's connections
	// are paid out of this many cheap frames a second, after as many at
	// once: fifty connections on their whole rate together.
	PeerOwnRate = 10000
	// FrameWaitMax: a connection that has waited this long in all since
	// a request of it was last handled is closed (Exhausted). A client
	// that sent its flood and went sends no FIN until the flood is read
	// (its socket's buffer, megabytes, ahead of it): 512 such connections
	// went on costing a third of a core with no client left.
	FrameWaitMax = 30 * time.Second
)

// FrameBudget counts one connection's cheap frames against its own
// budget. Its reader alone calls Wait.
type FrameBudget struct {
	tokens   float64       // the burst and the credits left
	paid     time.Time     // what was past them is paid at FrameRate until then
	charged  int64         // cheap frames charged
	requests int64         // requests credited
	units    int64         // FrameCreditBytes written, credited
	waited   time.Duration // since a request was last credited
}

// Exhausted reports whether the connection has waited FrameWaitMax since
// a request of it was last handled: its reader closes it.
func (b *FrameBudget) Exhausted() bool { return b.waited >= FrameWaitMax }

// Wait charges the cheap frames read so far (cheap, a running count)
// and credits the requests handled and the bytes written so far
// (running counts too). What is past the connection's budget is taken
// from its peer's spare if it has that many left (c.TakeFrames), or paid
// in the order it came at the connection's own rate (FrameRate, after a
// burst of FrameBurst) and out of its peer's share of its connections'
// own rates (c.ReserveOwn): Wait returns how long the reader should wait
// for both (0: none). c may be nil (no peers counted): the connection's
// own rate alone.
func (b *FrameBudget) Wait(now time.Time, cheap, requests, written int64, c *Conn) time.Duration {
	if b.paid.IsZero() {
		b.tokens, b.paid = FrameBurst, now
	}
	if requests > b.requests {
		b.waited = 0
	}
	units := written / FrameCreditBytes
	b.tokens = min(b.tokens+float64(FramesPerRequest*(requests-b.requests)+units-b.units), FrameBurst)
	b.requests, b.units = requests, units
	b.tokens -= float64(cheap - b.charged)
	b.charged = cheap
	if b.tokens >= 0 {
		return 0
	}
	d := -b.tokens
	b.tokens = 0
	// The connection's own rate first, when it and its peer's share pay
	// for d at once; then the peer's spare, d frames rounded up; then
	// both, waited for. (The spare first, charged d+1, had a lone
	// connection streaming a body a frame at a time take twice as long:
	// each frame took two of the spare.)
	paid := later(b.paid, now).Add(frames(d, FrameRate))
	own := max(paid.Sub(now)-frames(FrameBurst, FrameRate), 0)
	if own == 0 {
		if _, ok := c.ReserveOwn(d, now, 0); ok {
			b.paid = paid
			return 0
		}
	}
	if c.TakeFrames(int64(math.Ceil(d)), now) {
		return 0
	}
	peer, ok := c.ReserveOwn(d, now, FrameWaitMax-b.waited)
	if !ok {
		b.waited = FrameWaitMax
		return FrameWaitMax
	}
	b.paid = paid
	wait := max(own, peer)
	b.waited += wait
	return wait
}

// frames is how long n frames take at rate a second.
func frames(n, rate float64) time.Duration { return time.Duration(n / rate * float64(time.Second)) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ReserveOwn queues n cheap frames of a connection's own rate on what
// its peer has of PeerOwnRate a second (after a second's worth at once),
// behind those its other connections queued, and returns how long until
// they are paid, unless that is longer than most (false: nothing
// queued). With no peers counted, or past maxPeers of them: 0, true.
func (c *Conn) ReserveOwn(n float64, now time.Time, most time.Duration) (time.Duration, bool) {
	if c == nil || c.Peers == nil {
		return 0, true
	}
	return c.Peers.reserveOwn(c.Peer, n, now, most)
}

func (r *Peers) reserveOwn(peer netip.Addr, n float64, now time.Time, most time.Duration) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.entryLocked(peer, now)
	if p == nil {
		return 0, true
	}
	paid := later(p.opaid, now).Add(frames(n, PeerOwnRate))
	wait := max(paid.Sub(now)-time.Second, 0)
	if wait > most {
		return 0, false
	}
	p.opaid = paid
	return wait, true
}

// TakeFrames takes n cheap frames from what the connection's peer has
// left of PeerFrameRate, if it has that many and the connection has a
// request under way (Begin), and reports whether it did (always false
// with no peers counted). The twenty-first hostile pass filled the
// local peer's share of its connections' own rates with a flood of
// control frames and no request, and an honest client of the same
// address streaming a body in 100-byte DATA frames waited behind it
// for 16-20 s and was cut: the spare is now for the connections whose
// frames serve a request, the body being read among them.
func (c *Conn) TakeFrames(n int64, now time.Time) bool {
	if c == nil || c.Peers == nil || c.active.Load() <= 0 {
		return false
	}
	return c.Peers.takeFrames(c.Peer, n, now)
}

func (r *Peers) takeFrames(peer netip.Addr, n int64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.entryLocked(peer, now)
	if p == nil {
		return false
	}
	if p.flast.IsZero() {
		p.ftokens, p.flast = PeerFrameBurst, now
	}
	if dt := now.Sub(p.flast); dt > 0 {
		p.ftokens = min(p.ftokens+dt.Seconds()*PeerFrameRate, PeerFrameBurst)
		p.flast = now
	}
	if p.ftokens < float64(n) {
		return false
	}
	p.ftokens -= float64(n)
	return true
}

// Hold charges the cheap frames a connection of c has read so far to
// its budget b, crediting its requests and the bytes written (running
// counts, as FrameBudget.Wait), and past the budget counts the read as
// held and waits. It reports false when the connection is to be closed
// instead: it has waited FrameWaitMax with no request handled
// (Exhausted), its client has gone (raw's TCP state: a connection
// waiting for its rate is not read on from what a departed client had
// sent), or gone was closed while it waited. c may be nil (no peers
// counted): the connection's own rate alone.
func (c *Conn) Hold(b *FrameBudget, raw net.Conn, gone <-chan struct{}, cheap, requests, written int64) bool {
	wait := b.Wait(time.Now(), cheap, requests, written, c)
	if wait <= 0 {
		return true
	}
	if c != nil && c.Peers != nil {
		c.Peers.throttled.Add(1)
	}
	return !b.Exhausted() && !peerGone(raw) && sleep(wait, gone) && !peerGone(raw)
}

// Throttled counts the reads held back by FrameBudget on every
// listener counting to r.
func (r *Peers) Throttled() int64 { return r.throttled.Load() }

// Requests is how many HTTP requests of the connection reached the
// server's handler (Serve), credited to its FrameBudget.
func (c *Conn) Requests() int64 { return c.requests.Load() }

// sleep waits d, or until done is closed (false).
func sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
