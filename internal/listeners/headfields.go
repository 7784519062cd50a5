package listeners

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// MaxHeadLines bounds the lines of a request head (request line and header
// fields) on a plaintext HTTP listener, counted as the head arrives: past
// it the connection gets a 431 and is closed, before net/http has parsed
// more. net/http bounds a head only by its bytes (MaxHeaderBytes), and
// keeps each header field it parses as a map entry and strings (about 100
// bytes a field), so 64 KiB of fields of a few bytes ("h1: a") is 6,500
// fields and 0.6 MB held while the head is incomplete, for up to
// ReadHeaderTimeout, before any token is checked: the eleventh hostile
// pass raised the daemon's RSS from 249 to 858 MB with 1,000 such heads
// from one address and no token (64 MB sent). Browsers, curl and the API's
// clients send a few dozen fields; Envoy refuses more than 100.
const MaxHeadLines = 256

// errHeadLines ends a connection whose head has more than MaxHeadLines
// lines.
var errHeadLines = errors.New("request head: too many lines")

// headLinesRefusal is what a connection past MaxHeadLines is told before
// it is closed.
const headLinesRefusal = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 50\r\n\r\nrequest head holds more than 256 header fields\r\n\r\n"

// limitHeadLines serves hs on a plaintext lis with each connection's
// request heads bounded by MaxHeadLines: it wraps the connections and
// hooks hs.ConnState, which tells a connection its next head begins.
func limitHeadLines(hs *http.Server, lis net.Listener) net.Listener {
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		if hc, ok := c.(*headConn); ok && st == http.StateIdle {
			hc.nextHead()
		}
		if prev != nil {
			prev(c, st)
		}
	}
	return headListener{lis}
}

type headListener struct{ net.Listener }

func (l headListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &headConn{Conn: c, inHead: true}, nil
}

// headConn counts the lines of a request head as the server reads it:
// from the connection's start, and again each time the server has
// finished a request (StateIdle), up to the blank line that ends the head.
// What follows (a body) is not counted. Bytes of a pipelined next head
// read with the previous request's (net/http's 4 KiB read buffer) are not
// counted either: a head may pass the bound by what 4 KiB holds, no more.
type headConn struct {
	net.Conn

	mu     sync.Mutex
	inHead bool
	lines  int
	lastNL bool // the last byte other than CR seen in the head was LF
}

func (c *headConn) nextHead() {
	c.mu.Lock()
	c.inHead, c.lines, c.lastNL = true, 0, false
	c.mu.Unlock()
}

func (c *headConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	over := c.inHead && c.scan(p[:n])
	c.mu.Unlock()
	if over {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(RefusalWait))
		_, _ = c.Conn.Write([]byte(headLinesRefusal))
		_ = c.Conn.Close()
		return 0, errHeadLines
	}
	return n, err
}

// RefusalWait bounds the write of a refusal from a connection's wrapper.
const RefusalWait = 5 * time.Second

// scan counts the lines in b, a part of a head; it reports whether the
// head is past MaxHeadLines. At the blank line the head ends.
func (c *headConn) scan(b []byte) bool {
	for _, x := range b {
		switch x {
		case '\n':
			if c.lastNL {
				c.inHead = false
				return false
			}
			c.lastNL = true
			// The request line is a line of the head too.
			if c.lines++; c.lines > MaxHeadLines+1 {
				return true
			}
		case '\r':
		default:
			c.lastNL = false
		}
	}
	return false
}
