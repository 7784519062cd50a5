package rapidreset

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestStreamsCountUnreadData: the client's DATA counts as unread unless
// its stream is open (accepted, not yet ended by the client's
// END_STREAM or RST_STREAM, nor by the server's trailers or RST_STREAM),
// and so does every payload but DATA's and header blocks', however the
// reads and writes split the frames.
func TestStreamsCountUnreadData(t *testing.T) {
	hdr := []byte("\x82\x86")
	// in: what the client sends; out: what the server writes; each step
	// is fed in order. A step opening a stream has the server's decision
	// (accept), made once its headers are read.
	type step struct {
		in, out func(fr *http2.Framer) error
		opens   uint32
		accept  bool
	}
	headers := func(id uint32, end bool) func(fr *http2.Framer) error {
		return func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr, EndHeaders: true, EndStream: end})
		}
	}
	data := func(id uint32, n int, end bool) func(fr *http2.Framer) error {
		return func(fr *http2.Framer) error { return fr.WriteData(id, end, make([]byte, n)) }
	}
	steps := []step{
		{in: headers(1, false), opens: 1, accept: true},
		{in: data(1, 1000, false)},
		{in: data(1, 2000, true)}, // read: the message, then END_STREAM
		{in: data(1, 30, false)},  // after END_STREAM: read by no one (30)
		{in: headers(3, false), opens: 3},
		{in: data(3, 4000, true)}, // refused: 4,000
		{in: headers(5, false), opens: 5, accept: true},
		{in: data(5, 500, false)},
		{out: headers(5, true)},   // the server's trailers-only answer
		{in: data(5, 700, false)}, // 700
		{in: headers(7, false), opens: 7, accept: true},
		{in: data(7, 100, false)},
		{out: func(fr *http2.Framer) error { return fr.WriteRSTStream(7, http2.ErrCodeNo) }},
		{in: data(7, 60, true)}, // 60
		{in: headers(9, false), opens: 9, accept: true},
		{in: func(fr *http2.Framer) error { return fr.WriteRSTStream(9, http2.ErrCodeCancel) }},
		{in: data(9, 9, false)},                          // 9
		{in: headers(11, true), opens: 11, accept: true}, // no body: not open
		{in: data(11, 11, false)},                        // 11
		{in: func(fr *http2.Framer) error { return fr.WriteRawFrame(0x20, 0, 0, make([]byte, 16<<10)) }},     // 16,384
		{in: func(fr *http2.Framer) error { return fr.WriteGoAway(0, http2.ErrCodeNo, make([]byte, 1000)) }}, // 1,008
		{in: func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{}) }},                         // 0: a control frame's
		{in: func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1<<20) }},                         // 0
	}
	const want = 30 + 4000 + 700 + 60 + 9 + 11 + 16<<10 + 1008
	for _, chunk := range []int{1, 7, 9, 100, 1 << 20} {
		var s Streams
		h, w := H2Scan{Streams: &s}, H2Writes{Streams: &s}
		h.Feed([]byte(ClientPreface), 0)
		for i, st := range steps {
			var b bytes.Buffer
			fr := http2.NewFramer(&b, nil)
			feed := h.Feed
			if st.out != nil {
				if err := st.out(fr); err != nil {
					t.Fatal(err)
				}
				feed = func(p []byte, _ int64) int { w.Feed(p); return len(p) }
			} else if err := st.in(fr); err != nil {
				t.Fatal(err)
			}
			wire := b.Bytes()
			for from := 0; from < len(wire); from += chunk {
				feed(wire[from:min(from+chunk, len(wire))], 0)
			}
			if st.opens != 0 {
				id, ends := h.Last()
				if id != st.opens || ends != (st.opens == 11) {
					t.Fatalf("step %d: last stream %d (ends %v), want %d", i, id, ends, st.opens)
				}
				s.Decide(id, st.accept && !ends)
			}
		}
		if h.Unread() != want || s.Len() != 0 {
			t.Errorf("chunks of %d bytes: %d unread, %d streams open; want %d, none", chunk, h.Unread(), s.Len(), want)
		}
	}
}

// TestStreamsEndedBeforeDecided: a stream the server ended before the
// reader decided on it (grpc-go's answer to a deadline already past) is
// not opened, however many streams the server ended meanwhile; a stream
// ended by its client before is; Max bounds the streams open.
func TestStreamsEndedBeforeDecided(t *testing.T) {
	s := Streams{Max: 100}
	s.Decide(1, true)
	s.end(1, false) // its client's END_STREAM
	s.end(3, true)  // stream 3, handed on, ended at once
	s.end(1, true)  // the server's trailers of stream 1, decided before
	s.end(1, true)
	if s.Decide(3, true) || s.Open(3) {
		t.Fatal("a stream the server ended before its decision was opened")
	}
	s.end(5, false) // the client's end of a stream not yet open: nothing kept
	if !s.Decide(5, true) || !s.Open(5) {
		t.Fatal("stream 5 not opened")
	}
	if s.Decide(7, false) || s.Open(7) {
		t.Fatal("a refused stream opened")
	}
	for id := range uint32(200) {
		s.Decide(9+2*id, true)
	}
	if s.Len() != 100 {
		t.Fatalf("%d streams open, want Max (100)", s.Len())
	}
}

// TestUnreadWaitSharedByThePeer: a peer's unread DATA is free up to
// PeerUnreadBurst, then paid at PeerUnreadRate in the order it came,
// whichever of its connections sent it; another peer is not charged; a
// turn further than FrameWaitMax is refused.
func TestUnreadWaitSharedByThePeer(t *testing.T) {
	now := time.Unix(1000, 0)
	peers := NewAt(func() time.Time { return now })
	a1, a2 := NewConn(peers, netip.MustParseAddr("192.0.2.1")), NewConn(peers, netip.MustParseAddr("192.0.2.1"))
	b := NewConn(peers, netip.MustParseAddr("192.0.2.2"))
	if d, ok := a1.UnreadWait(PeerUnreadBurst, now); d != 0 || !ok {
		t.Fatalf("the burst: wait %v, %v; want none", d, ok)
	}
	if d, ok := a2.UnreadWait(PeerUnreadRate/4, now); d != time.Second/4 || !ok {
		t.Fatalf("a quarter second's worth past the burst, on another connection: wait %v, %v; want 250ms", d, ok)
	}
	if d, ok := b.UnreadWait(PeerUnreadBurst, now); d != 0 || !ok {
		t.Fatalf("another peer: wait %v, %v; want none", d, ok)
	}
	if d, ok := a1.UnreadWait(int64(FrameWaitMax/time.Second)*PeerUnreadRate, now); ok {
		t.Fatalf("a turn %v away accepted (wait %v)", FrameWaitMax, d)
	}
	now = now.Add(10 * time.Second) // paid, and the burst back
	if d, ok := a1.UnreadWait(PeerUnreadBurst, now); d != 0 || !ok {
		t.Fatalf("10 s later: wait %v, %v; want none", d, ok)
	}
	if peers.UnreadHeld() != 1 {
		t.Fatalf("%d reads held, want 1", peers.UnreadHeld())
	}
	var none *Conn
	if d, ok := none.UnreadWait(1<<30, now); d != 0 || !ok {
		t.Fatal("no peers counted: held")
	}
}
