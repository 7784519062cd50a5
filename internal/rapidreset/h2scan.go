package rapidreset

// ClientPreface opens every HTTP/2 connection.
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the scanner reads.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameContinuation = 0x9
	flagEndStream     = 0x1
	flagEndHeaders    = 0x4
)

// H2Scan reads an HTTP/2 connection's frame headers from its client's
// bytes, fed as they are read: it counts the header blocks that open a
// stream (Blocks), and the frames that carry no large body (Cheap). It
// keeps nine bytes of state whatever the frames: payloads are skipped,
// never held.
type H2Scan struct {
	preface int     // bytes of the client preface matched
	hdr     [9]byte // a frame header being gathered
	hn      int     // its bytes so far
	skip    int     // payload bytes of the current frame still to come
	ends    bool    // the current frame ends a block opening a stream
	opening bool    // a block opening a stream awaits its END_HEADERS
	last    uint32  // the highest stream id opened
	blocks  int64   // blocks opening a stream, complete
	cheap   int64   // frames but DATA of DataFrameBytes or more (FrameBudget)
	data    int64   // bytes of DATA frames (payload and padding)
	off     bool    // not HTTP/2: nothing is counted
	// lastEnds: the HEADERS frame opening stream last had END_STREAM
	// (the request has no body).
	lastEnds bool
	// Streams, when set, is the connection's streams open to DATA:
	// unread counts the DATA bytes on any other stream, and the frames
	// ending a stream (END_STREAM, RST_STREAM) remove it.
	Streams *Streams
	unread  int64
}

// Blocks is how many header blocks opening a stream were fed whole.
func (h *H2Scan) Blocks() int64 { return h.blocks }

// HTTP2 reports whether what was fed began with the client preface,
// whole.
func (h *H2Scan) HTTP2() bool { return !h.off && h.preface == len(ClientPreface) }

// NotHTTP2 reports whether what was fed began with something other than
// the client preface.
func (h *H2Scan) NotHTTP2() bool { return h.off }

// Feed scans p, or its start: it stops after the frame completing the
// limit-th block (when limit > 0) from here, and returns how many bytes
// it scanned.
func (h *H2Scan) Feed(p []byte, limit int64) int {
	total, stop := len(p), h.blocks+limit
	for len(p) > 0 && !h.off && (limit <= 0 || h.blocks < stop) {
		switch {
		case h.preface < len(ClientPreface):
			n := min(len(p), len(ClientPreface)-h.preface)
			if string(p[:n]) != ClientPreface[h.preface:h.preface+n] {
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
func (h *H2Scan) frame() {
	var typ, flags byte
	var id uint32
	h.skip, typ, flags, id = frameHeader(h.hdr)
	if typ != frameData || h.skip < DataFrameBytes {
		h.cheap++
	}
	if typ == frameData {
		h.data += int64(h.skip)
		if h.Streams != nil && !h.Streams.data(id, int64(h.skip), flags&flagEndStream != 0) {
			h.unread += int64(h.skip)
		}
	} else if h.Streams != nil && typ != frameHeaders && typ != frameContinuation && h.skip > ControlFrameBytes {
		// A frame of no stream's request with a payload no control frame
		// of an honest client has: grpc-go reads and drops an unknown
		// type's payload (16 KiB a frame), or GOAWAY's debug data, as it
		// does a refused stream's DATA. (The control frames are counted
		// one each, Cheap.)
		h.unread += int64(h.skip)
	}
	switch typ {
	case frameHeaders:
		if id%2 == 1 && id > h.last {
			h.last, h.opening, h.lastEnds = id, true, flags&flagEndStream != 0
		} else {
			h.opening = false // trailers, or a stream the server refuses at once
			if h.Streams != nil && flags&flagEndStream != 0 {
				h.Streams.end(id, false)
			}
		}
	case frameRSTStream:
		if h.Streams != nil {
			h.Streams.end(id, false)
		}
		return
	case frameContinuation:
	default:
		return
	}
	if h.opening && flags&flagEndHeaders != 0 {
		h.ends, h.opening = true, false
	}
}

// frameHeader reads an HTTP/2 frame header: its payload's length, type,
// flags and stream id.
func frameHeader(b [9]byte) (length int, typ, flags byte, id uint32) {
	return int(b[0])<<16 | int(b[1])<<8 | int(b[2]), b[3], b[4],
		(uint32(b[5])<<24 | uint32(b[6])<<16 | uint32(b[7])<<8 | uint32(b[8])) & (1<<31 - 1)
}

// Last is the stream the latest header block opening a stream opened,
// and whether its request has no body (its HEADERS ended the stream).
func (h *H2Scan) Last() (id uint32, ends bool) { return h.last, h.lastEnds }

// Unread is the size in bytes of the DATA frames fed on streams that
// Streams did not hold open, and of every other frame's payload of more
// than ControlFrameBytes but header blocks' (0 with no Streams).
func (h *H2Scan) Unread() int64 { return h.unread }

// Cheap is how many frames were fed that carry no large body: every
// frame but a DATA frame of DataFrameBytes or more (FrameBudget).
func (h *H2Scan) Cheap() int64 { return h.cheap }

// Data is the size in bytes of the DATA frames fed, their padding
// included: the HTTP listeners charge what of it no handler read, a
// frame for each DataFrameBytes (listeners' h2Conn), so that a body no
// handler reads is held to the budget whatever its frames' size. (The
// frames under DataFrameBytes count here as well as in Cheap: counted
// only as cheap, a body of small frames a handler read left its bytes
// to offset as many of a body of large frames no handler read.)
func (h *H2Scan) Data() int64 { return h.data }

// ControlFrameBytes: a frame other than DATA, HEADERS and CONTINUATION
// with a payload larger than this counts its payload as unread DATA
// (H2Scan.Unread): an honest client's PING has 8 bytes, WINDOW_UPDATE and
// RST_STREAM 4, PRIORITY 5, SETTINGS 6 a setting (grpc-go's and
// Node's send at most 6).
const ControlFrameBytes = 64

// DataFrameBytes: a DATA frame of this many bytes or more costs its
// client what it costs the server (its bytes' encryption and sending);
// a smaller one is cheap (FrameBudget).
const DataFrameBytes = 1 << 10

// H2Writes reads the frame headers of what a server writes on an HTTP/2
// connection (after the client's preface: the server writes none), fed
// as it is written, whatever the writes' boundaries, and counts the
// RST_STREAM frames (Resets). Nine bytes of state, payloads skipped.
// With Streams set, a stream the server ends (HEADERS with END_STREAM)
// or resets is removed from it.
type H2Writes struct {
	hdr     [9]byte
	hn      int
	skip    int
	resets  int64
	Streams *Streams
}

// Feed scans p, the next bytes written.
func (w *H2Writes) Feed(p []byte) {
	for len(p) > 0 {
		if w.skip > 0 {
			n := min(len(p), w.skip)
			w.skip -= n
			p = p[n:]
			continue
		}
		n := copy(w.hdr[w.hn:], p)
		w.hn += n
		p = p[n:]
		if w.hn == len(w.hdr) {
			var typ, flags byte
			var id uint32
			w.skip, typ, flags, id = frameHeader(w.hdr)
			if typ == frameRSTStream {
				w.resets++
			}
			if w.Streams != nil && (typ == frameRSTStream || typ == frameHeaders && flags&flagEndStream != 0) {
				w.Streams.end(id, true)
			}
			w.hn = 0
		}
	}
}

// Resets is how many RST_STREAM frames were fed, counted from their
// header.
func (w *H2Writes) Resets() int64 { return w.resets }
