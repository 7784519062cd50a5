package rapidreset

import (
	"bytes"
	"testing"

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

// TestH2ScanDataFlood: DATA frames of a byte are a flood once past the
// slack and each stream's share; a client's bodies in frames of its
// writes (whole, or 16 KiB pieces, or a few small writes each) are not.
func TestH2ScanDataFlood(t *testing.T) {
	frames := func(h *H2Scan, write func(fr *http2.Framer) error) {
		t.Helper()
		var b bytes.Buffer
		if err := write(http2.NewFramer(&b, nil)); err != nil {
			t.Fatal(err)
		}
		h.Feed(b.Bytes(), 0)
	}
	open := func(id uint32) func(fr *http2.Framer) error {
		return func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte("\x83\x86"), EndHeaders: true})
		}
	}
	var flood H2Scan
	flood.Feed([]byte(ClientPreface), 0)
	frames(&flood, open(1))
	for i := 1; i <= DataFramesSlack+DataFramesPerStream+1; i++ {
		frames(&flood, func(fr *http2.Framer) error { return fr.WriteData(1, false, []byte{'x'}) })
		if want := i > DataFramesSlack+DataFramesPerStream; flood.DataFlood() != want {
			t.Fatalf("after %d one-byte frames on one stream: flood %v, want %v", i, flood.DataFlood(), want)
		}
	}

	var honest H2Scan
	honest.Feed([]byte(ClientPreface), 0)
	for s := range uint32(2000) {
		id := 2*s + 1
		frames(&honest, open(id))
		switch s % 4 {
		case 0: // a small body in one write
			frames(&honest, func(fr *http2.Framer) error { return fr.WriteData(id, true, make([]byte, 300)) })
		case 1: // a large body in frames of 16 KiB, ended by an empty frame
			frames(&honest, func(fr *http2.Framer) error {
				for range 8 {
					if err := fr.WriteData(id, false, make([]byte, 16<<10)); err != nil {
						return err
					}
				}
				return fr.WriteData(id, true, nil)
			})
		case 2: // a body written a piece at a time
			frames(&honest, func(fr *http2.Framer) error {
				for range DataFramesPerStream - 1 {
					if err := fr.WriteData(id, false, make([]byte, 40)); err != nil {
						return err
					}
				}
				return fr.WriteData(id, true, nil)
			})
		}
		if honest.DataFlood() {
			t.Fatalf("honest bodies taken for a flood at stream %d", s)
		}
	}
	if honest.Blocks() != 2000 {
		t.Fatalf("%d streams counted, want 2000", honest.Blocks())
	}
}
