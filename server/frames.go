package server

import (
	"io"
	"net"

	"google.golang.org/grpc/credentials"
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

// clientPreface opens every HTTP/2 connection.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the scanner reads.
const (
	frameHeaders      = 0x1
	frameContinuation = 0x9
	flagEndHeaders    = 0x4
)

// h2Blocks counts the header blocks that open a client stream in an
// HTTP/2 connection's bytes, fed as they are read. It keeps nine bytes of
// state whatever the frames: payloads are skipped, never held.
type h2Blocks struct {
	preface int     // bytes of the client preface matched
	hdr     [9]byte // a frame header being gathered
	hn      int     // its bytes so far
	skip    int     // payload bytes of the current frame still to come
	ends    bool    // the current frame ends a block opening a stream
	opening bool    // a block opening a stream awaits its END_HEADERS
	last    uint32  // the highest stream id opened
	blocks  int64   // blocks opening a stream, complete
	off     bool    // not HTTP/2: nothing is counted
}

// feed scans p, or its start: it stops after the frame completing the
// limit-th block (when limit > 0), and returns how many bytes it scanned.
func (h *h2Blocks) feed(p []byte, limit int64) int {
	total, stop := len(p), h.blocks+limit
	for len(p) > 0 && !h.off && (limit <= 0 || h.blocks < stop) {
		switch {
		case h.preface < len(clientPreface):
			n := min(len(p), len(clientPreface)-h.preface)
			if string(p[:n]) != clientPreface[h.preface:h.preface+n] {
				h.off = true
				break
			}
			h.preface += n
			p = p[n:]
		case h.hn < len(h.hdr):
			n := copy(h.hdr[h.hn:], p)
			h.hn += n
			p = p[n:]
			if h.hn == len(h.hdr) {
				h.frame()
			}
		default:
			n := min(len(p), h.skip)
			h.skip -= n
			p = p[n:]
		}
		if h.hn == len(h.hdr) && h.skip == 0 {
			if h.ends {
				h.blocks++
			}
			h.hn, h.ends = 0, false
		}
	}
	if h.off {
		return total
	}
	return total - len(p)
}

// frame reads the frame header just gathered.
func (h *h2Blocks) frame() {
	b := h.hdr
	h.skip = int(b[0])<<16 | int(b[1])<<8 | int(b[2])
	typ, flags := b[3], b[4]
	id := (uint32(b[5])<<24 | uint32(b[6])<<16 | uint32(b[7])<<8 | uint32(b[8])) & (1<<31 - 1)
	switch typ {
	case frameHeaders:
		if id%2 == 1 && id > h.last {
			h.last, h.opening = id, true
		} else {
			h.opening = false // trailers, or a stream the server refuses at once
		}
	case frameContinuation:
	default:
		return
	}
	if h.opening && flags&flagEndHeaders != 0 {
		h.ends, h.opening = true, false
	}
}

// BlocksPerRead bounds the streams a connection's client opens that one
// read hands to grpc-go: it handles every frame of a read before it reads
// again, and a read of 32 KiB holds 1,600 header blocks of 20 bytes (HPACK
// indexes repeated fields), every one handled before the count below
// could close the connection; the rest waits in the connection's own
// buffer for the next read, which settles first.
const BlocksPerRead = 16

// frameGate hands a connection's bytes to grpc-go at most BlocksPerRead
// opening blocks at a time, counting them (h2Blocks).
type frameGate struct {
	blocks  h2Blocks
	pending []byte // read, not handed on yet
	perr    error  // the error of the read that filled pending
}

// read fills p from pending, or from r, up to the end of the
// BlocksPerRead-th block opening a stream.
func (g *frameGate) read(r io.Reader, p []byte) (int, error) {
	if len(g.pending) == 0 && g.perr == nil {
		n, err := r.Read(p)
		k := g.blocks.feed(p[:n], BlocksPerRead)
		if k < n {
			g.pending, g.perr = append(g.pending[:0], p[k:n]...), err
			return k, nil
		}
		return n, err
	}
	n := copy(p, g.pending)
	k := g.blocks.feed(p[:n], BlocksPerRead)
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
	n := c.gate.blocks.blocks - c.tapped.Load() - c.untapped
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
// of what frameConn deciphers): settled, then gated.
func (c *recvConn) readCounted(r io.Reader, p []byte) (int, error) {
	c.settleUntapped()
	if c.caught.Load() {
		return 0, net.ErrClosed
	}
	return c.gate.read(r, p)
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

// NetConn is the TLS connection, as tls.Conn's NetConn is the raw one.
func (c *frameConn) NetConn() net.Conn { return c.Conn }
