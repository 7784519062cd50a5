package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/server"
)

// rapidResets opens a connection to addr and sends n health Checks (no
// token) each as HEADERS then RST_STREAM, never their message, reading
// what comes back; it returns the connection and a channel closed when the
// server closes it.
func rapidResets(t *testing.T, addr string, n int) (net.Conn, <-chan struct{}) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// The server's refusals are read (and dropped) so that they do not
	// block it.
	c := dialH2C(t, nc, addr, nil)
	go func() {
		for s := range n {
			id := uint32(2*s + 1)
			if c.call(id, "/grpc.health.v1.Health/Check", "", nil) != nil ||
				c.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }) != nil {
				return
			}
		}
	}()
	return nc, c.gone
}

// TestGRPCRapidResetsClosed: a client that opens gRPC calls and resets
// each before its message (HTTP/2 "rapid reset") cost the daemon a
// handler and its teardown per call and the client nothing. In the
// eleventh hostile pass 4 connections with no token sent 55,000 a second:
// the daemon used 1.4 cores and another identity's small Route went from
// p50 1.7 ms to 214-373 ms; 200 connections raised RSS to 2.2 GB. A
// connection with rapidreset.EarlyResetsMin such calls, more than half of its
// calls, is now read no further and closed; a connection whose calls
// send their message is never closed, and another identity's Routes are
// answered throughout.
func TestGRPCRapidResetsClosed(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	addr := freeAddr(t)
	_, conn := opsDaemon(t, addr, insecureDial, "--index", idx, "--auth-token-file", recvTokens(t))
	c := pb.NewClassifierServiceClient(conn)
	ctx := bearerCtx(context.Background(), bobToken)
	if _, err := c.Route(ctx, &pb.RouteRequest{Query: "warm up"}); err != nil {
		t.Fatal(err)
	}
	t.Run("resets before the message: closed", func(t *testing.T) {
		const conns = 4
		var gone []<-chan struct{}
		for range conns {
			nc, g := rapidResets(t, addr, 20*rapidreset.EarlyResetsMin)
			defer nc.Close()
			gone = append(gone, g)
		}
		// Another identity's Routes are answered meanwhile.
		for i := range 20 {
			if _, err := c.Route(ctx, &pb.RouteRequest{Query: "open a pull request"}); err != nil {
				t.Fatalf("bob's Route %d during the resets: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		deadline := time.After(15 * time.Second)
		for i, g := range gone {
			select {
			case <-g:
			case <-deadline:
				t.Fatalf("connection %d of %d resetting %d calls before their message still open after %v (load %s)",
					i+1, conns, 20*rapidreset.EarlyResetsMin, 15*time.Second, loadavg())
			}
		}
	})
	t.Run("calls with their message: kept", func(t *testing.T) {
		// The resets above took the local peer's health checks
		// (server.HealthChecksPerSecond): they come back.
		time.Sleep(time.Duration(server.HealthCheckBurst/server.HealthChecksPerSecond+1) * time.Second)
		// On one connection, many calls with their message, answered:
		// the connection stays open.
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(60 * time.Second))
		statuses := make(chan string, 16)
		h := dialH2C(t, nc, addr, func(f http2.Frame) {
			if f, ok := f.(*http2.MetaHeadersFrame); ok {
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" {
						statuses <- hf.Value
					}
				}
			}
		})
		n := 4 * rapidreset.EarlyResetsMin
		for s := range n {
			if err := h.call(uint32(2*s+1), "/grpc.health.v1.Health/Check", "", []byte{}); err != nil {
				t.Fatal(err)
			}
			// Each answered before the next: under MaxConcurrentStreams.
			select {
			case st := <-statuses:
				if st != "0" {
					t.Fatalf("call %d: grpc-status %s", s+1, st)
				}
			case <-h.gone:
				t.Fatalf("call %d of %d with its message: the connection was closed", s+1, n)
			}
		}
		// Calls cancelled after their message was sent are not early resets.
		for range 4 * rapidreset.EarlyResetsMin {
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = c.Route(cctx, &pb.RouteRequest{Query: "search the web"})
			}()
			time.Sleep(time.Millisecond)
			cancel()
			<-done
		}
		if _, err := c.Route(ctx, &pb.RouteRequest{Query: "open a pull request"}); err != nil {
			t.Fatalf("bob's Route after his own cancellations: %v", err)
		}
	})
}

