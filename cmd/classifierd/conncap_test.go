package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/testdaemon"
	"github.com/classifierd/classifierd/internal/testproc"
)

// dialFrom opens n raw TCP connections to addr from the loopback address
// from (Linux answers for all of 127.0.0.0/8), sending nothing; they are
// closed when t ends. A connection the daemon reset before the dial
// returned (a refusal can be that quick) is a nil.
func dialFrom(t *testing.T, from, addr string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	out := make([]net.Conn, 0, n)
	for range n {
		c, err := d.Dial("tcp", addr)
		if errors.Is(err, syscall.ECONNRESET) {
			out = append(out, nil)
			continue
		}
		if err != nil {
			t.Fatalf("dial %d from %s: %v", len(out), from, err)
		}
		out = append(out, c)
	}
	t.Cleanup(func() {
		for _, c := range out {
			if c != nil {
				c.Close()
			}
		}
	})
	return out
}

// closedWithin counts the connections of cs the daemon closed (EOF or a
// reset; nil: reset before the dial returned) within wait, reading them
// all at once.
func closedWithin(cs []net.Conn, wait time.Duration) int {
	var n atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(wait)
	for _, c := range cs {
		if c == nil {
			n.Add(1)
			continue
		}
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// clientFrom is a gRPC client whose connection comes from the loopback
// address from.
func clientFrom(t *testing.T, from, addr string) pb.ClassifierServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewClassifierServiceClient(conn)
}

// waitMetric polls /metrics at maddr until sample is at least want.
func waitMetric(t *testing.T, maddr, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := scrape(t, maddr)[sample]
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want at least %v", sample, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHostileConnectionsPerPeer: one peer that opens more connections
// than --max-conns-per-peer has the ones past it closed as soon as they
// are accepted, on the gRPC, HTTP/JSON and MCP listeners alike (one
// count for all), while other peers' clients, an open connection and new ones,
// go on being answered. The fourth hostile pass held 20,500 connections
// from one peer, every descriptor of the daemon: another client's Route
// p99 2.3 s, and 140 "accept4: too many open files". With
// --max-conns-per-peer 0 the 64 past the cap stay open (until the 10 s
// handshake bound) and this test fails.
func TestHostileConnectionsPerPeer(t *testing.T) {
	const cap, more = 64, 32
	httpAddr, mcpAddr, maddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, conn := startDaemon(t, genIndex(t, "testdata/mini.json"), "--http-listen", httpAddr, "--mcp-listen", mcpAddr,
		"--metrics-listen", maddr, "--max-conns-per-peer", "64")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	route := func(c pb.ClassifierServiceClient, who string) {
		t.Helper()
		if _, err := c.Route(ctx, &pb.RouteRequest{Query: "check my github notifications"}); err != nil {
			t.Fatalf("%s: Route during the flood: %v", who, err)
		}
	}
	route(pb.NewClassifierServiceClient(conn), "warm-up")

	// The attacker, 127.0.0.2: the cap's worth on gRPC, accepted and
	// held (no preface sent: 10 s each), then more on both listeners.
	held := dialFrom(t, "127.0.0.2", d.addr, cap)
	waitMetric(t, maddr, `classifierd_connections_open{listener="grpc"}`, cap+1) // and the test's client
	var past []net.Conn
	for _, addr := range []string{d.addr, httpAddr, mcpAddr} {
		past = append(past, dialFrom(t, "127.0.0.2", addr, more)...)
	}
	start := time.Now()
	closed := closedWithin(past, 2*time.Second)
	t.Logf("%d of %d connections past the cap closed within %.1fs", closed, len(past), time.Since(start).Seconds())
	if closed != len(past) {
		t.Errorf("%d of the %d connections past --max-conns-per-peer %d closed within 2s, want all", closed, len(past), cap)
	}
	if n := closedWithin(held, 200*time.Millisecond); n != 0 {
		t.Errorf("%d of the %d connections within the cap closed, want none", n, cap)
	}

	// While the flood is held: the open client, a new gRPC client from
	// another address, and a new HTTP/JSON client (127.0.0.1) answer.
	route(pb.NewClassifierServiceClient(conn), "the open connection")
	route(clientFrom(t, "127.0.0.3", d.addr), "a new client from 127.0.0.3")
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Post("http://"+httpAddr+"/classifier.v1.ClassifierService/Route", "application/json",
		strings.NewReader(`{"query":"check my github notifications"}`))
	if err != nil {
		t.Fatalf("HTTP/JSON Route during the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP/JSON Route during the flood: %s", resp.Status)
	}
	m := scrape(t, maddr)
	for _, l := range []string{"grpc", "http", "mcp"} {
		if got := m[`classifierd_connections_refused_total{listener="`+l+`",reason="per_peer"}`]; got != more {
			t.Errorf("refused on %s: %v, want %d", l, got, more)
		}
	}
	if !strings.Contains(d.stderr.String(), "peer=127.0.0.2 ") {
		t.Errorf("no refusal of 127.0.0.2 logged:\n%s", lastLines(d.stderr.String(), 5))
	}
	if n := strings.Count(d.stderr.String(), "connections refused"); n != 1 {
		t.Errorf("%d refusal lines for %d refusals, want 1 (one per 10 s)", n, len(past))
	}
}

// TestHostileConnectionsTotal: connections from peers within their cap
// that together would take every descriptor of the daemon (a limit of
// 600 here) are closed past --max-conns' default, derived from the
// limit, so that the daemon never runs out: no "too many open files",
// and its open client is answered. With --max-conns 100000 the daemon
// runs out (accept fails, the flood waits in the backlog) and this test
// fails.
func TestHostileConnectionsTotal(t *testing.T) {
	const nofile, flood = 600, 800
	wantTotal := nofile - 256 // DefaultMaxConns at this limit
	addr := freeAddr(t)
	args := append([]string{"--index", genIndex(t, "testdata/mini.json")}, testdaemon.Args(t, addr)...)
	bin := testdaemon.Binary(t, "./cmd/classifierd")
	p := testproc.Start(t, exec.Command("sh", append([]string{"-c", `ulimit -n ` + strconv.Itoa(nofile) + ` && exec "$0" "$@"`, bin}, args...)...))
	d, conn := serving(t, addr, p, 30*time.Second, grpc.WithTransportCredentials(insecure.NewCredentials()))
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Route(ctx, &pb.RouteRequest{Query: "check my github notifications"}); err != nil {
		t.Fatal(err)
	}
	// From three peers, each well within --max-conns-per-peer (1,024).
	var cs []net.Conn
	for i, from := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		n := flood / 3
		if i == 0 {
			n += flood % 3
		}
		cs = append(cs, dialFrom(t, from, d.addr, n)...)
	}
	closed := closedWithin(cs, 3*time.Second)
	t.Logf("descriptor limit %d: %d of %d connections closed at once (the test's client holds one place)", nofile, closed, flood)
	if want := flood - (wantTotal - 1); closed != want {
		t.Errorf("%d of %d connections closed at once, want %d (past --max-conns %d)", closed, flood, want, wantTotal)
	}
	if _, err := c.Route(ctx, &pb.RouteRequest{Query: "check my github notifications"}); err != nil {
		t.Errorf("Route on the open connection while the listeners are full: %v", err)
	}
	if strings.Contains(d.stderr.String(), "too many open files") {
		t.Errorf("the daemon ran out of descriptors:\n%s", lastLines(d.stderr.String(), 5))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestConnCapFlags: --max-conns-per-peer and --max-conns reach the
// daemon's and the proxy's configuration, with their defaults, and
// negative values are refused.
func TestConnCapFlags(t *testing.T) {
	daemonArgs := []string{"--model", "m", "--index", "a.idx"}
	proxyArgs := []string{"--config", "mcp.json", "--model", "m"}
	for _, tc := range []struct {
		name           string
		args           []string
		perPeer, total int
		wantErr        string
	}{
		{"defaults", nil, 1024, 0, ""},
		{"set", []string{"--max-conns-per-peer", "8", "--max-conns", "100"}, 8, 100, ""},
		{"per-peer off", []string{"--max-conns-per-peer", "0"}, 0, 0, ""},
		{"negative per peer", []string{"--max-conns-per-peer", "-1"}, 0, 0, "must not be negative"},
		{"negative total", []string{"--max-conns", "-1"}, 0, 0, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(append(slices.Clone(daemonArgs), tc.args...), io.Discard)
			p, perr := parseProxyFlags(append(slices.Clone(proxyArgs), tc.args...), io.Discard)
			for what, e := range map[string]error{"daemon": err, "proxy": perr} {
				if tc.wantErr == "" && e != nil || tc.wantErr != "" && (e == nil || !strings.Contains(e.Error(), tc.wantErr)) {
					t.Errorf("%s: %v, want %q", what, e, tc.wantErr)
				}
			}
			if tc.wantErr != "" {
				return
			}
			if c.Ops.MaxConnsPerPeer != tc.perPeer || c.Ops.MaxConns != tc.total || p.MaxConnsPerPeer != tc.perPeer || p.MaxConns != tc.total {
				t.Errorf("daemon %d/%d, proxy %d/%d, want %d/%d", c.Ops.MaxConnsPerPeer, c.Ops.MaxConns, p.MaxConnsPerPeer, p.MaxConns, tc.perPeer, tc.total)
			}
		})
	}
}
