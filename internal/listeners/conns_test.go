package listeners

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMaxConnsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{20000, 17500},           // the attacked daemon's limit: 2,500 kept
		{1024, 768},              // 256 kept
		{1 << 20, 917504},        // systemd's and Docker's common hard limit
		{200, 16},                // too small to keep 256: still some
		{^uint64(0), 1879048192}, // RLIM_INFINITY
	} {
		if got := maxConnsFor(tc.nofile); got != tc.want {
			t.Errorf("maxConnsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
	if n := DefaultMaxConns(); n < 16 {
		t.Errorf("DefaultMaxConns() = %d", n)
	}
}

// metricValue is the value of the sample of name in reg whose listener
// label is listener (and reason label reason, unless "").
func metricValue(t *testing.T, reg *prometheus.Registry, name, listener, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	samples:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if (lp.GetName() == "listener" && lp.GetValue() != listener) || (lp.GetName() == "reason" && lp.GetValue() != reason) {
					continue samples
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// server is a wrapped listener on a real socket whose accepted
// connections arrive on conns.
type server struct {
	lis   net.Listener
	conns chan net.Conn
}

func serve(t *testing.T, l *Limiter, network, addr string) *server {
	t.Helper()
	inner, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{lis: l.Wrap("test", inner), conns: make(chan net.Conn, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := s.lis.Accept()
			if err != nil {
				return
			}
			s.conns <- c
		}
	}()
	t.Cleanup(func() {
		s.lis.Close()
		<-done
		close(s.conns)
		for c := range s.conns {
			c.Close()
		}
	})
	return s
}

// dialFrom connects to s from the loopback address from ("": any); nil
// when the server reset the connection before the dial returned (a
// refusal can be that quick).
func dialFrom(t *testing.T, s *server, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial(s.lis.Addr().Network(), s.lis.Addr().String())
	if errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedSoon reports whether the server closed c (nil: reset at once)
// within wait.
func closedSoon(c net.Conn, wait time.Duration) bool {
	if c == nil {
		return true
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil // io.EOF or a reset
}

// accepted takes the next connection s accepted, or fails t.
func (s *server) accepted(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

func TestLimiterPerPeer(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLimiter(ConnLimits{PerPeer: 3, Total: 100}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	var held []net.Conn
	for range 3 {
		dialFrom(t, s, "127.0.0.1")
		held = append(held, s.accepted(t))
	}
	// Past the cap: closed at once, never handed to the server.
	for range 2 {
		if c := dialFrom(t, s, "127.0.0.1"); !closedSoon(c, 2*time.Second) {
			t.Fatal("a connection past the per-peer cap was not closed")
		}
	}
	if got := metricValue(t, reg, "classifierd_connections_refused_total", "test", RefusedPerPeer); got != 2 {
		t.Errorf("refused per_peer = %v, want 2", got)
	}
	// Another peer has its own share.
	other := dialFrom(t, s, "127.0.0.2")
	oc := s.accepted(t)
	if closedSoon(other, 200*time.Millisecond) {
		t.Fatal("another peer's connection was closed")
	}
	if total, peer := l.Count("127.0.0.1"); total != 4 || peer != 3 {
		t.Errorf("open %d, peer's %d, want 4 and 3", total, peer)
	}
	if got := metricValue(t, reg, "classifierd_connections_open", "test", ""); got != 4 {
		t.Errorf("gauge = %v, want 4", got)
	}
	// Closing twice gives back one place.
	held[0].Close()
	held[0].Close()
	oc.Close()
	if total, peer := l.Count("127.0.0.1"); total != 2 || peer != 2 {
		t.Errorf("after closes: open %d, peer's %d, want 2 and 2", total, peer)
	}
	c := dialFrom(t, s, "127.0.0.1")
	s.accepted(t)
	if closedSoon(c, 200*time.Millisecond) {
		t.Fatal("a connection within the cap again was closed")
	}
	if _, peer := l.Count("127.0.0.1"); peer != 3 {
		t.Errorf("peer's %d, want 3", peer)
	}
}

func TestLimiterTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := NewLimiter(ConnLimits{PerPeer: 0, Total: 2}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	dialFrom(t, s, "127.0.0.1")
	dialFrom(t, s, "127.0.0.2")
	a, b := s.accepted(t), s.accepted(t)
	if c := dialFrom(t, s, "127.0.0.3"); !closedSoon(c, 2*time.Second) {
		t.Fatal("a connection past the total was not closed")
	}
	if got := metricValue(t, reg, "classifierd_connections_refused_total", "test", RefusedTotal); got != 1 {
		t.Errorf("refused total = %v, want 1", got)
	}
	a.Close()
	b.Close()
	if total, _ := l.Count(""); total != 0 {
		t.Errorf("open %d after closing all, want 0", total)
	}
}

// TestLimiterUnix: Unix socket peers have no address, so no per-peer cap,
// but count in the total.
func TestLimiterUnix(t *testing.T) {
	l, err := NewLimiter(ConnLimits{PerPeer: 1, Total: 3}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "unix", filepath.Join(t.TempDir(), "s"))
	for range 3 {
		dialFrom(t, s, "")
		s.accepted(t)
	}
	if c := dialFrom(t, s, ""); !closedSoon(c, 2*time.Second) {
		t.Fatal("a Unix connection past the total was not closed")
	}
}

// TestLimiterConcurrent: accepts and closes (some twice, at once) from
// many goroutines leave nothing counted (run with -race).
func TestLimiterConcurrent(t *testing.T) {
	l, err := NewLimiter(ConnLimits{PerPeer: 8, Total: 12}, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l, "tcp", "127.0.0.1:0")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case c := <-s.conns:
				var cw sync.WaitGroup
				cw.Go(func() { c.Close() })
				cw.Go(func() { c.Close() })
				cw.Wait()
			case <-stop:
				return
			}
		}
	})
	dials := dialStorm(s)
	waitUncounted(t, l)
	close(stop)
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.peers) != 0 {
		t.Errorf("peers still counted: %v", l.peers)
	}
	t.Logf("%d connections", dials)
}

// dialStorm has 16 clients, from 127.0.0.1 to 127.0.0.3, each dial s 30
// times and read each connection until the server closes or refuses it;
// it returns the connections made.
func dialStorm(s *server) int64 {
	var dials atomic.Int64
	var dw sync.WaitGroup
	for i := range 16 {
		dw.Go(func() {
			from := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}[i%3]
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
			for range 30 {
				c, err := d.Dial("tcp", s.lis.Addr().String())
				if err != nil {
					continue
				}
				dials.Add(1)
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}
		})
	}
	dw.Wait()
	return dials.Load()
}

// waitUncounted waits up to 5 s for l to count no open connection: what
// the server accepted last may still be on its way to its closer.
func waitUncounted(t *testing.T, l *Limiter) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		total, _ := l.Count("")
		if total == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted after every one was closed", total)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failingListener fails every Accept with err until closed.
type failingListener struct {
	net.Listener // nil: only Accept, Close and Addr are called
	err          error
	calls        atomic.Int64
	closed       chan struct{}
	onCall       func(n int64) // nil: none
}

func (f *failingListener) Accept() (net.Conn, error) {
	if n := f.calls.Add(1); f.onCall != nil {
		f.onCall(n)
	}
	select {
	case <-f.closed:
		return nil, net.ErrClosed
	default:
		return nil, f.err
	}
}

func (f *failingListener) Close() error { close(f.closed); return nil }

// TestLimiterAcceptBackoff: an accept out of descriptors is retried after
// a growing wait, not at once in a loop; other errors are returned; a
// Close ends the wait.
func TestLimiterAcceptBackoff(t *testing.T) {
	l, err := NewLimiter(ConnLimits{PerPeer: 1, Total: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &failingListener{err: &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}, closed: make(chan struct{})}
	var first, fourth atomic.Int64 // when the 1st and 4th accepts were made
	f.onCall = func(n int64) {
		switch n {
		case 1:
			first.Store(time.Now().UnixNano())
		case 4:
			fourth.Store(time.Now().UnixNano())
		}
	}
	lis := l.Wrap("test", f)
	done := make(chan error, 1)
	go func() { _, err := lis.Accept(); done <- err }()
	for fourth.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// 5, 10 and 20 ms between them at least (a loop without a wait
	// makes them in microseconds); a busy machine only waits longer.
	if gap := time.Duration(fourth.Load() - first.Load()); gap < 35*time.Millisecond {
		t.Errorf("4 accepts out of descriptors within %v, want at least 35ms apart (5, 10, 20 ms)", gap)
	}
	lis.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still waiting after Close")
	}
	g := &failingListener{err: errors.New("boom"), closed: make(chan struct{})}
	if _, err := l.Wrap("test", g).Accept(); err == nil || g.calls.Load() != 1 {
		t.Errorf("another accept error: %v after %d calls, want returned at once", err, g.calls.Load())
	}
}

func TestNewLimiterRefusesNegative(t *testing.T) {
	if _, err := NewLimiter(ConnLimits{PerPeer: -1}, nil, nil); err == nil {
		t.Error("a negative per-peer cap accepted")
	}
	l, err := NewLimiter(ConnLimits{PerPeer: 5}, nil, nil)
	if err != nil || l.Limits().Total != DefaultMaxConns() {
		t.Errorf("total %d (%v), want DefaultMaxConns %d", l.Limits().Total, err, DefaultMaxConns())
	}
	var nl *Limiter
	inner := &failingListener{closed: make(chan struct{})}
	if nl.Wrap("x", inner) != net.Listener(inner) {
		t.Error("a nil Limiter wrapped its listener")
	}
}
