package listeners

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWithUserTimeout: a connection accepted through the wrapper, and
// then through the connection Limiter (which hides its *net.TCPConn from
// grpc-go), carries TCP_USER_TIMEOUT; one accepted without it does not.
func TestWithUserTimeout(t *testing.T) {
	lim, err := NewLimiter(ConnLimits{PerPeer: 4}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		wrap func(net.Listener) net.Listener
		want int
	}{
		{"set before the limiter", func(l net.Listener) net.Listener { return lim.Wrap("grpc", WithUserTimeout(l, GRPCUserTimeout)) }, int(GRPCUserTimeout / time.Millisecond)},
		{"limiter alone", func(l net.Listener) net.Listener { return lim.Wrap("grpc", l) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			lis := tc.wrap(raw)
			defer lis.Close()
			go func() {
				if c, err := net.Dial("tcp", raw.Addr().String()); err == nil {
					defer c.Close()
					time.Sleep(time.Second)
				}
			}()
			c, err := lis.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tcp := c.(*limitedConn).Conn.(*net.TCPConn)
			sc, err := tcp.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			var gerr error
			if err := sc.Control(func(fd uintptr) {
				got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
			}); err != nil || gerr != nil {
				t.Fatal(err, gerr)
			}
			if got != tc.want {
				t.Errorf("TCP_USER_TIMEOUT %d ms, want %d", got, tc.want)
			}
		})
	}
}
