package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/server"
)

// headersOnly opens a connection to addr and starts streams calls of path
// (with token, if any) that send their headers and never their message.
// The returned func counts the grpc-status values the calls ended with so
// far, and under "closed" those the server's close of the connection
// ended, or kept from being sent (the early-reset rule closes a
// connection whose calls are mostly refused for the waiting cap), and
// under "held" those of a connection the server has not yet served (the
// new connections of a penalized peer wait their turn unread).
func headersOnly(t *testing.T, src, addr, path, token string, streams int) (net.Conn, func() map[string]int) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ended := map[string]int{}
	statuses := 0
	c, err := startH2C(nc, addr, func(f http2.Frame) {
		if f, ok := f.(*http2.MetaHeadersFrame); ok {
			for _, h := range f.Fields {
				if h.Name == "grpc-status" {
					mu.Lock()
					ended[h.Value]++
					statuses++
					mu.Unlock()
				}
			}
		}
	})
	if err != nil { // closed at accept
		return nc, func() map[string]int { return map[string]int{"closed": streams} }
	}
	for s := range streams {
		if err := c.call(uint32(2*s+1), path, token, nil); err != nil {
			break // closed by the server: counted below
		}
	}
	return nc, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range ended {
			out[k] = v
		}
		select {
		case <-c.gone:
			out["closed"] = streams - statuses
		default:
			if !c.served.Load() {
				out["held"] = streams
			}
		}
		return out
	}
}

// TestGRPCHeadersOnlyCallsBounded: gRPC calls that send their headers and
// never their message hold a goroutine and their stream each until
// --recv-timeout, and cost the body budget nothing. The tenth hostile
// pass held 1,000 connections × 64 health Checks with no token (health
// needs none): 67,022 goroutines, RSS 226 → 1,097 MB, renewable every
// 10 s; with any token, as many of any method. A caller (the peer's host
// without a token) now has at most server.MaxWaitingPerCaller calls
// waiting for their message, and callers with no identity
// server.MaxWaitingAnonymous together; the rest are refused
// RESOURCE_EXHAUSTED from their headers, and another identity's Routes
// are answered throughout.
func TestGRPCHeadersOnlyCallsBounded(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	share := server.MaxWaitingPerCaller
	for _, tc := range []struct {
		name, path, token string
		peers             int
	}{
		{"health Check, no token", "/grpc.health.v1.Health/Check", "", 1},
		{"GetIndexInfo, a route token", "/classifier.v1.ClassifierService/GetIndexInfo", aliceToken, 1},
		// Charged to the body budget, these filled it and every identity's
		// calls were refused: calls with no identity are counted apart.
		{"health Check, no token, 20 peers", "/grpc.health.v1.Health/Check", "", 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A daemon each: the early-reset rule penalizes the local peer
			// whose connections were mostly refused, for the next case too.
			maddr, addr := freeAddr(t), freeAddr(t)
			_, conn := opsDaemon(t, addr, insecureDial, "--index", idx, "--auth-token-file", recvTokens(t), "--metrics-listen", maddr,
				"--recv-timeout", "60s")
			c := pb.NewClassifierServiceClient(conn)
			if _, err := c.Route(bearerCtx(context.Background(), bobToken), &pb.RouteRequest{Query: "warm up"}); err != nil {
				t.Fatal(err)
			}
			waitMetric(t, maddr, "go_goroutines", 1)
			base := goroutines(t, maddr)
			stop := make(chan struct{})
			victim := victimRoutes(t, c, bobToken, stop)
			const conns, streams = 20, 64
			var counts []func() map[string]int
			for i := range conns {
				src := fmt.Sprintf("127.0.0.%d", 1+i%tc.peers)
				nc, st := headersOnly(t, src, addr, tc.path, tc.token, streams)
				defer nc.Close()
				counts = append(counts, st)
			}
			time.Sleep(5 * time.Second)
			held := goroutines(t, maddr) - base
			close(stop)
			v := <-victim
			ended := map[string]int{}
			for _, st := range counts {
				for k, n := range st() {
					ended[k] += n
				}
			}
			// Each held call is its handler's goroutine and its stream's
			// context watcher; each connection a few of its own.
			limit := float64(conns*perConnGoroutines + 2*share*tc.peers + goroutineSlack)
			t.Logf("%d connections × %d calls sending no message: +%.0f goroutines held (limit %.0f); ended %v; victim %v; load %s",
				conns, streams, held, limit, ended, v, loadavg())
			if held > limit {
				t.Errorf("+%.0f goroutines held by calls with no message, want at most %.0f (%d calls of one caller)", held, limit, share)
			}
			// Refused RESOURCE_EXHAUSTED, ended by the close of their
			// connection (caught for being mostly refused), or held back
			// unread with their connection (the local peer penalized); a
			// connection's worth may be on its way (a connection let in
			// from the held ones just now).
			if want := conns*streams - min(share*tc.peers, server.MaxWaitingAnonymous) - streams; tc.peers == 1 && ended["8"]+ended["closed"]+ended["held"] < want {
				t.Errorf("%d calls refused RESOURCE_EXHAUSTED, %d closed and %d held back, want at least %d in all (ended %v)",
					ended["8"], ended["closed"], ended["held"], want, ended)
			}
			if len(v.errs) > 0 || len(v.lat) == 0 {
				t.Errorf("victim's Routes: %v (first error %v), want every one answered", v, firstErr(v.errs))
			}
		})
	}
}
