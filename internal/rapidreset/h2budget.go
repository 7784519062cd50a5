package rapidreset

import "time"

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
// Cheap: control frames, and DATA frames under DataFrameBytes) are held
// to FrameRate a second after FrameBurst, with FramesPerRequest more for
// each request the server handled and one more for each FrameCreditBytes
// it wrote (an honest client's DATA, END_STREAM, WINDOW_UPDATE and
// RST_STREAM frames); past that the connection's next read waits (the
// client is slowed, never cut: a client writing a body a piece at a
// time is one). At the rate, a connection costs the server under a
// millisecond of CPU a second; the connections of a peer are bounded
// (--max-conns-per-peer).
const (
	FrameRate        = 500
	FrameBurst       = 1024
	FramesPerRequest = 5
	FrameCreditBytes = 4 << 10
)

// FrameBudget holds one connection's cheap frames to their rate. Its
// reader alone calls Wait.
type FrameBudget struct {
	tokens   float64
	last     time.Time
	charged  int64 // cheap frames charged
	requests int64 // requests credited
	units    int64 // FrameCreditBytes written, credited
	started  bool
}

// Wait charges the cheap frames read so far (cheap, a running count),
// credits the requests handled and the bytes written so far (running
// counts too), and returns how long the reader should wait before
// handing on what it read (0: none).
func (b *FrameBudget) Wait(now time.Time, cheap, requests, written int64) time.Duration {
	if !b.started {
		b.started, b.tokens, b.last = true, FrameBurst, now
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens += dt.Seconds() * FrameRate
		b.last = now
	}
	units := written / FrameCreditBytes
	b.tokens += float64(FramesPerRequest*(requests-b.requests) + units - b.units)
	b.requests, b.units = requests, units
	b.tokens = min(b.tokens, FrameBurst)
	b.tokens -= float64(cheap - b.charged)
	b.charged = cheap
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / FrameRate * float64(time.Second))
}

// Throttled counts the reads held back by FrameBudget on every
// listener counting to r.
func (r *Peers) Throttled() int64 { return r.throttled.Load() }

// Throttle counts a read of c held back (FrameBudget).
func (c *Conn) Throttle() {
	if c != nil && c.Peers != nil {
		c.Peers.throttled.Add(1)
	}
}

// Requests is how many HTTP requests of the connection reached the
// server's handler (Serve), credited to its FrameBudget.
func (c *Conn) Requests() int64 { return c.requests.Load() }

// Sleep waits d, or until done is closed (false).
func Sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
