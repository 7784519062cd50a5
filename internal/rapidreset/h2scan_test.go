package rapidreset

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestH2ScanCountsOpeningBlocks: the scanner counts a header block
// that opens a stream once its last frame has arrived whole, whatever
// the reads' boundaries; trailers, frames of other types and a
// connection that is not HTTP/2 count nothing.
func TestH2ScanCountsOpeningBlocks(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(ClientPreface)
	fr := http2.NewFramer(&b, nil)
	block := []byte("\x82\x86\x84") // any bytes: the scanner reads no header block
	steps := []struct {
		write func() error
		want  int64 // blocks counted once this frame is whole
	}{
		{func() error { return fr.WriteSettings() }, 0},
		{func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
		}, 1},
		{func() error { return fr.WriteData(1, false, make([]byte, 300)) }, 1},
		{func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true, EndStream: true})
		}, 1}, // trailers
		{func() error { return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block}) }, 1},
		{func() error { return fr.WritePing(false, [8]byte{}) }, 1},
		{func() error { return fr.WriteContinuation(3, true, block) }, 2},
		{func() error { return fr.WriteRSTStream(3, http2.ErrCodeCancel) }, 2},
		{func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: block, EndHeaders: true})
		}, 2}, // an even id opens nothing
		{func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 7, BlockFragment: make([]byte, 5000), EndHeaders: true})
		}, 3},
	}
	var ends []int
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, b.Len())
	}
	wire := b.Bytes()
	for _, chunk := range []int{1, 7, 4096, len(wire)} {
		var h H2Scan
		from := 0
		for i, end := range ends {
			for from < end {
				n := min(chunk, end-from)
				h.Feed(wire[from:from+n], 0)
				from += n
				if from < end && h.blocks != max(0, steps[max(0, i-1)].want) && i > 0 {
					t.Fatalf("chunks of %d: %d blocks before frame %d is whole, want %d", chunk, h.blocks, i, steps[i-1].want)
				}
			}
			if chunk == 1 && h.blocks != steps[i].want {
				t.Fatalf("chunks of %d: %d blocks after frame %d, want %d", chunk, h.blocks, i, steps[i].want)
			}
		}
		if h.blocks != 3 {
			t.Fatalf("chunks of %d: %d blocks, want 3", chunk, h.blocks)
		}
	}
	var h H2Scan
	h.Feed([]byte("GET / HTTP/1.1\r\n\r\n"+ClientPreface), 0)
	if !h.off || h.blocks != 0 {
		t.Fatalf("not HTTP/2: off %v, %d blocks", h.off, h.blocks)
	}
}

// TestH2ScanCheap: every frame is cheap but a DATA frame of
// DataFrameBytes or more; Data counts every DATA frame by its size.
func TestH2ScanCheap(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(ClientPreface)
	fr := http2.NewFramer(&b, nil)
	for _, w := range []func() error{
		func() error { return fr.WriteSettings() },
		func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("\x83\x86"), EndHeaders: true})
		},
		func() error { return fr.WriteData(1, false, make([]byte, DataFrameBytes-1)) },
		func() error { return fr.WriteData(1, false, make([]byte, DataFrameBytes)) }, // not cheap
		func() error { return fr.WriteData(1, false, make([]byte, 16*DataFrameBytes+1)) },
		func() error { return fr.WriteData(1, true, nil) },
		func() error { return fr.WriteWindowUpdate(0, 1) },
		func() error { return fr.WriteRSTStream(1, http2.ErrCodeCancel) },
		func() error { return fr.WritePriority(3, http2.PriorityParam{Weight: 1}) },
		func() error { return fr.WritePing(false, [8]byte{}) },
	} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	var h H2Scan
	for _, c := range b.Bytes() { // a byte at a time
		h.Feed([]byte{c}, 0)
	}
	if want := int64(18 * DataFrameBytes); h.Cheap() != 8 || h.Blocks() != 1 || h.Data() != want {
		t.Fatalf("cheap %d, blocks %d, data %d; want 8, 1, %d", h.Cheap(), h.Blocks(), h.Data(), want)
	}
}

