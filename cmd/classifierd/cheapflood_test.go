package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/server"
)

// TestCheapCallFloodClosed: one identity's flood of cheap calls
// (GetIndexInfo, which runs no model) pipelined over HTTP/1.1 on several
// connections passes its share of admission and is refused 429 past it,
// and each connection is closed by the answer to its
// rapidreset.HTTP1PipelinedMax-th pipelined call (Connection: close),
// with what was pipelined behind it unanswered (before pipelining was
// counted, by a refusal past the caller's rate of refusals,
// server.AdmissionRefusalsPerSecond, which rapidreset's and server's
// tests keep). Another identity calling ten times a second meanwhile is
// never told to close. The sixteenth
// hostile pass: pipelined small Routes, mostly refused 429, took another
// identity's p99 from 10 to 232 ms; GetIndexInfo over HTTP, outside
// admission, at 864 calls a second cost the daemon 14 times its client's
// CPU. Over gRPC such a flood is refused at its headers and never closed
// (the eighteenth pass).
func TestCheapCallFloodClosed(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("carol route "+carolToken+"\nbob route "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	_, bobConn := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens, "--http-listen", addr, "--metrics-listen", maddr,
		"--max-inflight", "1", "--max-waiting", "1")
	const path = "/classifier.v1.ClassifierService/GetIndexInfo"
	request := func(token string) []byte {
		return []byte(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", path, addr, token))
	}

	// Bob: one kept-alive connection, a call every 100 ms.
	stop := make(chan struct{})
	var bobOK, bobRefused, bobClosed atomic.Int64
	bobDone := make(chan struct{})
	go func() {
		defer close(bobDone)
		c := &http.Client{Timeout: 30 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+bobToken)
			resp, err := c.Do(req)
			if err != nil {
				t.Errorf("bob: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch {
			case resp.Close:
				bobClosed.Add(1)
			case resp.StatusCode == http.StatusOK:
				bobOK.Add(1)
			case resp.StatusCode == http.StatusTooManyRequests:
				bobRefused.Add(1)
			default:
				t.Errorf("bob: %s", resp.Status)
			}
		}
	}()

	// Carol: 6 connections, each pipelining batches of 32 calls, until
	// one is closed after a refusal that says so.
	const conns, batch = 6, 32
	carol := pipelineFlood(t, func() (net.Conn, error) { return net.Dial("tcp", addr) }, request(carolToken), conns, batch,
		func(f *floodStats) bool { return f.closedAfter.Load() > 0 })
	// A few more of bob's calls after, at least one answered (the flood,
	// closed at its pipelined batches, can be over before bob's first
	// call, and a call of his during it may be refused).
	for end := time.Now().Add(10 * time.Second); bobOK.Load() == 0 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-bobDone
	answers, closedAfter, unanswered := carol.answers, &carol.closedAfter, &carol.unanswered
	t.Logf("carol's answers %v; %d connections closed, %d pipelined calls unanswered; bob %d answered, %d refused",
		answers, closedAfter.Load(), unanswered.Load(), bobOK.Load(), bobRefused.Load())
	if answers[http.StatusTooManyRequests] == 0 {
		t.Fatalf("carol's pipelined GetIndexInfo on %d connections at once with one place: none refused (%v); the calls are outside admission", conns, answers)
	}
	if closedAfter.Load() == 0 {
		t.Fatalf("carol pipelined %d batches of %d: no connection closed after an answer said Connection: close", conns, batch)
	}
	if bobClosed.Load() != 0 {
		t.Fatalf("bob, calling ten times a second, was told to close %d times", bobClosed.Load())
	}
	if bobOK.Load() == 0 {
		t.Fatalf("bob's calls: none answered (%d refused)", bobRefused.Load())
	}

	// gRPC: carol's Routes of 4 KB, 64 at a time on one connection with
	// one place, are mostly refused, far past her rate of refusals: they
	// are refused at their headers (the tap), cheaply, and her connection
	// is never closed nor her address penalized (the seventeenth pass
	// counted them as early resets, which also disconnected make
	// loadtest's honest hub of 1,000-2,000 callers under overload). Bob's
	// calls on his own connection meanwhile never fail but by a refusal.
	t.Run("gRPC", func(t *testing.T) {
		carolConn, err := grpc.NewClient(bobConn.Target(), insecureDial...)
		if err != nil {
			t.Fatal(err)
		}
		defer carolConn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		carol := pb.NewClassifierServiceClient(carolConn)
		cctx := bearerCtx(ctx, carolToken)
		var unavailable, exhausted atomic.Int64
		var first atomic.Value
		want := int64(4 * (server.AdmissionRefusalBurst + rapidreset.EarlyResetsMin))
		var wg sync.WaitGroup
		query := strings.Repeat("please open a pull request for the release branch ", 80)
		for range 64 {
			wg.Go(func() {
				for ctx.Err() == nil && exhausted.Load() < want {
					_, err := carol.Route(cctx, &pb.RouteRequest{Query: query})
					switch status.Code(err) {
					case codes.Unavailable:
						unavailable.Add(1)
					case codes.ResourceExhausted:
						if exhausted.Add(1) == 1 {
							first.Store(err.Error())
						}
					}
				}
			})
		}
		bob := pb.NewClassifierServiceClient(bobConn)
		bctx := bearerCtx(ctx, bobToken)
		for i := 0; i < 20 && ctx.Err() == nil; i++ {
			if _, err := bob.GetIndexInfo(bctx, &pb.GetIndexInfoRequest{}); err != nil && status.Code(err) != codes.ResourceExhausted {
				t.Errorf("bob's GetIndexInfo %d: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		m := scrape(t, maddr)
		t.Logf("carol over gRPC: %d refused (the first: %v), %d unavailable, %v past her rate", exhausted.Load(), first.Load(), unavailable.Load(),
			m["classifierd_admission_refused_past_rate_total"])
		if exhausted.Load() < want {
			t.Fatalf("carol's 64 concurrent Routes with one place: %d refused, want at least %d", exhausted.Load(), want)
		}
		// Her HTTP/1.1 connections closed for pipelining above may have
		// penalized the (local) peer: those penalties are not the calls'.
		penalties := m["classifierd_grpc_reset_penalties_total"] - m["classifierd_http_pipelined_penalties_total"]
		if unavailable.Load() != 0 || m["classifierd_grpc_early_reset_closes_total"] != 0 || penalties != 0 {
			t.Fatalf("carol refused %d times: %d calls unavailable, %v connections closed, %v penalties; want none (load %s)", exhausted.Load(), unavailable.Load(),
				m["classifierd_grpc_early_reset_closes_total"], penalties, loadavg())
		}
	})
}

// floodStats is what pipelineFlood's connections were answered: the
// statuses, the connections closed after an answer that said
// Connection: close, and the pipelined requests left unanswered.
type floodStats struct {
	mu                      sync.Mutex
	answers                 map[int]int
	closedAfter, unanswered atomic.Int64
}

// pipelineFlood runs conns connections (dial), each pipelining batches
// of batch copies of req and reading their answers, a new connection
// after each one the daemon closes, until done (or 40 s), and returns
// once they have all stopped. A connection answering more than
// 2*(rapidreset.HTTP1PipelinedMax+1) requests of a batch, or answering
// on after an answer that said Connection: close, fails t.
func pipelineFlood(t *testing.T, dial func() (net.Conn, error), req []byte, conns, batch int, done func(*floodStats) bool) *floodStats {
	t.Helper()
	f := &floodStats{answers: map[int]int{}}
	deadline := time.Now().Add(40 * time.Second)
	more := func() bool { return !done(f) && time.Now().Before(deadline) }
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for more() {
				nc, err := dial()
				if err != nil {
					t.Error(err)
					return
				}
				br := bufio.NewReader(nc)
				for more() {
					_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
					if _, err := nc.Write(bytes.Repeat(req, batch)); err != nil {
						break
					}
					got, closing := 0, false
					for ; got < batch; got++ {
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							break
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						f.mu.Lock()
						f.answers[resp.StatusCode]++
						f.mu.Unlock()
						if resp.Close {
							closing = true
							got++
							break
						}
					}
					// HTTP1PipelinedMax+1 answers, and one more for a
					// call the server's 4 KB reads split, read after
					// the answer before it was written.
					if limit := 2 * (rapidreset.HTTP1PipelinedMax + 1); got > limit {
						t.Errorf("a connection answered %d requests of a pipelined batch, more than %d", got, limit)
					}
					if closing {
						// The daemon closes the connection: nothing
						// more is answered.
						if _, err := http.ReadResponse(br, nil); err != nil {
							f.closedAfter.Add(1)
							f.unanswered.Add(int64(batch - got))
						} else {
							t.Error("a connection answered on after an answer that said Connection: close")
						}
						break
					}
					if got < batch {
						break
					}
				}
				nc.Close()
			}
		}()
	}
	wg.Wait()
	return f
}

// TestPipelinedFloodPenalized: a peer whose HTTP/1.1 connections are
// closed for pipelining rapidreset.PeerPipelinedClosesMin times in a
// short while is penalized as a resetter is: its new connections past a
// burst are held back (the local peer's LocalMaxHold at most), and the
// penalty is logged; one close is not. Another peer's new connections
// are served at once. The eighteenth hostile pass: over plain HTTP a
// flood of 405s with no token, closed at each connection's 8th pipelined
// request, reconnected for nothing, 5,000-8,700 405s a second, the
// daemon 2.4-3.4 times the client's CPU.
func TestPipelinedFloodPenalized(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("carol route "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	// On every address, so that another peer than the local one (every
	// loopback address) can connect: this host's own non-loopback
	// address, if it has one.
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens, "--http-listen", "0.0.0.0:"+port, "--metrics-listen", maddr)
	flood := []byte("POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	local := func() (net.Conn, error) { return net.Dial("tcp", addr) }
	waitMetric := func(name string, least float64) map[string]float64 {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			m := scrape(t, maddr)
			if m[name] >= least {
				return m
			}
			if time.Now().After(end) {
				t.Fatalf("%s %v, want at least %v (load %s)", name, m[name], least, loadavg())
			}
		}
	}

	// One connection closed for pipelining: no penalty.
	pipelineFlood(t, local, flood, 1, 32, func(f *floodStats) bool { return f.closedAfter.Load() >= 1 })
	if m := waitMetric("classifierd_http_pipelined_closes_total", 1); m["classifierd_grpc_reset_penalties_total"] != 0 {
		t.Fatalf("one connection closed for pipelining: %v penalties, want none", m["classifierd_grpc_reset_penalties_total"])
	}
	// PeerPipelinedClosesMin in all: penalized, once.
	f := pipelineFlood(t, local, flood, 1, 32, func(f *floodStats) bool { return f.closedAfter.Load() >= rapidreset.PeerPipelinedClosesMin-1 })
	m := waitMetric("classifierd_http_pipelined_penalties_total", 1)
	t.Logf("flood answers %v; metrics: %v pipelined closes, %v penalties", f.answers, m["classifierd_http_pipelined_closes_total"], m["classifierd_grpc_reset_penalties_total"])
	if m["classifierd_grpc_reset_penalties_total"] != 1 {
		t.Fatalf("%v penalties, want 1", m["classifierd_grpc_reset_penalties_total"])
	}
	if !strings.Contains(d.stderr.String(), "closed many times for pipelining") || !strings.Contains(d.stderr.String(), `peer="local (loopback or Unix socket)"`) {
		t.Errorf("the penalty is not logged with its peer:\n%s", lastLines(d.stderr.String(), 5))
	}

	// burst connects n new connections at once with dial, each asking
	// GET / once (the explain page), and fails t unless each is answered.
	burst := func(who string, dial func() (net.Conn, error), host string, n int) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				nc, err := dial()
				if err != nil {
					t.Errorf("%s's connection %d: %v", who, i, err)
					return
				}
				defer nc.Close()
				_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
					t.Errorf("%s's connection %d: %v", who, i, err)
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
				if err != nil {
					t.Errorf("%s's connection %d: %v", who, i, err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	const n = rapidreset.PenalizedConnBurst + 8
	// The penalized (local) peer's new connections: all served, some
	// held back first.
	burst("the penalized peer", local, addr, n)
	m = scrape(t, maddr)
	if m["classifierd_grpc_penalized_connections_held_total"] == 0 || m["classifierd_grpc_penalized_connections_refused_total"] != 0 {
		t.Fatalf("%d new connections of the penalized local peer at once: %v held, %v refused; want some held, none refused", n,
			m["classifierd_grpc_penalized_connections_held_total"], m["classifierd_grpc_penalized_connections_refused_total"])
	}

	// Another peer: none held.
	other := nonLoopbackIPv4()
	if other == nil {
		t.Log("this host has no non-loopback IPv4 address: another peer's connections not tried")
		return
	}
	held := m["classifierd_grpc_penalized_connections_held_total"]
	to := net.JoinHostPort(other.String(), port)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: other}, Timeout: 5 * time.Second}
	burst("another peer ("+other.String()+")", func() (net.Conn, error) { return dialer.Dial("tcp", to) }, to, n)
	m = scrape(t, maddr)
	if got := m["classifierd_grpc_penalized_connections_held_total"]; got != held {
		t.Fatalf("%d new connections of another peer at once: %v held, want none", n, got-held)
	}
	t.Logf("the penalized peer's %d new connections: %v held; another peer's (%v): none", n, held, other)
}

// nonLoopbackIPv4 is one of this host's IPv4 addresses that is not
// loopback nor link-local, or nil.
func nonLoopbackIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.To4()
		}
	}
	return nil
}
