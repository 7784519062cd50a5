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
	var mu sync.Mutex
	answers := map[int]int{}
	var closedAfter, unanswered atomic.Int64
	deadline := time.Now().Add(40 * time.Second)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for closedAfter.Load() == 0 && time.Now().Before(deadline) {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				br := bufio.NewReader(nc)
				for closedAfter.Load() == 0 && time.Now().Before(deadline) {
					_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
					if _, err := nc.Write(bytes.Repeat(request(carolToken), batch)); err != nil {
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
						mu.Lock()
						answers[resp.StatusCode]++
						mu.Unlock()
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
						t.Errorf("a connection answered %d calls of a pipelined batch, more than %d", got, limit)
					}
					if closing {
						// The daemon closes the connection: nothing
						// more is answered.
						if _, err := http.ReadResponse(br, nil); err != nil {
							closedAfter.Add(1)
							unanswered.Add(int64(batch - got))
						} else {
							t.Error("a connection answered on after its refusal said Connection: close")
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
	// A few more of bob's calls after, at least one answered (the flood,
	// closed at its pipelined batches, can be over before bob's first
	// call, and a call of his during it may be refused).
	for end := time.Now().Add(10 * time.Second); bobOK.Load() == 0 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-bobDone
	mu.Lock()
	defer mu.Unlock()
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
		if unavailable.Load() != 0 || m["classifierd_grpc_early_reset_closes_total"] != 0 || m["classifierd_grpc_reset_penalties_total"] != 0 {
			t.Fatalf("carol refused %d times: %d calls unavailable, %v connections closed, %v penalties; want none (load %s)", exhausted.Load(), unavailable.Load(),
				m["classifierd_grpc_early_reset_closes_total"], m["classifierd_grpc_reset_penalties_total"], loadavg())
		}
	})
}
