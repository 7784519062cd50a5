package peerkey

import (
	"net/netip"
	"testing"
)

// TestOf: an IPv4 (or IPv4-mapped, loopback, link-local) address is its
// own key, an IPv6 address its /64.
func TestOf(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"}, // IPv4-mapped: the IPv4 peer
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:bbbb:cccc:dddd:eeee", "2001:db8:1:2::"}, // the same /64
		{"2001:db8:1:3::1", "2001:db8:1:3::"},                  // another
		{"::1", "::1"},
		{"fe80::1%eth0", "fe80::1"}, // link-local: whole, every host shares fe80::/64
		{"fe80::2", "fe80::2"},
	} {
		if got := Of(netip.MustParseAddr(tc.addr)).String(); got != tc.want {
			t.Errorf("Of(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}