// TestGRPCRapidResetsAcrossConnections: a client that resets
// rapidreset.EarlyResetsMin-1 calls on a connection, closes it and opens
// another (the twelfth hostile pass: 50,000 resets a second over 1,000 new
// connections a second, never caught by the rule per connection), from
// another loopback address than the other clients' (the thirteenth: each
// loopback address was a peer), is caught by its peer's count: the local
// peer is penalized and most of its new connections are closed at
// accept, while another identity's open connection is answered
// throughout, and a new one gets in once the flood stops.
func TestGRPCRapidResetsAcrossConnections(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	addr, maddr := freeAddr(t), freeAddr(t)
	d, conn := opsDaemon(t, addr, insecureDial, "--index", idx, "--auth-token-file", recvTokens(t), "--metrics-listen", maddr)
	c := pb.NewClassifierServiceClient(conn)
	ctx := bearerCtx(context.Background(), bobToken)
	if _, err := c.Route(ctx, &pb.RouteRequest{Query: "warm up"}); err != nil {
		t.Fatal(err)
	}
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}, Timeout: 5 * time.Second}
	// Enough connections of EarlyResetsMin-1 resets each for the peer's
	// PeerEarlyResetsMin; each is closed by the client once the server
	// has read its resets (a call sent after them, with its message, is
	// answered).
	conns := rapidreset.PeerEarlyResetsMin/(rapidreset.EarlyResetsMin-1) + 1
	for i := range conns {
		nc, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		answered := make(chan struct{}, 1)
		h := dialH2C(t, nc, addr, func(f http2.Frame) {
			if f, ok := f.(*http2.MetaHeadersFrame); ok && f.StreamID == 2*uint32(rapidreset.EarlyResetsMin)-1 {
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" {
						answered <- struct{}{}
					}
				}
			}
		})
		// The last connection is caught by the peer's count, reached
		// during it: the server may close it while it is written.
		last := i == conns-1
		for s := range rapidreset.EarlyResetsMin - 1 {
			id := uint32(2*s + 1)
			if err = h.call(id, "/grpc.health.v1.Health/Check", "", nil); err != nil {
				break
			}
			if err = h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }); err != nil {
				break
			}
		}
		if err == nil {
			err = h.call(2*uint32(rapidreset.EarlyResetsMin)-1, "/grpc.health.v1.Health/Check", "", []byte{})
		}
		if err != nil {
			if !last {
				t.Fatalf("connection %d of %d early resets: %v", i, rapidreset.EarlyResetsMin-1, err)
			}
			nc.Close()
			continue
		}
		select {
		case <-answered:
		case <-h.gone:
			// One before the last closed: the rule per connection caught it.
			if !last {
				t.Fatalf("connection %d with %d early resets was closed: the rule per connection caught it", i, rapidreset.EarlyResetsMin-1)
			}
		}
		nc.Close()
	}
	for end := time.Now().Add(10 * time.Second); scrape(t, maddr)["classifierd_grpc_reset_penalties_total"] < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no penalty after %d early resets of one peer", conns*(rapidreset.EarlyResetsMin-1))
		}
	}

	// The penalized peer is local: its new connections are all served,
	// held LocalMaxHold at most (held like a remote peer's, every local
	// agent's waited behind the resetter's, the fourteenth hostile pass),
	// and one that resets its calls is closed at its
	// PenalizedEarlyResetsMin-th.
	const tries = 12
	for i := range tries {
		nc, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		h := dialH2C(t, nc, addr, nil)
		for end := time.Now().Add(30 * time.Second); !h.served.Load(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("the penalized local peer's new connection %d: no SETTINGS from the server", i)
			}
		}
		nc.Close()
	}
	if n := scrape(t, maddr)["classifierd_grpc_penalized_connections_refused_total"]; n != 0 {
		t.Errorf("%v new connections of the local peer refused, want none (held %v s at most)", n, rapidreset.LocalMaxHold.Seconds())
	}
	_, gone := rapidResets(t, addr, 4*rapidreset.EarlyResetsMin)
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Errorf("a penalized peer's connection resetting %d calls was not closed", 4*rapidreset.EarlyResetsMin)
	}
	if !strings.Contains(d.stderr.String(), `peer="local (loopback or Unix socket)"`) {
		t.Errorf("the penalty is not logged with its peer:\n%s", lastLines(d.stderr.String(), 5))
	}

	// Another identity on the local peer: its open connection is served,
	// and a new one gets in.
	for i := range 10 {
		if _, err := c.Route(ctx, &pb.RouteRequest{Query: "open a pull request"}); err != nil {
			t.Fatalf("bob's Route %d after the resets: %v", i, err)
		}
	}
	fresh, err := grpc.NewClient(addr, insecureDial...)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := pb.NewClassifierServiceClient(fresh).Route(fctx, &pb.RouteRequest{Query: "open a pull request"}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("bob's Route on a new connection after the flood: %v", err)
	}
}

