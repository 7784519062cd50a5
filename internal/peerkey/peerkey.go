// Package peerkey is the key a peer's connections and streams are counted
// under, alike on every listener: an IPv4 address (or a loopback or
// link-local one) itself, an IPv6 address's /64 (one host's block).
package peerkey

import (
	"net"
	"net/netip"
)

// Of is the key of address a.
func Of(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is4() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return a
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a
	}
	return p.Addr()
}

// Remote is the key of a connection's remote address; ok false when it
// has none (a Unix socket).
func Remote(addr net.Addr) (netip.Addr, bool) {
	if ta, ok := addr.(*net.TCPAddr); ok {
		a := ta.AddrPort().Addr()
		return Of(a), a.IsValid()
	}
	if addr == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return Of(ap.Addr()), true
}
