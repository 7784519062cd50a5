package rapidreset

import (
	"bytes"
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
// DataFrameBytes or more.
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
	if h.Cheap() != 8 || h.Blocks() != 1 {
		t.Fatalf("cheap %d, blocks %d; want 8, 1", h.Cheap(), h.Blocks())
	}
}

// TestFrameBudget: cheap frames pass up to FrameBurst, then at
// FrameRate; a request handled credits FramesPerRequest and
// FrameCreditBytes written one; an honest client's frames never wait,
// a flood's wait grows with what it sent.
func TestFrameBudget(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b FrameBudget
	if w := b.Wait(t0, FrameBurst, 0, 0); w != 0 {
		t.Fatalf("the burst waits %v", w)
	}
	if w := b.Wait(t0, FrameBurst+1, 0, 0); w != time.Second/FrameRate {
		t.Fatalf("one past the burst waits %v, want %v", w, time.Second/FrameRate)
	}
	// A second later, FrameRate more have come.
	if w := b.Wait(t0.Add(time.Second), FrameBurst+FrameRate, 0, 0); w != 0 {
		t.Fatalf("after a second, %d more wait %v", FrameRate-1, w)
	}
	// Credits: two requests and 8 KiB written pay for 12 more.
	if w := b.Wait(t0.Add(time.Second), FrameBurst+FrameRate+2*FramesPerRequest+2, 2, 2*FrameCreditBytes); w != 0 {
		t.Fatalf("credited frames wait %v", w)
	}
	if w := b.Wait(t0.Add(time.Second), FrameBurst+FrameRate+2*FramesPerRequest+3, 2, 2*FrameCreditBytes+FrameCreditBytes-1); w == 0 {
		t.Fatal("a frame past the credits passed")
	}

	// An honest client: 20,000 requests in 4 s on one connection, each a
	// HEADERS and a small DATA frame, and a WINDOW_UPDATE for every 8
	// KiB of answers of 1 KiB each.
	var honest FrameBudget
	var cheap, written int64
	for i := range int64(20_000) {
		now := t0.Add(time.Duration(i) * 200 * time.Microsecond)
		cheap += 2
		if i%8 == 7 {
			cheap++
		}
		if w := honest.Wait(now, cheap, i, written); w != 0 {
			t.Fatalf("request %d of an honest client waits %v", i, w)
		}
		written += 1 << 10
	}
	// A client writing a body a piece at a time: 400 frames of 100 bytes
	// at once, then 400 a second.
	var pieces FrameBudget
	for i := range int64(4000) {
		if w := pieces.Wait(t0.Add(time.Duration(i)*2500*time.Microsecond), 400+i, 1, 0); w != 0 {
			t.Fatalf("piece %d waits %v", i, w)
		}
	}

	// A flood: 100,000 frames in one go, and another 100,000.
	var flood FrameBudget
	want := time.Duration(float64(100_000-FrameBurst) / FrameRate * float64(time.Second))
	if w := flood.Wait(t0, 100_000, 0, 0); w < want-time.Millisecond || w > want+time.Millisecond {
		t.Fatalf("a flood waits %v, want %v", w, want)
	}
	if w := flood.Wait(t0.Add(want), 200_000, 0, 0); w < 199*time.Second {
		t.Fatalf("a flood's second part waits %v", w)
	}
}