// tlsRapidResets opens an HTTP/2 connection over TLS to addr and sends n
// POSTs of path with no token, each as HEADERS then RST_STREAM, never
// its body, then a PING; it reports whether the PING was answered (the
// server read every reset) before the server closed the connection, and
// closes it.
func tlsRapidResets(t *testing.T, addr, path string, n int) (pinged bool) {
	t.Helper()
	nc, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	acked := make(chan bool, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				acked <- false
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acked <- true
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for s := range n {
		id := uint32(2*s + 1)
		hb.Reset()
		for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "localhost"},
			{"content-type", "application/json"}, {"accept", "application/json, text/event-stream"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break
		}
	}
	if fr.WritePing(false, [8]byte{1}) != nil {
		return false
	}
	return <-acked
}

// TestHTTPRapidResetsAcrossConnections: rapid resets over TLS with no
// token on --http-listen and --mcp-listen, rapidreset.EarlyResetsMin-1 on
// each connection before another is opened (the thirteenth hostile pass:
// the daemon 5.7-7.8 s of CPU in 10 s, the proxy 7.9 s, another
// identity's Route p99 123-323 ms; net/http2 closes a connection only
// past 4×64 resets queued), are counted per peer as on gRPC: the local
// peer is penalized and its connections that go on are closed early
// (its new connections are held briefly, never refused: it is every
// local agent), while
// another identity's open connection is answered throughout.
func TestHTTPRapidResetsAcrossConnections(t *testing.T) {
	httpAddr, mcpAddr, maddr, client := h2Daemon(t)
	if code, proto, err := h2Route(client, httpAddr, bobToken); err != nil || code != http.StatusOK || proto != "HTTP/2.0" {
		t.Fatalf("bob's Route before: %d %s %v", code, proto, err)
	}
	conns := rapidreset.PeerEarlyResetsMin/(rapidreset.EarlyResetsMin-1) + 1
	for i := range conns {
		addr, path := httpAddr, "/classifier.v1.ClassifierService/Route"
		if i%2 == 1 {
			addr, path = mcpAddr, "/mcp"
		}
		if !tlsRapidResets(t, addr, path, rapidreset.EarlyResetsMin-1) && i < conns-1 {
			t.Fatalf("connection %d of %d early resets was closed before the peer's %d", i, rapidreset.EarlyResetsMin-1, rapidreset.PeerEarlyResetsMin)
		}
	}
	for end := time.Now().Add(10 * time.Second); scrape(t, maddr)["classifierd_grpc_reset_penalties_total"] < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no penalty after %d early resets of one peer over TLS (metrics %v)", conns*(rapidreset.EarlyResetsMin-1), scrape(t, maddr))
		}
	}
	// Penalized: a connection is closed at its PenalizedEarlyResetsMin-th
	// early reset, before its PING is answered.
	if tlsRapidResets(t, httpAddr, "/classifier.v1.ClassifierService/Route", 4*rapidreset.EarlyResetsMin) {
		t.Error("a penalized peer's connection read 256 early resets and its PING")
	}
	if n := scrape(t, maddr)["classifierd_http_early_reset_closes_total"]; n < 1 {
		t.Errorf("classifierd_http_early_reset_closes_total %v, want ≥ 1", n)
	}
	// New connections of the local peer are all served, held
	// LocalMaxHold at most (held like a remote peer's, every local agent's
	// waited behind the resetter's: the fourteenth hostile pass).
	for i := range 12 {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", httpAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatalf("the penalized local peer's new TLS connection %d: %v", i, err)
		}
		nc.Close()
	}
	if n := scrape(t, maddr)["classifierd_grpc_penalized_connections_refused_total"]; n != 0 {
		t.Errorf("%v new connections of the local peer refused, want none (held %v s at most)", n, rapidreset.LocalMaxHold.Seconds())
	}
	// bob's connection, open before, is answered throughout.
	for i := range 10 {
		if code, _, err := h2Route(client, httpAddr, bobToken); err != nil || code != http.StatusOK {
			t.Fatalf("bob's Route %d after the resets: %d %v", i, code, err)
		}
	}
}

