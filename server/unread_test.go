package server

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestRecvConnOwedAnswers: the answer bytes a connection owes are paid by
// what it writes, oldest first whichever call they are of; an answer the
// transport never took is dropped when its call ends; what a write finds
// nothing owed for is not kept as credit; closing gives back the rest.
// Each step's figures are the caller's unread bytes after it.
func TestRecvConnOwedAnswers(t *testing.T) {
	type step struct {
		name string
		do   func(c *recvConn, a, b *recvCall, write func(int))
		want map[string]int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"writes pay the oldest answers first", []step{
			{"alice owes 100", func(c *recvConn, a, _ *recvCall, _ func(int)) { c.owe(a, 100); c.queued(a) }, map[string]int64{"alice": 100}},
			{"bob owes 50", func(c *recvConn, _, b *recvCall, _ func(int)) { c.owe(b, 50); c.queued(b) }, map[string]int64{"alice": 100, "bob": 50}},
			{"120 written", func(_ *recvConn, _, _ *recvCall, w func(int)) { w(120) }, map[string]int64{"bob": 30}},
			{"100 written: no credit kept", func(_ *recvConn, _, _ *recvCall, w func(int)) { w(100) }, map[string]int64{}},
			{"alice owes 10 more", func(c *recvConn, a, _ *recvCall, _ func(int)) { c.owe(a, 10); c.queued(a) }, map[string]int64{"alice": 10}},
		}},
		{"an answer the transport never took is dropped at the end", []step{
			{"alice owes 100, taken", func(c *recvConn, a, _ *recvCall, _ func(int)) { c.owe(a, 100); c.queued(a) }, map[string]int64{"alice": 100}},
			{"alice owes 70, not taken", func(c *recvConn, a, _ *recvCall, _ func(int)) { c.owe(a, 70) }, map[string]int64{"alice": 170}},
			{"the call ends", func(c *recvConn, a, _ *recvCall, _ func(int)) { c.ended(a) }, map[string]int64{"alice": 100}},
			{"40 written", func(_ *recvConn, _, _ *recvCall, w func(int)) { w(40) }, map[string]int64{"alice": 60}},
		}},
		{"closing gives back everything", []step{
			{"both owe", func(c *recvConn, a, b *recvCall, _ func(int)) { c.owe(a, 100); c.owe(b, 5) }, map[string]int64{"alice": 100, "bob": 5}},
			{"closed", func(c *recvConn, _, _ *recvCall, _ func(int)) { _ = c.Close() }, map[string]int64{}},
			{"owing after the close counts nothing", func(c *recvConn, a, _ *recvCall, _ func(int)) { c.owe(a, 9) }, map[string]int64{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewRecvGuard(&shareBudget{share: 1 << 20, by: map[string]int64{}})
			client, srv := net.Pipe()
			defer client.Close()
			go func() { _, _ = io.Copy(io.Discard, client) }()
			c := &recvConn{Conn: srv, g: g, who: "conn"}
			defer c.Close()
			a, b := &recvCall{owner: "alice"}, &recvCall{owner: "bob"}
			write := func(n int) {
				if _, err := c.Write(make([]byte, n)); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.steps {
				s.do(c, a, b, write)
				var total int64
				for _, who := range []string{"alice", "bob"} {
					if got := g.Unread(who); got != s.want[who] {
						t.Errorf("%s: %s has %d unread, want %d", s.name, who, got, s.want[who])
					}
					total += s.want[who]
				}
				if got := g.UnreadTotal(); got != total {
					t.Errorf("%s: %d unread in all, want %d", s.name, got, total)
				}
			}
		})
	}
}

// TestRecvConnStall: a connection owing answers is closed once a whole
// StallTimeout goes by with under StallProgressBytes of them written,
// and kept while they are written steadily.
func TestRecvConnStall(t *testing.T) {
	const stall = 200 * time.Millisecond
	for _, tc := range []struct {
		name   string
		write  int // bytes written every stall/4
		closed bool
	}{
		{"nothing written", 0, true},
		{"a trickle under the progress", StallProgressBytes / 16, true},
		{"steady", StallProgressBytes / 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewRecvGuard(&shareBudget{share: 1 << 20, by: map[string]int64{}})
			g.StallTimeout = stall
			client, srv := net.Pipe()
			defer client.Close()
			go func() { _, _ = io.Copy(io.Discard, client) }()
			c := &recvConn{Conn: srv, g: g, who: "conn"}
			defer c.Close()
			c.owe(&recvCall{owner: "alice"}, 1<<30)
			for range 12 { // three stall limits
				time.Sleep(stall / 4)
				if tc.write > 0 {
					_, _ = c.Write(make([]byte, tc.write))
				}
			}
			c.mu.Lock()
			closed := c.closed
			c.mu.Unlock()
			if closed != tc.closed || (g.StalledClosed() == 1) != tc.closed {
				t.Errorf("closed %v (%d counted), want %v", closed, g.StalledClosed(), tc.closed)
			}
			if tc.closed && g.Unread("alice") != 0 {
				t.Errorf("%d bytes unread after the close, want 0", g.Unread("alice"))
			}
		})
	}
}
