package server

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
)

// shareBudget is a RecvBudget with one bound per holder, as the HTTP
// budget's per-client share: a holder past it must give back.
type shareBudget struct {
	mu    sync.Mutex
	share int64
	by    map[string]int64
}

func (b *shareBudget) Charge(who string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.by[who] += n
	return b.by[who] > b.share
}

func (b *shareBudget) Release(who string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.by[who] -= n
}

func (b *shareBudget) held(who string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.by[who]
}

// TestRecvConnHoldsFromTheOldestReceivingCall: a connection always
// receiving something (a busy hub's, or a hog's beside another
// identity's calls on the same connection) holds only what it read since
// its oldest call still receiving started, so calls that were answered
// do not add up past its share. Counting from the last moment no call
// was receiving, the clean-clone CI saw a hog's answered 250 KB Routes
// end every call of its connection, another identity's too, CANCELLED.
func TestRecvConnHoldsFromTheOldestReceivingCall(t *testing.T) {
	b := &shareBudget{share: 1000, by: map[string]int64{}}
	client, srv := net.Pipe()
	defer client.Close()
	c := &recvConn{Conn: srv, g: NewRecvGuard(b), who: "conn"}
	defer c.Close()
	send := func(n int) {
		t.Helper()
		go func() { _, _ = client.Write(make([]byte, n)) }()
		if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	cancelled := 0
	call := func() *recvCall {
		_, cancel := context.WithCancelCause(context.Background())
		k := &recvCall{cancel: func(err error) { cancelled++; cancel(err) }}
		c.start(k)
		return k
	}

	a := call()
	send(600)
	bc := call()
	send(300)
	if got := b.held("conn"); got != 900 {
		t.Fatalf("held %d with two calls receiving, want 900", got)
	}
	c.done(a) // a's message arrived: only what came since b started is held
	if got := b.held("conn"); got != 300 {
		t.Fatalf("held %d after the oldest call's message arrived, want 300 (read since the next oldest began)", got)
	}
	// Calls overlapping one another, each answered while the next one
	// receives: the connection is never without a call receiving.
	prev := bc
	for i := 0; i < 20; i++ {
		k := call()
		send(400)
		c.done(prev)
		prev = k
		if got := b.held("conn"); got > 1000 {
			t.Fatalf("round %d: held %d while one call receives", i, got)
		}
	}
	if cancelled != 0 {
		t.Fatalf("%d calls cancelled on a connection whose calls were answered", cancelled)
	}
	// Past its share with one call stalled: it is cut.
	send(1200)
	if cancelled == 0 {
		t.Fatal("a connection holding more than its share for a stalled call was not cut")
	}
	bc = prev
	c.done(bc)
	if got := b.held("conn"); got != 0 {
		t.Fatalf("held %d with no call receiving, want 0", got)
	}
}
