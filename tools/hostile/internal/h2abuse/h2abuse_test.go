package h2abuse

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

// peer accepts one connection on a loopback listener, reads the preface and
// then every frame until the client closes, and sends what it saw.
func peer(t *testing.T) (string, <-chan []http2.Frame) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen := make(chan []http2.Frame, 1)
	go func() {
		var got []http2.Frame
		defer func() { seen <- got }()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			got = append(got, f)
		}
	}()
	return ln.Addr().String(), seen
}

func config(addr, mode string, out io.Writer) Config {
	return Config{Addr: addr, Mode: mode, Path: "/p", Token: "t", Conns: 1, Streams: 1, Len: 16, Chunk: 1,
		Hold: time.Minute, Read: true, Per: 3, Out: out,
		Fields: func() []hpack.HeaderField {
			return append(probe.Head("POST", "http", "/p", addr, "application/grpc"), probe.Bearer("t")...)
		}}
}

// TestRstPer: -mode rst -per 3 sends three HEADERS (with the command's
// fields), each reset, then closes, and reports three sent.
func TestRstPer(t *testing.T) {
	addr, seen := peer(t)
	var out bytes.Buffer
	Run(config(addr, "rst", &out))
	var heads, rsts []uint32
	for _, f := range <-seen {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			heads = append(heads, f.StreamID)
			if f.PseudoValue("path") != "/p" {
				t.Errorf(":path %q", f.PseudoValue("path"))
			}
		case *http2.RSTStreamFrame:
			rsts = append(rsts, f.StreamID)
		}
	}
	if len(heads) != 3 || len(rsts) != 3 || heads[2] != 5 || rsts[2] != 5 {
		t.Fatalf("HEADERS on %v, RST_STREAM on %v; want streams 1, 3, 5 each", heads, rsts)
	}
	if !strings.HasPrefix(out.String(), "         3  frames (or streams) sent in all, ") {
		t.Fatalf("report %q", out.String())
	}
}

// TestContLitOffered: without ContLit (h2f11b) the mode contlit is unknown:
// the connection ends with that error before any request.
func TestContLitOffered(t *testing.T) {
	addr, seen := peer(t)
	var out bytes.Buffer
	Run(config(addr, "contlit", &out))
	for _, f := range <-seen {
		if f.Header().Type == http2.FrameHeaders {
			t.Fatalf("a request was sent: %v", f)
		}
	}
	if !strings.Contains(out.String(), `conn end: mode "contlit"`) {
		t.Fatalf("report %q", out.String())
	}
}
