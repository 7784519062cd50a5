package rapidreset

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestTarpitHoldsPenalizedConnections: the new connections of a
// penalized peer past its burst are held back, not closed, and handed to
// Accept in their order, a place every 1/PenalizedConnsPerSecond; the
// listener's Close closes those still held.
func TestTarpitHoldsPenalizedConnections(t *testing.T) {
	_, inner, lis := penalizedListener(t)

	const n = PenalizedConnBurst + 3
	for i := range n {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // accepted in this order
	}
	start := time.Now()
	for i := range n {
		c, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || int(b[0]) != i {
			t.Fatalf("accepted connection %d: %v %v, want the %d-th dialled", i, b, err, i)
		}
		if past := i - PenalizedConnBurst + 1; past > 0 && took < time.Duration(past-1)*time.Second/PenalizedConnsPerSecond {
			t.Errorf("connection %d handed over after %v: sooner than a place a second", i, took)
		}
		c.Close()
	}

	// Held when the listener closes: closed.
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitHeld(t, lis.(*tarpit), 1)
	lis.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Errorf("a held connection after Close: read %v, want it closed", err)
	}
	if _, err := lis.Accept(); err == nil {
		t.Error("Accept after Close returned a connection")
	}
}

// TestTarpitQueueBounded: past PenalizedConnsQueued held connections, a
// penalized peer's new ones are closed at once.
func TestTarpitQueueBounded(t *testing.T) {
	peers, inner, lis := penalizedListener(t)
	for range PenalizedConnBurst {
		peers.Admit(remotePeer) // the burst used
	}
	go func() { // Accept starts the loops; what it hands over is dropped
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for range PenalizedConnsQueued + 10 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for end := time.Now().Add(10 * time.Second); peers.Refused() < 10-2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d refused with %d held, want the ones past %d", peers.Refused(), held(lis.(*tarpit)), PenalizedConnsQueued)
		}
	}
	if h := held(lis.(*tarpit)); h > PenalizedConnsQueued {
		t.Errorf("%d held, want at most %d", h, PenalizedConnsQueued)
	}
}

func held(l *tarpit) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

func waitHeld(t *testing.T, l *tarpit, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); held(l) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d held, want %d", held(l), n)
		}
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestTarpitDropsGoneConnections: a held connection whose client closed
// it is dropped, and takes no place of its peer: the live one behind it
// is handed over first.
func TestTarpitDropsGoneConnections(t *testing.T) {
	peers, inner, lis := penalizedListener(t)
	for range PenalizedConnBurst {
		peers.Admit(remotePeer) // the burst used
	}
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var dead []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, c)
	}
	live, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.Write([]byte("L")); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, lis.(*tarpit), 4)
	for _, c := range dead {
		c.Close()
	}
	select {
	case c := <-accepted:
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != 'L' {
			t.Fatalf("first connection handed over: %q %v, want the live one", b, err)
		}
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the live connection was not handed over")
	}
}

// remotePeer is the address remoteListener gives its connections: a
// peer that is not Local.
var remotePeer = netip.MustParseAddr("192.0.2.77")

// remoteListener is a loopback listener whose connections say they come
// from remotePeer.
type remoteListener struct{ net.Listener }

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{c}, nil
}

type remoteConn struct{ net.Conn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: remotePeer.AsSlice(), Port: 4242}
}

func (c remoteConn) NetConn() net.Conn { return c.Conn }

// penalizedListener is a tarpit on a loopback port whose connections
// come from remotePeer, penalized (one of its connections was caught),
// and the port it wraps; closed when the test ends.
func penalizedListener(t *testing.T) (*Peers, net.Listener, net.Listener) {
	t.Helper()
	peers := New()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := peers.Listener(remoteListener{inner}, nil)
	t.Cleanup(func() { lis.Close() })
	peers.Ended(remotePeer, false, true)
	return peers, inner, lis
}

// TestTarpitHoldsLocalBriefly: the local peer, penalized, has every new
// connection served, none refused, past its burst after LocalMaxHold at
// most (every local agent is that peer: held like a remote one, any local
// process with no token kept the others waiting, the fourteenth hostile
// pass).
func TestTarpitHoldsLocalBriefly(t *testing.T) {
	peers := New()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := peers.Listener(inner, nil)
	defer lis.Close()
	peers.Ended(Local, false, true)
	const n = PenalizedConnsQueued + 3*PenalizedConnBurst
	go func() {
		for range n {
			if c, err := net.Dial("tcp", inner.Addr().String()); err == nil {
				defer c.Close()
			}
		}
		time.Sleep(5 * time.Second)
	}()
	for range n {
		c, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if peers.Refused() != 0 || peers.Held() == 0 {
		t.Fatalf("%d local connections: %d refused, %d held; want every one served, some held first", n, peers.Refused(), peers.Held())
	}
}
