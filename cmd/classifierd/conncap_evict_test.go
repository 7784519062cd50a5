package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// unauthenticatedKeepAlive makes one HTTP/1.1 request on each of cs with
// no token, reads its 401 and leaves the connection open (keep-alive),
// as the fifth hostile pass's attacker did.
func unauthenticatedKeepAlive(t *testing.T, cs []net.Conn) {
	t.Helper()
	for i, c := range cs {
		if c == nil {
			t.Fatalf("connection %d reset within the cap", i)
		}
		if _, err := io.WriteString(c, "POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\n"+
			"Content-Type: application/json\r\nContent-Length: 0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("connection %d, no token: %s, want 401", i, resp.Status)
		}
		_ = c.SetReadDeadline(time.Time{})
	}
}

// TestHostileConnectionsUnauthenticatedEvicted: with a token file, a peer
// that holds --max-conns-per-peer with connections that never
// authenticate (HTTP keep-alive after a 401: kept until --idle-timeout)
// no longer locks out a client with a valid token from the same address:
// its new connection takes the place of the oldest unauthenticated one,
// and once it has carried an authenticated call it is never evicted for
// another. The fifth hostile pass's open MED: before, the new connection
// was reset (refused per_peer) and this test fails.
func TestHostileConnectionsUnauthenticatedEvicted(t *testing.T) {
	const cap = 64
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, maddr := freeAddr(t), freeAddr(t)
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens,
		"--http-listen", httpAddr, "--metrics-listen", maddr, "--max-conns-per-peer", "64")
	waitFor(t, d, "classifierd serving HTTP/JSON")

	held := dialFrom(t, "127.0.0.2", httpAddr, cap)
	unauthenticatedKeepAlive(t, held)
	waitMetric(t, maddr, `classifierd_connections_open{listener="http"}`, cap)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := clientFrom(t, "127.0.0.2", d.addr)
	if _, err := c.Route(bearerCtx(ctx, aliceToken), &pb.RouteRequest{Query: "check my github notifications"}); err != nil {
		t.Fatalf("Route with a valid token from a peer holding its cap unauthenticated: %v", err)
	}
	if n := closedWithin(held[:1], 2*time.Second); n != 1 {
		t.Error("the oldest unauthenticated connection was not evicted")
	}
	if n := closedWithin(held[1:], 200*time.Millisecond); n != 0 {
		t.Errorf("%d more unauthenticated connections closed, want only the oldest", n)
	}

	// Another cap's worth of unauthenticated connections, one after
	// another, takes the places of the 63 left and, the last of them, of
	// the first of them: never the authenticated client's, by then the
	// oldest connection of the peer.
	var more []net.Conn
	for range cap {
		c := dialFrom(t, "127.0.0.2", httpAddr, 1)
		unauthenticatedKeepAlive(t, c)
		more = append(more, c...)
	}
	if n := closedWithin(held, 2*time.Second); n != cap {
		t.Errorf("%d of the first %d unauthenticated connections evicted, want all", n, cap)
	}
	if n := closedWithin(more[:1], 2*time.Second); n != 1 {
		t.Error("the oldest unauthenticated connection (the first of the second round) was not evicted")
	}
	if n := closedWithin(more[1:], 200*time.Millisecond); n != 0 {
		t.Errorf("%d newer unauthenticated connections closed, want none", n)
	}
	if _, err := c.Route(bearerCtx(ctx, aliceToken), &pb.RouteRequest{Query: "check my github notifications"}); err != nil {
		t.Fatalf("the authenticated client after more unauthenticated connections: %v", err)
	}
	m := scrape(t, maddr)
	if got := m[`classifierd_connections_evicted_total{listener="http",reason="per_peer"}`]; got != cap+1 {
		t.Errorf("evicted on http per_peer = %v, want %d", got, cap+1)
	}
	if got := m[`classifierd_connections_evicted_total{listener="grpc",reason="per_peer"}`]; got != 0 {
		t.Errorf("the authenticated gRPC connection was evicted (%v)", got)
	}
	if got := m[`classifierd_connections_refused_total{listener="grpc",reason="per_peer"}`]; got != 0 {
		t.Errorf("refused on grpc per_peer = %v, want 0", got)
	}
}