// TestFrameBudget: a connection's cheap frames pass up to its own
// FrameBurst, refilled by FramesPerRequest for each request handled and
// one for each FrameCreditBytes written; past that they come out of its
// own rate (after a burst) or, for a connection with a request under
// way, what its peer has left of PeerFrameRate, or wait for its own rate
// and its turn in the peer's share. An honest client's frames never
// wait; a flood's connections with no request take none of the spare,
// wait for their own rate and their turn, or are closed.
func TestFrameBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewAt(func() time.Time { return t0 })
	peer := netip.MustParseAddr("192.0.2.1")
	c := &Conn{Peers: r, Peer: peer}
	c.Begin() // a request under way: the peer's spare is for such connections
	var b FrameBudget
	if w := b.Wait(t0, FrameBurst, 0, 0, c); w != 0 {
		t.Fatalf("the burst waits %v", w)
	}
	// Credits: two requests and 8 KiB written pay for 12 more.
	n := int64(FrameBurst + 2*FramesPerRequest + 2)
	if w := b.Wait(t0, n, 2, 2*FrameCreditBytes, c); w != 0 {
		t.Fatalf("credited frames wait %v", w)
	}
	// Past its own: the peer's burst, taken whole or not at all.
	n += PeerFrameBurst - 1
	if w := b.Wait(t0, n, 2, 2*FrameCreditBytes, c); w != 0 {
		t.Fatalf("the peer's burst waits %v", w)
	}
	// Then the connection's own rate, after a burst of FrameBurst.
	n += FrameBurst
	if w := b.Wait(t0, n, 2, 2*FrameCreditBytes, c); w != 0 {
		t.Fatalf("past the peer's burst, the connection's own burst waits %v", w)
	}
	n += FrameRate
	if w := b.Wait(t0, n, 2, 2*FrameCreditBytes, c); w != time.Second {
		t.Fatalf("past its own burst, %d frames wait %v, want 1s of the connection's rate", FrameRate, w)
	}
	// A second later the connection has paid, and the peer has
	// PeerFrameRate again.
	n += PeerFrameRate - 1
	if w := b.Wait(t0.Add(time.Second), n, 2, 2*FrameCreditBytes, c); w != 0 {
		t.Fatalf("a second later, the peer's rate waits %v", w)
	}
	// Another connection of the peer, past its own burst, waits for its
	// own rate only, whatever the first took.
	var b2 FrameBudget
	c2 := &Conn{Peers: r, Peer: peer}
	c2.Begin()
	if w := b2.Wait(t0.Add(time.Second), 2*FrameBurst+FrameRate/2, 0, 0, c2); w != time.Second/2 {
		t.Fatalf("the peer's second connection waits %v, want 500ms", w)
	}

	// An honest client: 20,000 requests on one connection, each a
	// HEADERS and a small DATA frame, and a WINDOW_UPDATE for every 8
	// KiB of answers of 1 KiB each; and a body written in 2,000 pieces
	// of 100 bytes (one request), from its own budget and its peer's.
	var honest FrameBudget
	hc := &Conn{Peers: r, Peer: netip.MustParseAddr("192.0.2.3")}
	hc.Begin()
	var cheap, written int64
	for i := range int64(20_000) {
		cheap += 2
		if i%8 == 7 {
			cheap++
		}
		if w := honest.Wait(t0, cheap, i, written, hc); w != 0 {
			t.Fatalf("request %d of an honest client waits %v", i, w)
		}
		written += 1 << 10
	}
	var pieces FrameBudget
	pc := &Conn{Peers: r, Peer: netip.MustParseAddr("192.0.2.4")}
	pc.Begin()
	if w := pieces.Wait(t0, 2000, 1, 0, pc); w != 0 {
		t.Fatalf("a body in 2,000 pieces waits %v", w)
	}

	// A flood: 704 connections of a peer each past its burst by a
	// record of 1,600 frames, no request under way: none takes the
	// peer's spare; each waits for its own rate (6.72 s past its burst)
	// and its turn in the peer's share of its connections' own rates,
	// and those whose turn is further than FrameWaitMax are closed.
	flood := netip.MustParseAddr("192.0.2.5")
	var waited, closed int
	var queued float64
	for range 704 {
		var fb FrameBudget
		w := fb.Wait(t0, FrameBurst+1600, 0, 0, &Conn{Peers: r, Peer: flood})
		switch {
		case fb.Exhausted():
			closed++
		case w > 0:
			waited++
			queued += 1600
			if own := frames(1600-FrameBurst, FrameRate); w < own {
				t.Fatalf("a flood's connection waits %v, less than its own rate's %v", w, own)
			}
		}
	}
	if waited+closed != 704 || closed == 0 {
		t.Fatalf("of 704 flood connections %d waited and %d were closed, want all and some closed", waited, closed)
	}
	// A connection past its own rate's burst, its peer's spare taken:
	// its frames are queued on the peer's share once.
	single := netip.MustParseAddr("192.0.2.11")
	var sb FrameBudget
	if w := sb.Wait(t0, 2*FrameBurst+FrameRate, 0, 0, &Conn{Peers: r, Peer: single}); w != time.Second {
		t.Fatalf("past its own burst, %d frames wait %v, want 1s", FrameRate, w)
	}
	if got, want := r.m[single].opaid.Sub(t0), frames(FrameBurst+FrameRate, PeerOwnRate); got != want {
		t.Fatalf("the peer's share holds %v of frames, want %v (queued once)", got, want)
	}
	// The spare is whole for a connection of the flood's peer that has a
	// request under way (a body being read): it passes at once.
	var body FrameBudget
	bc := &Conn{Peers: r, Peer: flood}
	bc.Begin()
	if w := body.Wait(t0, FrameBurst+PeerFrameBurst, 1, 0, bc); w != 0 {
		t.Fatalf("a request's body on the flooding peer, past its burst, waits %v for the spare", w)
	}
	if most := (FrameWaitMax + time.Second).Seconds() * PeerOwnRate; queued > most {
		t.Fatalf("the flood's connections queued %.0f frames, more than the %.0f the peer's share pays in FrameWaitMax", queued, most)
	}
	// A connection that waits FrameWaitMax with no request handled is
	// exhausted; a request handled starts the count again.
	var slow FrameBudget
	cheapN := int64(FrameBurst)
	for i := 0; !slow.Exhausted(); i++ {
		if i > int(FrameWaitMax/time.Second) {
			t.Fatal("never exhausted")
		}
		cheapN += FrameRate
		slow.Wait(t0, cheapN, 0, 0, nil)
	}
	slow.Wait(t0, cheapN+1, 1, 0, nil)
	if slow.Exhausted() {
		t.Fatal("a request handled did not start the wait again")
	}
	// With no peers counted, the connection's own rate.
	var lone FrameBudget
	if w := lone.Wait(t0, 2*FrameBurst+FrameRate, 0, 0, nil); w != time.Second {
		t.Fatalf("a connection with no peer waits %v, want 1s", w)
	}
}

