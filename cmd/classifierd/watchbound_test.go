package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	daemonstate "github.com/classifierd/classifierd/internal/state"
	"github.com/classifierd/classifierd/internal/testredis"
)

// watchFlood is how many WatchExposure streams the test tries to open on
// one session: the hostile-client finding's 20,000 (+40k goroutines,
// +330 MB before the bound).
const watchFlood = 20000

// TestWatchExposureBounded opens watchFlood watches on one session of one
// identity against the real daemon, with its session state in memory and
// in Redis: past --max-watches-per-session and --max-watches-per-client
// new watches get RESOURCE_EXHAUSTED, another identity still watches,
// closing streams frees places, UpdateExposure stays quick, and the
// daemon's goroutines and heap grow by what the bounds allow, not by the
// flood.
func TestWatchExposureBounded(t *testing.T) {
	const perSession, perClient, total = 8, 12, 16
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,sessions "+aliceToken+"\nbob route,sessions "+bobToken+
		"\ncarol route,sessions "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"memory", "redis"} {
		t.Run(state, func(t *testing.T) {
			metrics := freeAddr(t)
			args := []string{"--index", idx, "--auth-token-file", tokens, "--metrics-listen", metrics, "--max-watches-per-session",
				strconv.Itoa(perSession), "--max-watches-per-client", strconv.Itoa(perClient), "--max-watches", strconv.Itoa(total)}
			if state == "redis" {
				srv := testredis.Start(t, "--requirepass", statePassword)
				t.Setenv(daemonstate.PasswordEnv, statePassword)
				args = append(args, "--state", srv.URL(0))
			}
			addr := freeAddr(t)
			_, conn := opsDaemon(t, addr, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, args...)
			c := pb.NewClassifierServiceClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			alice, bob, carol := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken), bearerCtx(ctx, carolToken)
			for _, s := range []struct {
				ctx context.Context
				id  string
			}{{alice, "a1"}, {alice, "a2"}, {bob, "b1"}, {carol, "c1"}} {
				if _, err := c.CreateSession(s.ctx, &pb.CreateSessionRequest{SessionId: s.id}); err != nil {
					t.Fatal(err)
				}
			}
			before := scrape(t, metrics)

			// The flood: alice opens watchFlood watches on a1, 16 at a time.
			floodCtx, stopFlood := context.WithCancel(alice)
			var ok, refused, other atomic.Int64
			var wg sync.WaitGroup
			next := atomic.Int64{}
			start := time.Now()
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= watchFlood {
						_, err := startWatch(floodCtx, c, "a1")
						switch status.Code(err) {
						case codes.OK:
							ok.Add(1)
						case codes.ResourceExhausted:
							refused.Add(1)
						default:
							other.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			flood := time.Since(start)
			during := scrape(t, metrics)
			upd := updateTimes(t, c, alice, "a1", 20)
			t.Logf("%s: %d watches tried on one session in %v: %d open, %d RESOURCE_EXHAUSTED, %d other; goroutines %+.0f, heap in use %+.1f MB, RSS %+.1f MB; UpdateExposure p50 %v max %v (loadavg %s)",
				state, watchFlood, flood.Round(time.Millisecond), ok.Load(), refused.Load(), other.Load(),
				during["go_goroutines"]-before["go_goroutines"],
				(during["go_memstats_heap_inuse_bytes"]-before["go_memstats_heap_inuse_bytes"])/(1<<20),
				(during["process_resident_memory_bytes"]-before["process_resident_memory_bytes"])/(1<<20),
				upd[len(upd)/2], upd[len(upd)-1], loadavg())
			if ok.Load() != perSession || refused.Load() != watchFlood-perSession || other.Load() != 0 {
				t.Fatalf("watches on one session: %d open, %d refused, %d other; want %d open, the rest RESOURCE_EXHAUSTED",
					ok.Load(), refused.Load(), other.Load(), perSession)
			}
			// Each open watch costs a gRPC stream goroutine; a refused one
			// nothing once refused. 200 is room for the gRPC transport's
			// own and the scrape's.
			if g := during["go_goroutines"] - before["go_goroutines"]; g > 2*perSession+200 {
				t.Errorf("goroutines grew by %.0f for %d open watches", g, perSession)
			}
			if h := during["go_memstats_heap_inuse_bytes"] - before["go_memstats_heap_inuse_bytes"]; h > 50<<20 {
				t.Errorf("heap in use grew by %.1f MB", h/(1<<20))
			}

			// Per identity: alice's second session has the rest of her share.
			opened := openWatches(t, alice, c, "a2", perClient) // more than she has left
			if got := len(opened); got != perClient-perSession {
				t.Fatalf("alice's watches on a2: %d open, want %d (per-client limit %d)", got, perClient-perSession, perClient)
			}
			// Other identities still watch, up to the total.
			if got := len(openWatches(t, bob, c, "b1", perSession)); got != total-perClient {
				t.Fatalf("bob's watches: %d open, want %d (the total %d less alice's %d)", got, total-perClient, total, perClient)
			}
			if got := len(openWatches(t, carol, c, "c1", 1)); got != 0 {
				t.Fatalf("carol opened %d watches past the total", got)
			}
			// Closing streams frees places: alice ends the flood's, carol
			// can watch again, and so can alice.
			stopFlood()
			waitWatch(t, carol, c, "c1")
			waitWatch(t, alice, c, "a1")
			after := scrape(t, metrics)
			t.Logf("%s: after closing: goroutines %+.0f against the start", state, after["go_goroutines"]-before["go_goroutines"])
		})
	}
}

// openWatches tries n watches of session id and returns the open ones;
// every other try must be RESOURCE_EXHAUSTED.
func openWatches(t *testing.T, ctx context.Context, c pb.ClassifierServiceClient, id string, n int) []grpc.ServerStreamingClient[pb.WatchExposureResponse] {
	t.Helper()
	var out []grpc.ServerStreamingClient[pb.WatchExposureResponse]
	deadline := time.Now().Add(30 * time.Second)
	for range n {
		for {
			w, err := startWatch(ctx, c, id)
			// A caller whose own flood of watches failed past
			// server.FailedSetupsPerSecond is refused before its next
			// setup is tried: it waits as told (the retry delay is a
			// fraction of a second) and tries again.
			if status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "failed stream setups") {
				if time.Now().After(deadline) {
					t.Fatalf("WatchExposure %s: still refused for failed setups after 30 s: %v", id, err)
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			switch status.Code(err) {
			case codes.OK:
				out = append(out, w)
			case codes.ResourceExhausted:
			default:
				t.Fatalf("WatchExposure %s: %v, want OK or RESOURCE_EXHAUSTED", id, err)
			}
			break
		}
	}
	return out
}

// waitWatch opens a watch of id once places are free again: the server
// gives a place back when it sees its stream end, a moment after the
// client cancels.
func waitWatch(t *testing.T, ctx context.Context, c pb.ClassifierServiceClient, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := startWatch(ctx, c, id)
		if err == nil {
			return
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("WatchExposure %s after streams closed: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// updateTimes times n exposure changes of session id, sorted.
func updateTimes(t *testing.T, c pb.ClassifierServiceClient, ctx context.Context, id string, n int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, 0, n)
	for i := range n {
		cats := []string{"github"}
		if i%2 == 1 {
			cats = []string{"filesystem"}
		}
		start := time.Now()
		if _, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: id, Categories: cats, Mode: "replacement"}); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// loadavg is /proc/loadavg's first three figures, printed beside timings
// taken on a shared machine.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
