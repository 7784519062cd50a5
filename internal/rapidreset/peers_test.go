package rapidreset

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestResetPeersBounded: the peers' records are bounded, and old ones
// are swept.
func TestResetPeersBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	peers := NewAt(func() time.Time { return now })
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range maxPeers + 100 {
		peers.Ended(addr(i), true, false)
	}
	if n := len(peers.m); n != maxPeers {
		t.Fatalf("%d records, want the bound %d", n, maxPeers)
	}
	now = now.Add(2 * PeerResetWindow)
	peers.Ended(addr(maxPeers+200), true, false)
	if n := len(peers.m); n != 1 {
		t.Fatalf("%d records after the sweep, want 1", n)
	}
}

// TestResetPeerOf: every loopback address and a Unix socket are one peer
// (the thirteenth hostile pass reset from 1,000 loopback addresses, each
// under its share); other addresses are their peerkey.
func TestResetPeerOf(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want netip.Addr
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}, Local},
		{&net.TCPAddr{IP: net.ParseIP("127.9.8.7"), Port: 1}, Local},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, Local},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.2"), Port: 1}, Local},
		{&net.UnixAddr{Name: "@", Net: "unix"}, Local},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, netip.MustParseAddr("192.0.2.7")},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::9"), Port: 1}, netip.MustParseAddr("2001:db8:1:2::")},
	} {
		if got := PeerOf(tc.addr); got != tc.want {
			t.Errorf("PeerOf(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestPipelinedClosesPenalize: a peer whose HTTP/1.1 connections are
// closed for pipelining PeerPipelinedClosesMin times within
// PeerResetWindow is penalized (its new connections past a burst are not
// admitted); fewer, or as many spread over windows, are not; another
// peer is never touched.
func TestPipelinedClosesPenalize(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	peers := NewAt(func() time.Time { return now })
	var logged []netip.Addr
	peers.OnPipelinedPenalty(func(p netip.Addr, closes int64, _ time.Time) {
		if closes != PeerPipelinedClosesMin {
			t.Errorf("penalty logged after %d closes, want %d", closes, PeerPipelinedClosesMin)
		}
		logged = append(logged, p)
	})
	flooder, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	// One window short of the count, then the next window: no penalty.
	for range 2 {
		for range PeerPipelinedClosesMin - 1 {
			if peers.PipelinedClosed(flooder) {
				t.Fatalf("penalized at fewer than %d pipelined closes in a window", PeerPipelinedClosesMin)
			}
			now = now.Add(time.Second)
		}
		now = now.Add(PeerResetWindow)
	}
	if peers.Penalties() != 0 {
		t.Fatalf("%d penalties for %d closes in a window, twice", peers.Penalties(), PeerPipelinedClosesMin-1)
	}
	for i := range PenalizedConnBurst + 4 {
		if !peers.Admit(flooder) {
			t.Fatalf("connection %d of an unpenalized peer not admitted", i)
		}
	}
	for i := range PeerPipelinedClosesMin {
		if got := peers.PipelinedClosed(flooder); got != (i == PeerPipelinedClosesMin-1) {
			t.Fatalf("close %d of %d in a window: penalized %v", i+1, PeerPipelinedClosesMin, got)
		}
	}
	for range 3 * PeerPipelinedClosesMin { // more while penalized: one penalty
		peers.PipelinedClosed(flooder)
	}
	if peers.Penalties() != 1 || peers.PipelinedPenalties() != 1 || len(logged) != 1 || logged[0] != flooder {
		t.Fatalf("penalties %d (pipelined %d), logged %v; want one, of %v", peers.Penalties(), peers.PipelinedPenalties(), logged, flooder)
	}
	if want := int64(2*(PeerPipelinedClosesMin-1) + 4*PeerPipelinedClosesMin); peers.PipelinedCloses() != want {
		t.Fatalf("%d pipelined closes counted, want %d", peers.PipelinedCloses(), want)
	}
	admitted := 0
	for range PenalizedConnBurst + 4 {
		if peers.Admit(flooder) {
			admitted++
		}
	}
	if admitted != PenalizedConnBurst {
		t.Fatalf("the penalized peer had %d new connections admitted at once, want its burst %d", admitted, PenalizedConnBurst)
	}
	for i := range PenalizedConnBurst + 4 {
		if !peers.Admit(other) {
			t.Fatalf("connection %d of another peer not admitted", i)
		}
	}
	now = now.Add(PeerResetPenalty)
	if !peers.Admit(flooder) {
		t.Fatal("the peer's connections still limited after its penalty")
	}
}