// TestGRPCTransportRefusalsClosed: streams grpc-go refuses in its
// transport, before any tap or stats handler (here a malformed
// grpc-timeout), count as early resets: the fourteenth hostile pass
// opened 38,000-50,000 a second on four connections with no token, never
// closed, while another identity's Route p99 went from 7 to 70 ms. Over
// plaintext and over TLS (the deciphered frames are counted), such a
// connection is closed, one whose calls are served is not, and another
// identity's Routes are answered throughout.
func TestGRPCTransportRefusalsClosed(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd")
	roots := x509.NewCertPool()
	roots.AddCert(pki.ca)
	for _, viaTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "TLS"}[viaTLS], func(t *testing.T) {
			addr := freeAddr(t)
			args, dial := []string{"--index", idx, "--auth-token-file", recvTokens(t)}, insecureDial
			if viaTLS {
				args, dial = append(args, "--tls-cert", serverCert, "--tls-key", serverCert+".key"), pki.dial(nil)
			}
			_, conn := opsDaemon(t, addr, dial, args...)
			c := pb.NewClassifierServiceClient(conn)
			ctx := bearerCtx(context.Background(), bobToken)
			if _, err := c.Route(ctx, &pb.RouteRequest{Query: "warm up"}); err != nil {
				t.Fatal(err)
			}
			raw := func() net.Conn {
				if viaTLS {
					nc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
					if err != nil {
						t.Fatal(err)
					}
					return nc
				}
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				return nc
			}
			calls := 4 * rapidreset.EarlyResetsMin

			// Calls with a well-formed grpc-timeout and their message,
			// each answered before the next: the connection stays open.
			nc := raw()
			defer nc.Close()
			statuses := make(chan string, 16)
			h := dialH2C(t, nc, addr, func(f http2.Frame) {
				if f, ok := f.(*http2.MetaHeadersFrame); ok {
					for _, hf := range f.Fields {
						if hf.Name == "grpc-status" {
							statuses <- hf.Value
						}
					}
				}
			})
			h.extra = [][2]string{{"grpc-timeout", "5S"}}
			for s := range calls {
				if err := h.call(uint32(2*s+1), "/grpc.health.v1.Health/Check", "", []byte{}); err != nil {
					t.Fatal(err)
				}
				select {
				case st := <-statuses:
					if st != "0" {
						t.Fatalf("call %d: grpc-status %s", s+1, st)
					}
				case <-h.gone:
					t.Fatalf("call %d of %d, served: the connection was closed", s+1, calls)
				case <-time.After(30 * time.Second):
					t.Fatalf("call %d of %d: no answer in 30 s", s+1, calls)
				}
			}

			// The same calls with a malformed grpc-timeout, refused by the
			// transport: the connection is closed.
			bad := raw()
			defer bad.Close()
			r := dialH2C(t, bad, addr, nil)
			r.extra = [][2]string{{"grpc-timeout", "abc"}}
			go func() {
				for s := range 5 * calls {
					if r.call(uint32(2*s+1), "/grpc.health.v1.Health/Check", "", []byte{}) != nil {
						return
					}
				}
			}()
			for i := range 10 {
				if _, err := c.Route(ctx, &pb.RouteRequest{Query: "open a pull request"}); err != nil {
					t.Fatalf("bob's Route %d during the refused streams: %v", i, err)
				}
			}
			select {
			case <-r.gone:
			case <-time.After(15 * time.Second):
				t.Fatalf("a connection of %d streams refused by the transport still open after 15 s (load %s)", 5*calls, loadavg())
			}
			select {
			case <-h.gone:
				t.Fatal("the served connection was closed with the refused one")
			default:
			}
		})
	}
}

