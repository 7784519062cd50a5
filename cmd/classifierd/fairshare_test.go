package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/server"
)

// TestHogCannotRefuseAnotherIdentity reproduces issue 27's finding
// through the real daemon and model: one token sends 16 concurrent
// 240 KB Routes in a closed loop (backing off when refused), and while it
// does, another token's small Routes, with and without a deadline of
// their own, are all answered: none refused. (How fast they are answered
// is measured by `make loadtest`, not asserted here.)
func TestHogCannotRefuseAnotherIdentity(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("hog route "+aliceToken+"\nsmall route "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--auth-token-file", tokens)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hogCtx, smallCtx := bearerCtx(ctx, aliceToken), bearerCtx(context.Background(), bobToken)

	h := startHog(t, ctx, c, hogCtx)
	// Let the hog take every place and fill the queue first.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		n := h.count(codes.OK) + h.count(codes.ResourceExhausted)
		if n >= 16 || time.Now().After(deadline) {
			break
		}
	}
	const calls = 40
	answered := 0
	for i := range calls {
		cctx, ccancel := smallCtx, context.CancelFunc(func() {})
		if i%2 == 1 { // half carry a deadline of their own, half the daemon's --timeout
			cctx, ccancel = context.WithTimeout(smallCtx, 30*time.Second)
		}
		r, err := c.Route(cctx, &pb.RouteRequest{Query: "list the open pull requests on github"})
		ccancel()
		if err != nil {
			t.Errorf("small Route %d while the hog runs: %v (%v)", i, status.Code(err), err)
			continue
		}
		if len(r.GetServers()) == 0 && !r.GetAbstained() {
			t.Errorf("small Route %d: no servers and not abstained", i)
		}
		answered++
	}
	h.stop()
	t.Logf("small: %d of %d answered; hog: %d answered, %d refused", answered, calls, h.count(codes.OK), h.count(codes.ResourceExhausted))
	if h.count(codes.OK) == 0 {
		t.Fatal("the hog's Routes were never answered: the test did not load the daemon")
	}
}

// TestMCPToolCallsAreAdmitted: the daemon's MCP tool calls that run the
// model pass the same admission as its gRPC calls (the admitted-call
// histogram counts them), and so does listing tools, whose answer is its
// work (TestMCPListHogCannotRefuseAnotherIdentity). Before, the MCP
// listeners called the domain directly and a hostile MCP client escaped
// the fair shares.
func TestMCPToolCallsAreAdmitted(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpAddr, metricsAddr := freeAddr(t), freeAddr(t)
	startDaemon(t, idx, "--mcp-listen", mcpAddr, "--auth-token-file", tokens, "--metrics-listen", metricsAddr)
	// Counted when admitted, before the call runs: the session's own
	// requests (initialize) are counted once it is connected.
	const admitted = "classifierd_admission_wait_seconds_count"
	cs := mustConnect(t, "http://"+mcpAddr+listeners.MCPPath, bearerClient(aliceToken))
	before := scrape(t, metricsAddr)[admitted]
	ctx := context.Background()
	for _, tool := range []string{"route", "search_tools", "analyze_prompt"} {
		args := map[string]any{"query": "list the open pull requests on github", "prompt": "list the open pull requests on github"}
		if tool == "analyze_prompt" {
			delete(args, "query")
		} else {
			delete(args, "prompt")
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, res, err)
		}
	}
	if got := scrape(t, metricsAddr)[admitted] - before; got != 3 {
		t.Fatalf("admitted model calls grew by %v over three MCP tool calls, want 3", got)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, metricsAddr)[admitted] - before; got != 4 {
		t.Fatalf("admitted calls grew by %v over three MCP tool calls and a tools/list, want 4", got)
	}
}

