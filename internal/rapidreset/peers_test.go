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