// TestGRPCRefusedCallsCountedEarly: complete calls the taps refuse for
// their caller's fault (here UNAUTHENTICATED: no token) count as early
// resets, so a connection of them is closed, and a peer's health checks
// past server.HealthChecksPerSecond (after its burst) are refused: the
// sixteenth hostile pass sent both with HPACK references, never counted,
// at 1.6-4.6 times its own CPU in the daemon's. The health checks'
// refusals close their connection, not the peer's others: a probe from
// the same address is answered (the seventeenth pass's was held back).
func TestGRPCRefusedCallsCountedEarly(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	addr := freeAddr(t)
	_, conn := opsDaemon(t, addr, insecureDial, "--index", idx, "--auth-token-file", recvTokens(t))
	c := pb.NewClassifierServiceClient(conn)
	ctx := bearerCtx(context.Background(), bobToken)
	if _, err := c.Route(ctx, &pb.RouteRequest{Query: "warm up"}); err != nil {
		t.Fatal(err)
	}
	open := func() (*h2c, chan string) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		statuses := make(chan string, 1<<14)
		return dialH2C(t, nc, addr, func(f http2.Frame) {
			if f, ok := f.(*http2.MetaHeadersFrame); ok {
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" {
						select {
						case statuses <- hf.Value:
						default:
						}
					}
				}
			}
		}), statuses
	}
	t.Run("health checks past their rate: refused, the connection closed, a probe answered", func(t *testing.T) {
		h, statuses := open()
		// In batches under MaxConcurrentStreams, faster than the rate.
		n, batch, refused := 2*server.HealthCheckBurst, 60, 0
		closed := false
	flood:
		for sent := 0; sent < n && !closed; sent += batch {
			for s := sent; s < sent+batch; s++ {
				if err := h.call(uint32(2*s+1), "/grpc.health.v1.Health/Check", "", []byte{}); err != nil {
					break // closed meanwhile
				}
			}
			for range batch {
				select {
				case st := <-statuses:
					if st == "8" { // RESOURCE_EXHAUSTED
						refused++
					}
				case <-h.gone:
					closed = true
					continue flood
				case <-time.After(30 * time.Second):
					t.Fatalf("no answer in 30 s (%d sent)", sent)
				}
			}
		}
		// While a flood goes on (16 loops on 4 connections, reconnected
		// when closed), a kubelet's probe from the same address (every
		// loopback address is one peer): each check on a new
		// connection, answered. The flood's refusals are its
		// connections', not the peer's: the peer's new connections are
		// not held back, and a connection's first checks are answered
		// whatever the peer's rate.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			fc, err := grpc.NewClient(addr, insecureDial...)
			if err != nil {
				t.Fatal(err)
			}
			defer fc.Close()
			hc := healthpb.NewHealthClient(fc)
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						_, _ = hc.Check(cctx, &healthpb.HealthCheckRequest{})
						cancel()
					}
				})
			}
		}
		defer wg.Wait()
		defer close(stop)
		time.Sleep(time.Second)
		for i := range 5 {
			pc, err := grpc.NewClient(addr, insecureDial...)
			if err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = healthpb.NewHealthClient(pc).Check(pctx, &healthpb.HealthCheckRequest{})
			cancel()
			pc.Close()
			if err != nil {
				t.Fatalf("a probe's check %d beside the flood: %v", i+1, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !closed {
			t.Fatalf("%d health checks on one connection as fast as answered (%d refused): the connection is open", n, refused)
		}
	})
	t.Run("calls refused UNAUTHENTICATED: closed", func(t *testing.T) {
		time.Sleep(time.Duration(server.HealthCheckBurst/server.HealthChecksPerSecond+1) * time.Second)
		h, _ := open()
		go func() {
			for s := range 10 * rapidreset.EarlyResetsMin {
				if h.call(uint32(2*s+1), "/classifier.v1.ClassifierService/Route", "", []byte{}) != nil {
					return
				}
			}
		}()
		for i := range 10 {
			if _, err := c.Route(ctx, &pb.RouteRequest{Query: "open a pull request"}); err != nil {
				t.Fatalf("bob's Route %d meanwhile: %v", i, err)
			}
		}
		select {
		case <-h.gone:
		case <-time.After(15 * time.Second):
			t.Fatalf("a connection of %d calls with no token still open after 15 s (load %s)", 10*rapidreset.EarlyResetsMin, loadavg())
		}
	})
}