// TestFrameBudgetPeerOwnRate: a peer's connections that each keep just
// inside their own rate (a record of FrameRate cheap frames a second, no
// request) have PeerOwnRate and the peer's spare a second handled across
// them, however many they are; fifty of them alone have all theirs
// handled; an honest connection of the same peer, paying with its
// requests, never waits; another peer's connections are not charged for
// them.
func TestFrameBudgetPeerOwnRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewAt(func() time.Time { return t0 })
	const step = 10 * time.Millisecond

	// handled simulates conns connections of peer for secs seconds,
	// each sent a record at the start of each of its seconds (their
	// seconds staggered by step), read a record at a time when not
	// held, and returns the frames handled (their hold over) in each
	// second; a connection closed (Exhausted) handles no more.
	handled := func(peer netip.Addr, conns, secs int) []int64 {
		type conn struct {
			b      FrameBudget
			c      *Conn
			read   int64
			until  time.Time
			closed bool
		}
		cs := make([]conn, conns)
		for i := range cs {
			cs[i].c = &Conn{Peers: r, Peer: peer}
		}
		out := make([]int64, secs+int(FrameWaitMax/time.Second)+2)
		for tick := range secs * int(time.Second/step) {
			now := t0.Add(time.Duration(tick) * step)
			for i := range cs {
				c := &cs[i]
				since := now.Sub(t0) - time.Duration(i%100)*step
				if c.closed || since < 0 || now.Before(c.until) || c.read >= int64(since/time.Second+1)*FrameRate {
					continue
				}
				c.read += FrameRate
				w := c.b.Wait(now, c.read, 0, 0, c.c)
				if c.b.Exhausted() {
					c.closed = true
					continue
				}
				c.until = now.Add(w)
				out[int(c.until.Sub(t0)/time.Second)] += FrameRate
			}
		}
		return out[:secs]
	}

	few := handled(netip.MustParseAddr("192.0.2.8"), PeerOwnRate/FrameRate, 20)
	for s, n := range few[1:] {
		if n != PeerOwnRate {
			t.Fatalf("second %d: %d of fifty paced connections' frames handled, want all %d", s+1, n, PeerOwnRate)
		}
	}

	const many, secs = 1500, 40
	flood := netip.MustParseAddr("192.0.2.7")
	got := handled(flood, many, secs)
	if got[0] != many*FrameRate {
		t.Fatalf("the first second (the connections' bursts) handled %d, want %d", got[0], many*FrameRate)
	}
	// From the fifth second: the peer's share of its connections' own
	// rates and its spare, with its spare's burst once.
	var after int64
	for _, n := range got[5:] {
		after += n
	}
	if most := int64((secs-5)*(PeerOwnRate+PeerFrameRate) + PeerFrameBurst); after > most {
		t.Fatalf("1,500 paced connections had %d frames handled in %d s, more than %d", after, secs-5, most)
	}
	if after < (secs-5)*PeerOwnRate/2 {
		t.Fatalf("1,500 paced connections had %d frames handled in %d s: the peer's share was not handed out", after, secs-5)
	}

	// Meanwhile an honest connection of the flood's peer (a request a
	// second, a HEADERS, a DATA and a WINDOW_UPDATE for each, and 1 KiB
	// of answer), and a paced connection of another peer, never wait.
	now := t0.Add(secs * time.Second)
	var honest, other FrameBudget
	hc, oc := &Conn{Peers: r, Peer: flood}, &Conn{Peers: r, Peer: netip.MustParseAddr("192.0.2.9")}
	for s := range int64(600) {
		at := now.Add(time.Duration(s) * time.Second)
		if w := honest.Wait(at, 3*s, s, s<<10, hc); w != 0 {
			t.Fatalf("second %d: an honest connection of the flooding peer waits %v", s, w)
		}
		if w := other.Wait(at, FrameRate*(s+1), 0, 0, oc); w != 0 {
			t.Fatalf("second %d: another peer's paced connection waits %v", s, w)
		}
	}
}

