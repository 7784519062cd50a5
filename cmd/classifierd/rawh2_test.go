package main

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2c is a hand-driven HTTP/2 (h2c) connection to a gRPC listener, for
// the frames grpc-go's own client never sends: calls that stop after
// their headers, resets, windows kept shut. Its reader answers the
// server's SETTINGS and PINGs and hands every other frame to onFrame (on
// the reader's goroutine); gone is closed when the server closes the
// connection; served is set once the server's SETTINGS came (a
// connection a penalized peer opened may be held back before). Writes
// are serialized.
type h2c struct {
	nc     net.Conn
	addr   string
	gone   chan struct{}
	served atomic.Bool

	mu  sync.Mutex // fr's writes, hb and enc
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
	// extra are header fields call adds to every call's.
	extra [][2]string
}

// dialH2C starts the connection on nc (to addr, its :authority) with the
// client preface and settings.
func dialH2C(t *testing.T, nc net.Conn, addr string, onFrame func(http2.Frame), settings ...http2.Setting) *h2c {
	t.Helper()
	c, err := startH2C(nc, addr, onFrame, settings...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startH2C is dialH2C returning the error of a connection the server
// closed at once.
func startH2C(nc net.Conn, addr string, onFrame func(http2.Frame), settings ...http2.Setting) (*h2c, error) {
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	c := &h2c{nc: nc, addr: addr, gone: make(chan struct{}), fr: http2.NewFramer(nc, nc)}
	c.enc = hpack.NewEncoder(&c.hb)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.fr.WriteSettings(settings...); err != nil {
		return nil, err
	}
	go func() {
		defer close(c.gone)
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					c.served.Store(true)
					_ = c.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
				}
				continue
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = c.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
				}
				continue
			}
			if onFrame != nil {
				onFrame(f)
			}
		}
	}()
	return c, nil
}

// write runs fn with the framer, alone.
func (c *h2c) write(fn func(*http2.Framer) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fn(c.fr)
}

// call starts stream id's gRPC call of path, with a bearer token unless
// it is "": its headers, then, unless msg is nil, msg as its one message,
// which ends the stream.
func (c *h2c) call(id uint32, path, token string, msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hb.Reset()
	fields := [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", c.addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}}
	if token != "" {
		fields = append(fields, [2]string{"authorization", "Bearer " + token})
	}
	fields = append(fields, c.extra...)
	for _, kv := range fields {
		_ = c.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(), EndHeaders: true}); err != nil || msg == nil {
		return err
	}
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	copy(body[5:], msg)
	return c.fr.WriteData(id, true, body)
}