// TestHogKeepsItsShareOfTheCores: through the real daemon (GOMAXPROCS=2)
// and model, one token sends 16 concurrent 240 KB Routes while another
// sends small Routes from two clients. The hog's Routes are long calls:
// while the small token is active the hog holds one core, its share, so
// the other is free for the
// small token's calls (beside two CPU-bound calls on two cores a small
// call waited 20-30 ms for the Go scheduler); alone, it takes every place
// (four). Counted from the daemon's
// long-calls gauge, sampled while both run: at most one in nine of ten
// samples (the rest allows for the small token being forgotten while its
// clients stall on a loaded machine), and the hog's calls were running
// (at least one seen); every small call is answered. How fast is
// measured by `make loadtest`, not asserted.
func TestHogKeepsItsShareOfTheCores(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("hog route "+aliceToken+"\nsmall route "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMAXPROCS", "2") // the daemon's cores, whatever this machine has
	metricsAddr := freeAddr(t)
	// The hog's 240 KB Routes, 16 at a time, pass the rate of body bytes
	// (--body-bytes-per-second): this is admission's share of the cores.
	_, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--auth-token-file", tokens, "--metrics-listen", metricsAddr,
		"--body-bytes-per-second", "0")
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hogCtx, smallCtx := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken)
	small := func() error {
		_, err := c.Route(smallCtx, &pb.RouteRequest{Query: "list the open pull requests on github"})
		return err
	}
	// The daemon learns what a small call costs (a long call is one
	// expected to take 4x the cheapest).
	for range 5 {
		if err := small(); err != nil {
			t.Fatal(err)
		}
	}
	h := startHog(t, ctx, c, hogCtx)
	defer h.stop()
	const long = "classifierd_admission_long_in_flight"
	// Alone, the hog runs long calls in more places than its share of
	// the cores beside another caller.
	alone := 0.0
	for deadline := time.Now().Add(time.Minute); alone < 2 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		alone = max(alone, scrape(t, metricsAddr)[long])
	}
	if alone < 2 {
		t.Fatalf("the hog alone ran at most %v long calls at once, want 2 or more", alone)
	}
	// The small token's two clients keep it active; its first calls
	// wait for the hog to give a core back.
	smallStop := make(chan struct{})
	var smalls sync.WaitGroup
	var answered, failed atomic.Int64
	for range 2 {
		smalls.Go(func() {
			for {
				select {
				case <-smallStop:
					return
				default:
				}
				if err := small(); err != nil {
					failed.Add(1)
					t.Errorf("small Route while the hog runs: %v", err)
					return
				}
				answered.Add(1)
			}
		})
	}
	for answered.Load() < 20 && failed.Load() == 0 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	// Give the hog's calls that started before the small token came time
	// to end (each holds a core until it ends).
	for deadline := time.Now().Add(time.Minute); scrape(t, metricsAddr)[long] > 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	// A sample counts only while the daemon sees both tokens active
	// (classifierd_admission_callers, from the same scrape): a stalled
	// small client is forgotten after 250 ms and the hog rightly takes
	// every place until it is back.
	seen, forgotten := map[float64]int{}, 0
	for range 200 {
		m := scrape(t, metricsAddr)
		if m["classifierd_admission_callers"] < 2 {
			forgotten++
		} else {
			seen[m[long]]++
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(smallStop)
	smalls.Wait()
	t.Logf("long calls in flight beside the small token (value: samples): %v, %d samples with the small token forgotten; small answered %d; hog answered %d, refused %d",
		seen, forgotten, answered.Load(), h.count(codes.OK), h.count(codes.ResourceExhausted))
	// A sample above 1 is right when the small token's clients stalled
	// for more than 250 ms (a loaded machine, the race detector): it was
	// forgotten, the hog took every place, and its calls drain when the
	// small token comes back. So the bound is on the share of samples:
	// without the cores bound the hog holds two (its share of the places)
	// nearly always.
	over := 0
	for v, n := range seen {
		if v > 1 {
			over += n
		}
	}
	if over > 20 {
		t.Errorf("%d samples of %d with more than 1 long call in flight while another token was active, want at most 20 (the hog's share of 2 cores is 1): %v", over, 200-forgotten, seen)
	}
	if seen[1] == 0 {
		t.Errorf("the hog's long calls never ran beside the small token: %v", seen)
	}
}

// hog is another identity's load: 16 clients sending 240 KB Routes one
// after another, backing off 20 ms when refused, until stop.
type hog struct {
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	mu    sync.Mutex
	codes map[codes.Code]int
}

// startHog starts the hog's clients on c with hogCtx (its token); an
// error other than RESOURCE_EXHAUSTED fails t while ctx lasts.
func startHog(t *testing.T, ctx context.Context, c pb.ClassifierServiceClient, hogCtx context.Context) *hog {
	var b strings.Builder
	words := strings.Fields("please read the deploy log below and tell me which service failed then open an issue with the stack trace the database migration timed out")
	for i := 0; b.Len() < 240<<10; i++ {
		b.WriteString(words[(i*7)%len(words)])
		b.WriteByte(' ')
	}
	big := b.String()
	h := &hog{done: make(chan struct{}), codes: map[codes.Code]int{}}
	for range 16 {
		h.wg.Go(func() {
			for {
				select {
				case <-h.done:
					return
				default:
				}
				_, err := c.Route(hogCtx, &pb.RouteRequest{Query: big})
				h.mu.Lock()
				h.codes[status.Code(err)]++
				h.mu.Unlock()
				if status.Code(err) == codes.ResourceExhausted {
					time.Sleep(20 * time.Millisecond)
				} else if err != nil && ctx.Err() == nil {
					t.Errorf("hog's Route: %v", err)
					return
				}
			}
		})
	}
	return h
}

// count is how many of the hog's calls ended with code so far.
func (h *hog) count(code codes.Code) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.codes[code]
}