// TestFrameBudgetOwnRateBeforeSpare: a lone connection streaming a body
// in small frames (no credits: a DATA frame of 10 bytes read at a time)
// is paid by its own rate and its peer's spare together, as before the
// peer's share: 20,000 frames in about (20,000 - FrameBurst -
// PeerFrameBurst) / (FrameRate + PeerFrameRate) seconds. With the spare
// tried first and charged a frame more than the deficit (d+1 where the
// old fractional deficit rounded down), it took twice as long.
func TestFrameBudgetOwnRateBeforeSpare(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewAt(func() time.Time { return t0 })
	c := &Conn{Peers: r, Peer: netip.MustParseAddr("192.0.2.10")}
	c.Begin()
	var b FrameBudget
	now, sent := t0, int64(0)
	for sent < 20_000 {
		sent++
		now = now.Add(b.Wait(now, sent, 0, 0, c) + 100*time.Microsecond)
	}
	took := now.Sub(t0)
	want := frames(20_000-FrameBurst-PeerFrameBurst, FrameRate+PeerFrameRate)
	if took > want+want/10 {
		t.Fatalf("20,000 frames took %v, want about %v", took, want)
	}
}

// TestH2WritesResets: the scanner of a server's writes counts its
// RST_STREAM frames, and no other frame, whatever the writes' boundaries
// (a frame header split across writes, several frames in one, a payload
// that looks like a frame header).
func TestH2WritesResets(t *testing.T) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	fake := []byte{0, 0, 4, 0x3, 0, 0, 0, 0, 1, 0, 0, 0, 0} // a RST_STREAM's bytes, as a payload
	for _, w := range []func() error{
		func() error { return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 250}) },
		func() error { return fr.WriteWindowUpdate(0, 1<<20) },
		func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: fake, EndHeaders: true})
		},
		func() error { return fr.WriteData(1, false, bytes.Repeat(fake, 2000)) },
		func() error { return fr.WriteRSTStream(1, http2.ErrCodeNo) },
		func() error { return fr.WriteRSTStream(3, http2.ErrCodeStreamClosed) },
		func() error { return fr.WriteData(3, true, nil) },
		func() error { return fr.WritePing(true, [8]byte{3}) },
		func() error { return fr.WriteRSTStream(5, http2.ErrCodeStreamClosed) },
		func() error { return fr.WriteGoAway(5, http2.ErrCodeNo, fake) },
	} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	wire := b.Bytes()
	for _, chunk := range []int{1, 2, 5, 9, 13, 100, 4096, len(wire)} {
		var w H2Writes
		for from := 0; from < len(wire); from += chunk {
			w.Feed(wire[from:min(from+chunk, len(wire))])
		}
		if w.Resets() != 3 {
			t.Errorf("writes of %d bytes: %d RST_STREAM frames counted, want 3", chunk, w.Resets())
		}
	}
	var w H2Writes
	w.Feed(wire[:len(wire)-1]) // the last frame not yet whole: counted from its header
	if w.Resets() != 3 {
		t.Errorf("before the last byte: %d RST_STREAM frames, want 3", w.Resets())
	}
	var h H2Scan
	if h.Feed([]byte(ClientPreface[:10]), 0); h.HTTP2() {
		t.Error("HTTP2 before the whole preface")
	}
	if h.Feed([]byte(ClientPreface[10:]), 0); !h.HTTP2() {
		t.Error("not HTTP2 after the whole preface")
	}
}
