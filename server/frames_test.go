package server

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"golang.org/x/net/http2"
)

// TestH2BlocksCountsOpeningBlocks: the scanner counts a header block
// that opens a stream once its last frame has arrived whole, whatever
// the reads' boundaries; trailers, frames of other types and a
// connection that is not HTTP/2 count nothing.
func TestH2BlocksCountsOpeningBlocks(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(clientPreface)
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
		var h h2Blocks
		from := 0
		for i, end := range ends {
			for from < end {
				n := min(chunk, end-from)
				h.feed(wire[from:from+n], 0)
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
	var h h2Blocks
	h.feed([]byte("GET / HTTP/1.1\r\n\r\n"+clientPreface), 0)
	if !h.off || h.blocks != 0 {
		t.Fatalf("not HTTP/2: off %v, %d blocks", h.off, h.blocks)
	}
}

// TestFrameGateHandsOnBlocksPerRead: a read hands on at most
// BlocksPerRead blocks opening a stream, the rest kept for the next
// reads, byte for byte, with the error of the read that brought them.
func TestFrameGateHandsOnBlocksPerRead(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(clientPreface)
	fr := http2.NewFramer(&b, nil)
	const streams = 5*BlocksPerRead + 3
	for s := range streams {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*s + 1), BlockFragment: []byte("\x82\x86"), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteData(uint32(2*s+1), true, []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	wire := b.Bytes()
	var g frameGate
	r := iotest.DataErrReader(bytes.NewReader(wire)) // the last bytes come with io.EOF
	var got []byte
	buf := make([]byte, 64<<10)
	for reads := 0; ; reads++ {
		before := g.blocks.blocks
		n, err := g.read(r, buf)
		got = append(got, buf[:n]...)
		if d := g.blocks.blocks - before; d > BlocksPerRead {
			t.Fatalf("read %d handed on %d blocks", reads, d)
		}
		if err == io.EOF {
			break
		}
		if err != nil || reads > 100 {
			t.Fatalf("read %d: %v", reads, err)
		}
	}
	if !bytes.Equal(got, wire) || g.blocks.blocks != streams {
		t.Fatalf("handed on %d of %d bytes, %d blocks of %d", len(got), len(wire), g.blocks.blocks, streams)
	}
}
