package server

import (
	"io"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// Streams grpc-go refuses in its transport, before any tap or stats
// handler (a malformed grpc-timeout, a content-type that is not gRPC, a
// method that is not POST, no :authority, past MaxConcurrentStreams), were
// seen by no hook of ours: the fourteenth hostile pass opened 38,000-50,000
// such streams a second on four connections with no token, never closed,
// the daemon spending 0.54 core on them and another identity's Route p99
// going from 7 to 70 ms. The early-reset rule now counts them: a
// connection's bytes are read through a scanner of HTTP/2 frame headers
// (after TLS), which counts the header blocks opening a stream; each one
// the taps never saw is an early reset. A read hands on BlocksPerRead of
// them at most. grpc-go reads a connection again
// only once it has handled every frame of what it read before, so at the
// start of each read every block counted until then was either tapped or
// refused.

// BlocksPerRead bounds the streams a connection's client opens that one
// read hands to grpc-go: it handles every frame of a read before it reads
// again, and a read of 32 KiB holds 1,600 header blocks of 20 bytes (HPACK
// indexes repeated fields), every one handled before the count below
// could close the connection; the rest waits in the connection's own
// buffer for the next read, which settles first. One, so that at each
// read the taps have decided on every stream opened before it, and the
// DATA that follows is known to be a call's or read by none
// (settleAccepted): a read is a copy from that buffer, and a stream
// costs grpc-go a hundred times more.
const BlocksPerRead = 1

// frameGate hands a connection's bytes to grpc-go at most BlocksPerRead
// opening blocks at a time, counting them (rapidreset.H2Scan).
type frameGate struct {
	blocks  rapidreset.H2Scan
	pending []byte // read, not handed on yet
	perr    error  // the error of the read that filled pending
}

// read fills p from pending, or from r, up to the end of the
// BlocksPerRead-th block opening a stream.
func (g *frameGate) read(r io.Reader, p []byte) (int, error) {
	if len(g.pending) == 0 && g.perr == nil {
		n, err := r.Read(p)
		k := g.blocks.Feed(p[:n], BlocksPerRead)
		if k < n {
			g.pending, g.perr = append(g.pending[:0], p[k:n]...), err
			return k, nil
		}
		return n, err
	}
	// Scanned first, so that only what is handed on is copied: copying
	// the whole of pending each read, a read hands on one block of,
	// copied a buffer of small calls over and over (26 times its size).
	k := g.blocks.Feed(g.pending[:min(len(p), len(g.pending))], BlocksPerRead)
	copy(p, g.pending[:k])
	g.pending = g.pending[k:]
	if len(g.pending) > 0 {
		return k, nil
	}
	g.pending = nil
	err := g.perr
	g.perr = nil
	return k, err
}

// settleUntapped counts as early resets the streams c's client opened
// that no tap saw (refused by grpc-go's transport), and closes c when the
// rule says so. It runs at the start of each read, when grpc-go has
// handled every block read before.
func (c *recvConn) settleUntapped() {
	n := c.gate.blocks.Blocks() - c.tapped.Load() - c.untapped
	if n <= 0 || c.resets == nil {
		return
	}
	c.untapped += n
	for range n {
		if c.resets.Ended(true) {
			c.g.resetCloses.Add(1)
			c.closeCaught()
			return
		}
	}
}

// readCounted is c's read of its plaintext connection (or, through TLS,
// of what frameConn deciphers): settled, gated, and held to the cheap
// frames' rate.
func (c *recvConn) readCounted(r io.Reader, p []byte) (int, error) {
	c.settleUntapped()
	if c.caught.Load() {
		return 0, net.ErrClosed
	}
	c.settleAccepted()
	n, err := c.gate.read(r, p)
	// Control frames or small DATA frames past their rate
	// (rapidreset.FrameBudget): what was read waits, unless the client
	// has gone.
	if !c.resets.Hold(&c.budget, c.Conn, c.gone, c.gate.blocks.Cheap(), c.tapped.Load(), c.wrote.Load()) {
		_ = c.Close()
		return 0, net.ErrClosed
	}
	// DATA no call reads, past its peer's burst: what was read waits
	// its turn in the peer's rate (unread.go).
	if u := c.gate.blocks.Unread() - c.unreadPaid; u > 0 {
		c.unreadPaid += u
		c.g.unreadBytes.Add(u)
		if !c.resets.HoldUnread(c.Conn, c.gone, u) {
			_ = c.Close()
			return 0, net.ErrClosed
		}
	}
	c.chargeStreamed()
	return n, err
}

// settleAccepted accepts the stream of the block the last read handed
// on (one at most, BlocksPerRead) if the taps let it in and it has a
// body to come: grpc-go handled the block before this read, and its
// DATA comes after it, so no frame of it was scanned yet.
func (c *recvConn) settleAccepted() {
	b := c.gate.blocks.Blocks()
	if b == c.decided {
		return
	}
	c.decided = b
	tapped, refused := c.tapped.Load(), c.refusedTaps.Load()
	accepted := tapped > c.seenTapped && refused == c.seenRefused
	c.seenTapped, c.seenRefused = tapped, refused
	id, ends := c.gate.blocks.Last()
	call := c.lastTapped
	c.lastTapped = nil
	if c.streams.Decide(id, accepted && !ends) && call != nil {
		call.stream.Store(id)
	}
}

// FrameCounting is creds, whose connections' deciphered bytes are
// scanned for the streams their clients open (settleUntapped).
func FrameCounting(creds credentials.TransportCredentials) credentials.TransportCredentials {
	return frameCreds{creds}
}

type frameCreds struct {
	credentials.TransportCredentials
}

func (f frameCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	rc, ok := raw.(*recvConn)
	if ok {
		rc.viaTLS.Store(true)
	}
	conn, info, err := f.TransportCredentials.ServerHandshake(raw)
	if err != nil || !ok {
		return conn, info, err
	}
	return &frameConn{Conn: conn, rc: rc}, info, nil
}

func (f frameCreds) Clone() credentials.TransportCredentials {
	return frameCreds{f.TransportCredentials.Clone()}
}

// frameConn is a TLS connection of a counted connection: what it
// deciphers is scanned and gated.
type frameConn struct {
	net.Conn
	rc *recvConn
}

func (c *frameConn) Read(p []byte) (int, error) { return c.rc.readCounted(c.Conn, p) }

// Write scans what the server writes before it is sent: the client may
// answer what it reads before the writer's scan would have ended the
// stream.
func (c *frameConn) Write(p []byte) (int, error) {
	c.rc.scanWrites(p)
	return c.Conn.Write(p)
}

// NetConn is the TLS connection, as tls.Conn's NetConn is the raw one.
func (c *frameConn) NetConn() net.Conn { return c.Conn }
