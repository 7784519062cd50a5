package rapidreset

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerGone reports whether c's client has closed or reset its end (its
// TCP state is no longer ESTABLISHED): a held connection whose client
// gave up, as a reset loop does at once, is closed rather than handed to
// a server for a handshake and a place of its peer.
func peerGone(c net.Conn) bool {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			gone = info.State != unix.BPF_TCP_ESTABLISHED
		}
	})
	return gone
}