// stop ends the hog's clients and waits for them; stopping twice is
// stopping once.
func (h *hog) stop() {
	h.once.Do(func() { close(h.done) })
	h.wg.Wait()
}

// TestHostileEmbedAdmittedByChunks is the fifth hostile pass's finding
// through the real daemon and model: an Embed of 64 texts at the model's
// 256 tokens is 64 model runs, and admitted whole it held its place (and,
// as a long call, one of the cores) for all of them, so another identity's
// small Route that needed the core waited for the whole Embed (two such
// Embeds at once took another token's Route p99 from 36 ms to 4-10 s).
// Now each chunk of server.EmbedChunk texts is admitted on its own: one
// Embed alone is at least 64/EmbedChunk admitted calls, and the mean time
// a call of it held its place is a small part of the Embed's (a ratio of
// two times of the same run, so a loaded machine changes neither side
// alone). Then two such Embeds at once beside another token's small
// Routes: every small Route is answered. (How fast is measured by the
// probe tools/hostile/embedhog5.py with victim4.py, not asserted here.)
func TestHostileEmbedAdmittedByChunks(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("hog route "+aliceToken+"\nsmall route "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMAXPROCS", "2")
	metricsAddr := freeAddr(t)
	_, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--auth-token-file", tokens, "--metrics-listen", metricsAddr)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	hogCtx, smallCtx := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken)
	// Unique words, so no text is the same as another: every one is a
	// model run at the 256-token cap.
	texts := func(seed int) []string {
		out := make([]string, 64)
		for i := range out {
			var b strings.Builder
			for j := range 300 {
				fmt.Fprintf(&b, "w%dx%dy%d ", seed, i, j)
			}
			out[i] = b.String()
		}
		return out
	}
	const count, sum = "classifierd_admitted_call_seconds_count", "classifierd_admitted_call_seconds_sum"
	m0 := scrape(t, metricsAddr)
	start := time.Now()
	if _, err := c.Embed(hogCtx, &pb.EmbedRequest{Texts: texts(0)}); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(start).Seconds()
	m1 := scrape(t, metricsAddr)
	calls, held := m1[count]-m0[count], m1[sum]-m0[sum]
	t.Logf("one Embed of 64 texts: %.2f s, %v admitted calls holding a place %.3f s on average", whole, calls, held/max(calls, 1))
	if want := float64(64 / server.EmbedChunk); calls < want {
		t.Errorf("one Embed of 64 texts was %v admitted calls, want %v or more (a chunk of %d texts each)", calls, want, server.EmbedChunk)
	}
	if mean := held / max(calls, 1); mean > whole/4 {
		t.Errorf("a call of the Embed held its place %.3f s on average, the whole Embed took %.3f s: want at most a quarter", mean, whole)
	}

	var hogs sync.WaitGroup
	for seed := 1; seed <= 2; seed++ {
		hogs.Go(func() {
			if _, err := c.Embed(hogCtx, &pb.EmbedRequest{Texts: texts(seed)}); err != nil && status.Code(err) != codes.ResourceExhausted {
				t.Errorf("hog's Embed: %v", err)
			}
		})
	}
	for i := range 20 {
		if _, err := c.Route(smallCtx, &pb.RouteRequest{Query: "list the open pull requests on github"}); err != nil {
			t.Errorf("small Route %d beside two Embeds of 64 texts: %v", i, err)
		}
	}
	hogs.Wait()
}
