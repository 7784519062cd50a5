package rapidreset

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// The thirtieth hostile pass sent, with one token past its byte rate,
// gRPC calls of 48 KiB in DATA frames of 1 KiB over 64 TLS connections,
// one call in flight on each, never waiting: each call was refused
// RESOURCE_EXHAUSTED at its headers (a tap), and grpc-go read and
// deciphered the body all the same, dropping the frames of a stream it
// had refused (it counts them to the connection's window only). The
// daemon read 680 MB a second that no call would ever read, 1.2 cores,
// another identity's Route p50 1.7 → 4.6 ms; at 256 connections 13
// times its idle value. Admission's fair shares count calls; this work
// is done before any call.
//
// So a gRPC connection's DATA that no call of it reads is counted
// (Streams: the frames of a stream the taps refused or the transport
// did, of one the server has finished, or of no stream), and past
// PeerUnreadBurst its reads wait for its peer's PeerUnreadRate
// (Conn.UnreadWait), shared by the peer's connections, in the order they
// came: the client is slowed (TCP's flow control holds the rest), never
// cut, and what an honest client sends before it reads a refusal (a
// body, a window at most) fits the burst. A connection whose turn is
// further than FrameWaitMax is closed.
const (
	PeerUnreadRate  = 16 << 20
	PeerUnreadBurst = 16 << 20
)

// MaxOpenStreams bounds the streams a connection's Streams holds as
// open when it is given no bound (Streams.Max): past it a stream the
// server accepted is not added, and its DATA counts as unread. The
// daemon sets Max from --max-concurrent-streams: grpc-go refuses the
// streams past it before any tap.
const MaxOpenStreams = 1024

// Streams is the streams of one HTTP/2 connection the server accepted
// and whose client is still sending: the scanner of what the client
// sends (H2Scan.Streams) counts every DATA frame's bytes on any other
// stream as unread (H2Scan.Unread), and removes a stream once its client
// ends or resets it; the scanner of what the server writes
// (H2Writes.Streams) removes one the server ends (HEADERS with
// END_STREAM) or resets. The connection's reader decides on each stream
// once the server has (Decide), in the order they were opened. Safe for
// the reader and the writer at once.
type Streams struct {
	// Max bounds the streams open (0: MaxOpenStreams). Set before use.
	Max int

	mu sync.Mutex
	// open: each open stream's DATA bytes so far (Received).
	open map[uint32]int64
	// decided is the latest stream decided; endedNext, a stream after it
	// that the server ended before it was decided (grpc-go ends a stream
	// whose deadline passed after the taps let it in): not accepted then.
	// The reader hands grpc-go one stream's opening at a time, so only
	// one stream is ever undecided.
	decided, endedNext uint32
}

// Decide records the server's decision on stream id, the latest opened:
// accept adds it as open unless the server has ended it already or Max
// streams are. It reports whether id is open.
func (s *Streams) Decide(id uint32, accept bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decided = max(s.decided, id)
	if !accept || s.endedNext == id {
		return false
	}
	if s.open == nil {
		s.open = map[uint32]int64{}
	}
	most := s.Max
	if most <= 0 {
		most = MaxOpenStreams
	}
	if len(s.open) >= most {
		return false
	}
	s.open[id] = 0
	return true
}

// data counts n bytes of a DATA frame of stream id, the last of the
// stream if end, and reports whether the stream was open.
func (s *Streams) data(id uint32, n int64, end bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.open[id]
	if !ok {
		return false
	}
	if end {
		delete(s.open, id)
	} else {
		s.open[id] = got + n
	}
	return true
}

// Received is the DATA bytes open stream id has received (0 once it is
// no longer open).
func (s *Streams) Received(id uint32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[id]
}

// Open reports whether stream id is open.
func (s *Streams) Open(id uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.open[id]
	return ok
}

// Len is how many streams are open.
func (s *Streams) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// end removes stream id, ended by its client or (byServer) the server.
func (s *Streams) end(id uint32, byServer bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.open[id]; ok {
		delete(s.open, id)
		return
	}
	if byServer && id > s.decided {
		s.endedNext = id
	}
}

// UnreadWait queues n bytes of unread DATA of a connection of c on what
// its peer has of PeerUnreadRate a second (after PeerUnreadBurst at
// once), behind what its other connections queued, and returns how long
// until they are paid; false (nothing queued) if that is longer than
// FrameWaitMax: the reader closes the connection. With no peers counted,
// or past maxPeers of them: 0, true.
func (c *Conn) UnreadWait(n int64, now time.Time) (time.Duration, bool) {
	if c == nil || c.Peers == nil || n <= 0 {
		return 0, true
	}
	return c.Peers.unreadWait(c.Peer, n, now)
}

func (r *Peers) unreadWait(peer netip.Addr, n int64, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.entryLocked(peer, now)
	if p == nil {
		return 0, true
	}
	paid := later(p.upaid, now).Add(frames(float64(n), PeerUnreadRate))
	wait := max(paid.Sub(now)-frames(PeerUnreadBurst, PeerUnreadRate), 0)
	if wait > FrameWaitMax {
		return 0, false
	}
	p.upaid = paid
	if wait > 0 {
		r.unreadHeld.Add(1)
	}
	return wait, true
}

// UnreadHeld counts the reads of gRPC connections held back for their
// unread DATA (UnreadWait).
func (r *Peers) UnreadHeld() int64 { return r.unreadHeld.Load() }

// HoldUnread queues n bytes of unread DATA of a connection of c
// (UnreadWait) and waits its turn. It reports false when the connection
// is to be closed instead: its turn is further than FrameWaitMax, its
// client has gone (raw's TCP state), or gone was closed while it waited.
// c may be nil: nothing is held.
func (c *Conn) HoldUnread(raw net.Conn, gone <-chan struct{}, n int64) bool {
	wait, ok := c.UnreadWait(n, time.Now())
	if !ok {
		return false
	}
	return wait <= 0 || !peerGone(raw) && sleep(wait, gone) && !peerGone(raw)
}
