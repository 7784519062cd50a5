package server

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"golang.org/x/net/http2"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// TestFrameGateHandsOnBlocksPerRead: a read hands on at most
// BlocksPerRead blocks opening a stream, the rest kept for the next
// reads, byte for byte, with the error of the read that brought them.
func TestFrameGateHandsOnBlocksPerRead(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(rapidreset.ClientPreface)
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
		before := g.blocks.Blocks()
		n, err := g.read(r, buf)
		got = append(got, buf[:n]...)
		if d := g.blocks.Blocks() - before; d > BlocksPerRead {
			t.Fatalf("read %d handed on %d blocks", reads, d)
		}
		if err == io.EOF {
			break
		}
		if err != nil || reads > 100 {
			t.Fatalf("read %d: %v", reads, err)
		}
	}
	if !bytes.Equal(got, wire) || g.blocks.Blocks() != streams {
		t.Fatalf("handed on %d of %d bytes, %d blocks of %d", len(got), len(wire), g.blocks.Blocks(), streams)
	}
}
