package server

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// These tests drive the scheduler with a fake clock: a call's service
// time is the time the clock moves while it holds its place, so costs,
// deadlines and orders are exact.

// spec is one call: whose, how large, how often tried before, and the
// deadline it carries (0: none of its own).
type spec struct {
	caller   string
	bytes    int
	attempts int
	deadline time.Duration
	// dispatched: the call's headers arrived on the connection this long
	// before it reaches admission (the tap's stamp; 0: no stamp).
	dispatched time.Duration
}

// fairHarness submits calls of several identities and records what
// became of them.
type fairHarness struct {
	t   *testing.T
	a   *Admission
	clk *fakeClock

	mu       sync.Mutex
	releases map[string]func()
	granted  chan string // names, as they get a place after waiting
	pushed   chan string // names pushed out of the queue
	refusals map[string]error
}

func newFairHarness(t *testing.T, cfg AdmissionConfig) *fairHarness {
	// The clock starts an hour ahead of the real one and only runs
	// ahead of it, so a context deadline set from it (ctx) is a real one
	// that never expires during the test: one starting now expired
	// before the first call on a loaded machine.
	h := &fairHarness{t: t, a: NewAdmission(cfg), clk: &fakeClock{t: time.Now().Add(time.Hour)}, releases: map[string]func(){},
		granted: make(chan string, 1000), pushed: make(chan string, 1000), refusals: map[string]error{}}
	h.a.now = h.clk.Now
	return h
}

// ctx is the context of a call of s.
func (h *fairHarness) ctx(s spec) context.Context {
	ctx := context.Background()
	if s.caller != "" {
		ctx = WithCaller(ctx, Caller{Name: s.caller, Quota: "token:" + s.caller})
	}
	if s.attempts > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(previousAttemptsKey, strconv.Itoa(s.attempts)))
	}
	if s.dispatched > 0 { // stamped by the tap, its goroutine started s.dispatched later
		ctx = context.WithValue(ctx, connArrivalKey{}, h.clk.Now().Add(-s.dispatched))
		ctx = dispatchClock{h.a}.TagRPC(ctx, &stats.RPCTagInfo{FullMethodName: "/classifier.v1.ClassifierService/Route"})
	}
	if s.deadline > 0 {
		// Real deadlines at fake times: the fake clock runs an hour ahead
		// of the real one, so the context does not expire during the test.
		ctx, cancel := context.WithDeadline(ctx, h.clk.Now().Add(s.deadline))
		h.t.Cleanup(cancel)
		return ctx
	}
	return ctx
}

// submit sends call name of s and reports, once known, whether it
// "started" at once, was "queued" or "refused".
func (h *fairHarness) submit(name string, s spec) string {
	h.t.Helper()
	h.a.mu.Lock()
	before := h.a.enqueued
	h.a.mu.Unlock()
	started := make(chan struct{})
	refused := make(chan error, 1)
	req := &pb.ClassifyRequest{Text: strings.Repeat("x", max(s.bytes-3, 1))}
	go func() {
		r, err := h.a.admit(h.ctx(s), "m", requestBytes(req))
		// One call is submitted at a time: the queue grew for this one.
		h.a.mu.Lock()
		queuedBefore := h.a.enqueued > before
		h.a.mu.Unlock()
		if err != nil {
			h.mu.Lock()
			h.refusals[name] = err
			h.mu.Unlock()
			if queuedBefore {
				h.pushed <- name
			} else {
				refused <- err
			}
			return
		}
		h.mu.Lock()
		h.releases[name] = r
		h.mu.Unlock()
		close(started)
		if queuedBefore {
			h.granted <- name
		}
	}()
	for {
		select {
		case err := <-refused:
			if status.Code(err) != codes.ResourceExhausted {
				h.t.Fatalf("%s: %v, want ResourceExhausted", name, err)
			}
			return "refused"
		case <-started:
			h.a.mu.Lock()
			q := h.a.enqueued > before
			h.a.mu.Unlock()
			if q {
				return "queued" // and granted already
			}
			return "started"
		default:
		}
		h.a.mu.Lock()
		q := h.a.enqueued > before
		h.a.mu.Unlock()
		if q {
			return "queued"
		}
		runtime.Gosched()
	}
}

// must submits name and fails unless the outcome is want.
func (h *fairHarness) must(want, name string, s spec) {
	h.t.Helper()
	if got := h.submit(name, s); got != want {
		h.t.Fatalf("%s %+v: %s, want %s (queued %d, in flight %d, expected wait %v)", name, s, got, want,
			h.a.Queued(), h.a.InFlight(), h.a.ExpectedWait())
	}
}

// release ends name's call after it ran for d on the clock; it reports
// the call that got the place, if one did ("").
func (h *fairHarness) release(name string, d time.Duration) string {
	h.t.Helper()
	got := h.releaseAll(name, d)
	switch len(got) {
	case 0:
		return ""
	case 1:
		return got[0]
	}
	h.t.Fatalf("%s's end started %v, want one call at most", name, got)
	return ""
}

// releaseAll ends name's call after it ran for d on the clock and
// returns the calls that started then (a place, and places a caller
// below its share may take beside it).
func (h *fairHarness) releaseAll(name string, d time.Duration) []string {
	h.t.Helper()
	h.clk.Advance(d)
	h.mu.Lock()
	r := h.releases[name]
	delete(h.releases, name)
	h.mu.Unlock()
	if r == nil {
		h.t.Fatalf("release %s: it has no place", name)
	}
	queued := h.a.Queued()
	r()
	var got []string
	for range queued - h.a.Queued() {
		got = append(got, <-h.granted)
	}
	return got
}

// train runs n calls of s one after another, each holding its place
// for d, so the cost model has seen them.
func (h *fairHarness) train(s spec, n int, d time.Duration) {
	h.t.Helper()
	for i := range n {
		name := fmt.Sprintf("train-%s-%d", s.caller, i)
		h.must("started", name, s)
		if got := h.release(name, d); got != "" {
			h.t.Fatalf("training call's place went to %s", got)
		}
	}
}

// A hog's large calls and another identity's small ones, both with more
// calls waiting than places: each holds its share of the places, so the
// service each gets is the same while the small caller gets several calls
// for each large one; and a small caller that arrives while the hog holds
// every place waits for the first of the hog's calls to end, not longer.
func TestAdmissionFairSharesByCost(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 2, MaxQueue: 100})
	hog := spec{caller: "hog", bytes: 200_000}
	small := spec{caller: "small", bytes: 100}
	h.train(hog, 5, 50*time.Millisecond)
	h.train(small, 5, 5*time.Millisecond)
	if p := time.Duration(h.a.cost.predict(200_000)); p < 40*time.Millisecond || p > 60*time.Millisecond {
		t.Fatalf("expected service of a 200 KB call %v, want about 50ms", p)
	}
	if p := time.Duration(h.a.cost.predict(100)); p < 3*time.Millisecond || p > 7*time.Millisecond {
		t.Fatalf("expected service of a 100 B call %v, want about 5ms", p)
	}
	h.clk.Advance(time.Second) // small is no longer active
	h.must("started", "h0", hog)
	h.must("started", "h1", hog)
	for i := 2; i < 12; i++ {
		h.must("queued", fmt.Sprintf("h%d", i), hog)
	}
	// The hog holds both places and ten calls wait; a small call waits
	// for the first of the hog's calls to end, and gets its place.
	h.must("queued", "s0", small)
	for i := 1; i < 60; i++ {
		h.must("queued", fmt.Sprintf("s%d", i), small)
	}
	if got := h.release("h0", 50*time.Millisecond); got != "s0" {
		t.Fatalf("h0's place went to %q, want s0 (the small caller is below its share)", got)
	}
	// Serve: each call holds its place for its cost; the one due first
	// ends first. Count who gets the places while both have calls
	// waiting.
	cost := func(name string) time.Duration {
		if name[0] == 'h' {
			return 50 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
	ends := map[string]time.Time{"h1": h.clk.Now(), "s0": h.clk.Now().Add(cost("s0"))}
	served := map[byte]time.Duration{}
	count := map[byte]int{}
	for h.a.flows["token:hog"].queued > 0 && h.a.flows["token:small"].queued > 0 {
		if h.a.InFlight() > 2 {
			t.Fatalf("%d calls in flight, places 2", h.a.InFlight())
		}
		name := ""
		for n, e := range ends {
			if name == "" || e.Before(ends[name]) || (e.Equal(ends[name]) && n < name) {
				name = n
			}
		}
		end := ends[name]
		delete(ends, name)
		for _, got := range h.releaseAll(name, end.Sub(h.clk.Now())) {
			ends[got] = h.clk.Now().Add(cost(got))
			served[got[0]] += cost(got)
			count[got[0]]++
		}
	}
	t.Logf("while both waited: hog %d calls (%v), small %d calls (%v)", count['h'], served['h'], count['s'], served['s'])
	if count['s'] < 3*count['h'] {
		t.Fatalf("small got %d places, hog %d: want small several per hog call (fair by cost, not by count)", count['s'], count['h'])
	}
	if served['h'] > 3*served['s']/2 || served['s'] > 3*served['h']/2 {
		t.Fatalf("service while both waited: hog %v, small %v; want within 1.5× of each other", served['h'], served['s'])
	}
}

// The fair-share bound of issue 27: a hog saturating every place with
// many calls waiting, and another identity that sends one small call at a
// time. Its first call waits for the first of the hog's calls to end (at
// most one of the hog's service times); while it stays active (ActiveFor
// after each call) the hog holds no more than its share, so each next
// call starts at once whatever the hog has waiting; and once it has gone,
// the hog takes every place again. Never more calls run than places.
func TestAdmissionSmallCallerWaitsOneServiceAtMost(t *testing.T) {
	const places = 4
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: places, MaxQueue: 1000, ActiveFor: 100 * time.Millisecond})
	hog := spec{caller: "hog", bytes: 240_000, deadline: time.Hour}
	small := spec{caller: "small", bytes: 100, deadline: time.Hour}
	h.train(hog, 3, 40*time.Millisecond)
	h.clk.Advance(time.Second)
	// The hog's four calls started 10ms apart: they end 10ms apart.
	running := []string{}
	for i := range places {
		n := fmt.Sprintf("h%d", i)
		h.must("started", n, hog)
		running = append(running, n)
		h.clk.Advance(10 * time.Millisecond)
	}
	for i := places; i < 40; i++ {
		h.must("queued", fmt.Sprintf("h%d", i), hog)
	}
	h.must("queued", "s0", small)
	// h0 ends 10ms later (40ms after it started): its place is s0's.
	if got := h.release("h0", 0); got != "s0" {
		t.Fatalf("h0's place went to %q, want s0", got)
	}
	running = running[1:]
	// Serve for a while: the small caller's calls take 2ms each, with
	// 1ms between them; the hog's 40ms. The small caller never waits.
	hogEnds := map[string]time.Time{}
	for i, n := range running {
		hogEnds[n] = h.clk.Now().Add(time.Duration(10*(i+1)) * time.Millisecond)
	}
	for i := 1; i <= 100; i++ {
		h.clk.Advance(2 * time.Millisecond)
		if got := h.releaseAll(fmt.Sprintf("s%d", i-1), 0); len(got) != 0 {
			t.Fatalf("s%d's end started %v: the hog took the small caller's place", i-1, got)
		}
		h.clk.Advance(time.Millisecond)
		for n, e := range hogEnds { // the hog's calls due by now end
			if e.After(h.clk.Now()) {
				continue
			}
			delete(hogEnds, n)
			for _, g := range h.releaseAll(n, 0) {
				if g[0] != 'h' {
					t.Fatalf("%s's place went to %s", n, g)
				}
				hogEnds[g] = h.clk.Now().Add(40 * time.Millisecond)
				// The hog had more than its share when the small caller
				// came; it starts calls only to refill its share.
				if n := h.a.flows["token:hog"].inFlight; n > places/2 {
					t.Fatalf("the hog started %s, holding %d places while the small caller is active, share %d", g, n, places/2)
				}
			}
		}
		h.must("started", fmt.Sprintf("s%d", i), small)
		if h.a.InFlight() > places {
			t.Fatalf("%d calls in flight, places %d", h.a.InFlight(), places)
		}
	}
	if n := h.a.flows["token:hog"].inFlight; n != places/2 {
		t.Fatalf("the hog holds %d places beside the small caller, want its share, %d", n, places/2)
	}
	h.release("s100", 2*time.Millisecond)
	// The small caller has gone: after ActiveFor the hog's next end gives
	// it every free place.
	h.clk.Advance(100 * time.Millisecond)
	var first string
	for n := range hogEnds {
		first = n
		break
	}
	if got := h.releaseAll(first, 0); len(got) != places-len(hogEnds)+1 {
		t.Fatalf("after the small caller left, %s's end started %v; want %d of the hog's calls (every free place)", first, got, places-len(hogEnds)+1)
	}
}

// A full queue holding only the hog's calls: another identity's call
// pushes out the hog's newest (RESOURCE_EXHAUSTED with a retry delay),
// never the reverse; a hog's newcomer is refused; and the other identity's
// call gets a place before the hog's older waiting calls.
func TestAdmissionHogCannotRefuseOthers(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 4})
	hog := spec{caller: "hog", bytes: 50_000}
	small := spec{caller: "small", bytes: 100}
	h.train(hog, 3, 20*time.Millisecond)
	h.must("started", "h0", hog)
	for i := 1; i <= 4; i++ {
		h.must("queued", fmt.Sprintf("h%d", i), hog)
	}
	h.must("refused", "h5", hog) // full, and the hog holds the most
	h.must("queued", "s1", small)
	if got := <-h.pushed; got != "h4" {
		t.Fatalf("pushed out %s, want the hog's newest, h4", got)
	}
	err := h.refusals["h4"]
	if status.Code(err) != codes.ResourceExhausted || retryAfter(err) <= 0 {
		t.Fatalf("pushed-out call: %v (retry after %v), want RESOURCE_EXHAUSTED with a retry delay", err, retryAfter(err))
	}
	// The place h0 gives back is s1's: the small caller is below its
	// share, the hog at it.
	if got := h.release("h0", 20*time.Millisecond); got != "s1" {
		t.Fatalf("h0's place went to %q, want s1", got)
	}
	prev := "s1"
	for _, want := range []string{"h1", "h2", "h3", ""} {
		d := 20 * time.Millisecond
		if prev == "s1" {
			d = time.Millisecond
		}
		if got := h.release(prev, d); got != want {
			t.Fatalf("%s's place went to %q, want %q", prev, got, want)
		}
		prev = want
	}
	h.clk.Advance(time.Second)
	if h.a.InFlight() != 0 || h.a.Queued() != 0 || h.a.Flows() != 0 {
		t.Fatalf("after all calls: in flight %d, queued %d, flows %d; want 0", h.a.InFlight(), h.a.Queued(), h.a.Flows())
	}
}

// A call with a deadline of its own waits when the deadline leaves room
// for the expected wait plus its service, and is refused at once, with a
// retry delay, when it does not; a call without one keeps MaxWait.
func TestAdmissionDeadlineAware(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 1000, MaxWait: 20 * time.Millisecond, DeadlineShare: 0.5})
	c := spec{caller: "c", bytes: 100}
	h.train(c, 3, 10*time.Millisecond)
	h.must("started", "r", c)
	// 9 waiting: a newcomer would wait (9 + 1) × 10ms and run 10ms.
	for i := range 9 {
		h.must("queued", fmt.Sprintf("w%d", i), spec{caller: "c", bytes: 100, deadline: time.Hour})
	}
	noDeadline := c
	h.must("refused", "x", noDeadline) // 100ms > MaxWait (overloaded at once: StandingAfter 0)
	h.must("refused", "d200", spec{caller: "c", bytes: 100, deadline: 200 * time.Millisecond})
	h.must("queued", "d250", spec{caller: "c", bytes: 100, deadline: 250 * time.Millisecond})
	// d250 is now waiting too: 110ms + 10ms is more than half of 230ms.
	h.must("refused", "d230", spec{caller: "c", bytes: 100, deadline: 230 * time.Millisecond})
	if d := retryAfter(h.refusals["d230"]); d < 5*time.Millisecond || d > 200*time.Millisecond {
		t.Fatalf("refusal's retry delay %v, want about the excess, 5ms", d)
	}
	// The refusals were at once: nothing moved on the clock, and the
	// refused calls left no state.
	if h.a.Queued() != 10 {
		t.Fatalf("%d waiting, want 10", h.a.Queued())
	}
}

// A retried call goes ahead of its identity's newcomers, and into a full
// queue it pushes out the newest call with fewer attempts.
func TestAdmissionRetryKeepsPriority(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 3})
	c := spec{caller: "c", bytes: 100}
	h.must("started", "r", c)
	for i := range 3 {
		h.must("queued", fmt.Sprintf("n%d", i), c)
	}
	h.must("refused", "n3", c) // full, and no better claim than n0..n2
	h.must("queued", "retry1", spec{caller: "c", bytes: 100, attempts: 1})
	if got := <-h.pushed; got != "n2" {
		t.Fatalf("pushed out %s, want n2 (the newest first attempt)", got)
	}
	h.must("queued", "retry3", spec{caller: "c", bytes: 100, attempts: 3})
	if got := <-h.pushed; got != "n1" {
		t.Fatalf("pushed out %s, want n1", got)
	}
	h.must("queued", "retry1b", spec{caller: "c", bytes: 100, attempts: 1})
	if got := <-h.pushed; got != "n0" {
		t.Fatalf("pushed out %s, want n0", got)
	}
	h.must("refused", "n4", c)
	h.must("refused", "retry1c", spec{caller: "c", bytes: 100, attempts: 1}) // no better claim than those waiting
	prev := "r"
	for _, want := range []string{"retry3", "retry1", "retry1b", ""} {
		if got := h.release(prev, time.Millisecond); got != want {
			t.Fatalf("%s's place went to %q, want %q (most attempts first, then first in)", prev, got, want)
		}
		prev = want
	}
}

// The queue is bounded in requests' bytes as well as in number, and
// identities are forgotten once idle for ActiveFor, or sooner past
// maxIdleFlows: state does not grow with the callers seen.
func TestAdmissionBoundedMemory(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 1000, MaxQueueBytes: 1 << 20})
	h.must("started", "r", spec{caller: "a", bytes: 100})
	h.must("queued", "big0", spec{caller: "a", bytes: 600 << 10})
	h.must("refused", "big1", spec{caller: "a", bytes: 600 << 10}) // 1.2 MiB waiting > 1 MiB
	h.must("queued", "small", spec{caller: "a", bytes: 1 << 10})
	h.release("r", time.Millisecond)
	h.release("big0", time.Millisecond)
	h.release("small", time.Millisecond)
	for i := range maxIdleFlows + 500 { // all within ActiveFor: the clock stands
		n := fmt.Sprintf("c%d", i)
		h.must("started", n, spec{caller: fmt.Sprintf("id%d", i), bytes: 100})
		h.release(n, 0)
	}
	if n := h.a.Flows(); n > maxIdleFlows {
		t.Fatalf("%d identities kept after their calls ended, bound %d", n, maxIdleFlows)
	}
	h.clk.Advance(DefaultAdmissionActiveFor)
	if n := h.a.Flows(); n != 0 || h.a.Queued() != 0 {
		t.Fatalf("%d identities, %d waiting after every call ended and ActiveFor passed; want 0", n, h.a.Queued())
	}
	if h.a.idle.Len() != 0 {
		t.Fatalf("%d idle flows listed, want 0", h.a.idle.Len())
	}
}

// Waits longer than expected (a machine slowed by other work) make the
// expected wait longer, so admission tightens instead of letting callers
// wait into their deadlines.
func TestAdmissionLearnsFromLongWaits(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 100})
	c := spec{caller: "c", bytes: 100}
	h.train(c, 3, 10*time.Millisecond)
	h.must("started", "r", c)
	h.must("queued", "w0", c)
	before := h.a.ExpectedWait()
	// The running call takes 10ms as expected, but the place comes 200ms
	// after w0 queued (expected: 10ms).
	h.clk.Advance(190 * time.Millisecond)
	if got := h.release("r", 10*time.Millisecond); got != "w0" {
		t.Fatalf("r's place went to %q, want w0", got)
	}
	h.must("queued", "w1", c)
	if after := h.a.ExpectedWait(); after <= before {
		t.Fatalf("expected wait with one call waiting: %v after a wait 20× too long, %v before; want it longer", after, before)
	}
}

// BenchmarkAdmissionRefusal is the cost of refusing a call whose deadline
// cannot be met, with 10 and 1,000 calls waiting of one identity and of
// 100 identities: the estimate does not walk the queue, so it does not
// grow with the waiting calls (only with the active identities).
func BenchmarkAdmissionRefusal(b *testing.B) {
	for _, c := range []struct{ waiting, callers int }{{10, 1}, {1000, 1}, {1000, 100}} {
		b.Run(fmt.Sprintf("waiting=%d/callers=%d", c.waiting, c.callers), func(b *testing.B) {
			a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 10_000})
			ctx := WithCaller(context.Background(), Caller{Name: "c", Quota: "token:c"})
			r, err := a.admit(ctx, "m", 100)
			if err != nil {
				b.Fatal(err)
			}
			clk := &fakeClock{t: time.Now()}
			a.now = clk.Now
			clk.Advance(10 * time.Millisecond)
			r() // trained: 10ms a call
			r, _ = a.admit(ctx, "m", 100)
			stop, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := range c.waiting {
				cctx := WithCaller(stop, Caller{Name: "c", Quota: fmt.Sprintf("token:c%d", i%c.callers)})
				wg.Go(func() {
					if r, err := a.admit(cctx, "m", 100); err == nil {
						r()
					}
				})
			}
			for a.Queued() != int64(c.waiting) {
				runtime.Gosched()
			}
			// 50ms left on the admission's clock (an hour on the real one,
			// so the context does not end during the benchmark): the
			// expected wait of 10 calls of 10ms does not fit in 40% of it.
			dl := time.Now().Add(time.Hour)
			clk.Advance(dl.Add(-50 * time.Millisecond).Sub(clk.Now()))
			short, cancelShort := context.WithDeadline(ctx, dl)
			defer cancelShort()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.admit(short, "m", 100); status.Code(err) != codes.ResourceExhausted {
					b.Fatalf("%v, want ResourceExhausted", err)
				}
			}
			b.StopTimer()
			cancel()
			r()
			wg.Wait()
		})
	}
}

// A call overtaken while it waited (here by retries of its identity,
// which go first) waited longer than expected because of the fair order,
// not an error of the estimate: its wait does not make the estimate
// longer. (Learnt from, 400 retrying clients' first attempts, all
// overtaken, inflated it until it refused calls that would have been
// answered.)
func TestAdmissionOvertakenWaitsTeachNothing(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 100})
	c := spec{caller: "c", bytes: 100}
	h.train(c, 3, 10*time.Millisecond)
	h.must("started", "r", c)
	h.must("queued", "first", c) // expects to wait 10ms
	for i := range 10 {
		h.must("queued", fmt.Sprintf("retry%d", i), spec{caller: "c", bytes: 100, attempts: 1})
	}
	prev := "r"
	for i := range 10 {
		want := fmt.Sprintf("retry%d", i)
		if got := h.release(prev, 10*time.Millisecond); got != want {
			t.Fatalf("%s's place went to %q, want %s", prev, got, want)
		}
		prev = want
	}
	if got := h.release(prev, 10*time.Millisecond); got != "first" {
		t.Fatalf("%s's place went to %q, want first", prev, got)
	}
	// first waited 110ms against 10ms expected, overtaken by ten retries.
	h.a.mu.Lock()
	scale := h.a.waitScale
	h.a.mu.Unlock()
	if scale != 1 {
		t.Fatalf("wait scale %v after an overtaken call's long wait, want 1", scale)
	}
}

// The wait scale is a ratio of weighted sums: a call expected to wait
// 1 ms that waited 50 ms (a hiccup of a busy machine) barely moves it
// after calls expected to wait a second waited as long, while waits
// twice as long as expected, sustained, bring it to 2.
func TestAdmissionWaitScaleWeighsByEstimate(t *testing.T) {
	a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})
	for range 40 {
		a.waitedLocked(time.Second, time.Second)
	}
	a.waitedLocked(time.Millisecond, 50*time.Millisecond)
	if a.waitScale > 1.01 {
		t.Fatalf("wait scale %v after one 1ms estimate 50 times too short, want about 1", a.waitScale)
	}
	for range 200 {
		a.waitedLocked(100*time.Millisecond, 200*time.Millisecond)
	}
	if a.waitScale < 1.95 || a.waitScale > 2.05 {
		t.Fatalf("wait scale %v after waits twice the estimates, want 2", a.waitScale)
	}
}

// The place kept for a caller that has gone is free as soon as anything
// happens after ActiveFor: here the hog's next arrival, with none of its
// running calls ending, gives its waiting call the place.
func TestAdmissionForgottenCallerFreesItsPlace(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 2, MaxQueue: 100, ActiveFor: 100 * time.Millisecond})
	hog := spec{caller: "hog", bytes: 100}
	h.must("started", "s0", spec{caller: "small", bytes: 100})
	h.release("s0", time.Millisecond)
	h.must("started", "h0", hog)
	h.must("queued", "h1", hog) // the other place is kept for small
	h.clk.Advance(100 * time.Millisecond)
	h.must("queued", "h2", hog)
	select {
	case got := <-h.granted:
		if got != "h1" {
			t.Fatalf("granted %s, want h1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("h1 still waits for the place kept for a caller gone for ActiveFor")
	}
	if h.a.InFlight() != 2 || h.a.Queued() != 1 {
		t.Fatalf("in flight %d, waiting %d; want 2 and 1", h.a.InFlight(), h.a.Queued())
	}
}

// Under overload a call without a deadline of its own is refused when it
// would wait behind the queue longer than MaxWait, but not the first call
// of a caller below its share: it takes the next place that comes free,
// so its wait is one running call at most, and issue 27 wants another
// caller's small calls answered beside a hog, not refused.
func TestAdmissionNewcomerWithoutDeadlineIsNotRefused(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 2, MaxQueue: 100, MaxWait: time.Millisecond})
	hog := spec{caller: "hog", bytes: 100_000}
	h.train(hog, 3, 30*time.Millisecond)
	h.clk.Advance(time.Second)
	h.must("started", "h0", hog)
	h.must("started", "h1", hog)
	h.must("queued", "h2", spec{caller: "hog", bytes: 100_000, deadline: time.Hour})
	h.must("refused", "h3", hog) // behind the hog's queue: past MaxWait (overloaded at once)
	h.must("queued", "s0", spec{caller: "small", bytes: 100})
	h.must("refused", "s1", spec{caller: "small", bytes: 100}) // behind s0: the bound applies
	if got := h.release("h0", 30*time.Millisecond); got != "s0" {
		t.Fatalf("h0's place went to %q, want s0", got)
	}
}

// A caller's calls within its share of the places wait for them, however
// long the queue ahead, without a deadline of their own: a second
// concurrent call of a caller whose first still waits beside a hog was
// refused by MaxWait (the sixteenth hostile pass: 3.5 % of a two-client
// caller's calls). Past its share the bound applies again.
func TestAdmissionCallsWithinShareWait(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 4, Cores: 2, MaxQueue: 100, MaxWait: time.Millisecond})
	hog := spec{caller: "hog", bytes: 100_000}
	small := spec{caller: "small", bytes: 100}
	h.train(small, 3, time.Millisecond)
	h.train(hog, 3, 30*time.Millisecond)
	h.clk.Advance(time.Second)
	for i := range 4 { // alone, the hog takes every place
		h.must("started", fmt.Sprintf("h%d", i), hog)
	}
	h.must("queued", "h4", spec{caller: "hog", bytes: 100_000, deadline: time.Hour})
	h.must("refused", "h5", hog) // the hog is past its share: MaxWait applies
	h.must("queued", "s0", small)
	h.must("queued", "s1", small)  // refused before: s0 waits ahead of it
	h.must("refused", "s2", small) // past small's share of 2 places
	for i, want := range []string{"s0", "s1"} {
		if got := h.release(fmt.Sprintf("h%d", i), 30*time.Millisecond); got != want {
			t.Fatalf("h%d's place went to %q, want %s", i, got, want)
		}
	}
}

// The cost model keeps each request size's own cost: many small calls
// after a few large ones do not wash out what a large one costs (a single
// line fitted over all calls did), a size between two seen is
// interpolated, and one larger than any seen is not extrapolated.
func TestCostModelKeepsEachSizesCost(t *testing.T) {
	var m costModel
	for range 5 {
		m.observe(200_000, float64(50*time.Millisecond))
	}
	for range 200 {
		m.observe(100, float64(2*time.Millisecond))
	}
	tests := []struct {
		bytes    float64
		min, max time.Duration
	}{
		{100, 2 * time.Millisecond, 2 * time.Millisecond},
		{200_000, 50 * time.Millisecond, 50 * time.Millisecond},
		{20_000, 3 * time.Millisecond, 49 * time.Millisecond},
		{4 << 20, 50 * time.Millisecond, 50 * time.Millisecond},
		{0, 2 * time.Millisecond, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		if p := time.Duration(m.predict(tt.bytes)); p < tt.min || p > tt.max {
			t.Errorf("predict(%v) = %v, want %v..%v", tt.bytes, p, tt.min, tt.max)
		}
	}
}

// A call its caller cancels while it runs is charged the time it held
// its place but teaches the cost model nothing: 16 large calls cut short
// after 1 ms leave a large call's expected service where the ones that
// finished put it.
func TestAdmissionCancelledCallTeachesNothing(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 32, MaxQueue: 10})
	big := spec{caller: "a", bytes: 200_000}
	h.train(big, 5, 50*time.Millisecond)
	for range 16 {
		ctx, cancel := context.WithCancel(h.ctx(big))
		release, err := h.a.admit(ctx, "m", 200_000)
		if err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Millisecond)
		cancel()
		release()
	}
	if p := time.Duration(h.a.cost.predict(200_000)); p < 45*time.Millisecond || p > 55*time.Millisecond {
		t.Fatalf("expected service of a 200 KB call after 16 cancelled ones %v, want about 50ms", p)
	}
}

// Calls that run into their deadlines on a machine slower than the
// estimate end cut short: their time is a lower bound of their service,
// and it teaches the cost model when it is above the estimate, so the
// next call with a short deadline is refused at once instead of admitted
// to run past it (short2000: calls with 50 ms deadlines were admitted on
// an estimate of 2 ms, learnt only from the calls that ended in time,
// and took 200-800 ms in the daemon). Calls cut short below the estimate
// teach nothing (TestAdmissionCancelledCallTeachesNothing).
func TestAdmissionDeadlineOverrunsTeachTheirLowerBound(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 10, DeadlineShare: 0.4})
	small := spec{caller: "a", bytes: 100, deadline: 50 * time.Millisecond}
	h.train(small, 5, 2*time.Millisecond)
	// A call would wait for the one running (2 ms) and run (2 ms): 4 ms
	// fit in 40% of 50 ms.
	h.must("started", "hold", small)
	h.must("queued", "w0", small)
	h.release("hold", 2*time.Millisecond)
	h.release("w0", 2*time.Millisecond)
	// The machine slows down: calls run 30 ms and are cut short (their
	// callers give up); each started at once into the free place.
	for range 20 {
		ctx, cancel := context.WithCancel(h.ctx(small))
		r, err := h.a.admit(ctx, "m", requestBytes(&pb.ClassifyRequest{Text: strings.Repeat("x", 97)}))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		h.clk.Advance(30 * time.Millisecond)
		cancel()
		r()
	}
	if p := time.Duration(h.a.cost.predict(100)); p < 10*time.Millisecond {
		t.Fatalf("expected service of a small call after calls cut short at 30 ms: %v, want well above 2 ms", p)
	}
	// Now a call that must wait is refused at once: its wait and service
	// (about 30 ms each) do not fit in 20 ms of its 50 ms.
	h.must("started", "hold2", small)
	if got := h.submit("late", small); got != "refused" {
		t.Fatalf("a call behind a 30 ms call with a 50 ms deadline: %s, want refused", got)
	}
}

// Long calls hold a core as well as a place (AdmissionConfig.Cores)
// while more than one identity is active: a hog alone runs a long call
// in every place; when another identity comes, the hog refills only its
// share of the cores, so a core stays free for the other's calls however
// many long calls the hog has waiting (beside two CPU-bound calls on a
// 2-core daemon, the other identity's small Route waited 20-30 ms for the
// Go scheduler); the other identity's small calls are not long and start
// at once; once it has gone, the hog takes every place again. Without
// the cores bound the hog would refill two places, its share of them.
func TestAdmissionLongCallsShareTheCores(t *testing.T) {
	const places, cores = 4, 2
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: places, Cores: cores, MaxQueue: 1000, ActiveFor: 100 * time.Millisecond})
	hog := spec{caller: "hog", bytes: 240_000, deadline: time.Hour}
	small := spec{caller: "small", bytes: 100, deadline: time.Hour}
	h.train(small, 3, 2*time.Millisecond)
	h.train(hog, 3, 40*time.Millisecond)
	h.clk.Advance(time.Second) // small is no longer active
	for i := range places {    // alone, the hog uses every place
		h.must("started", fmt.Sprintf("h%d", i), hog)
	}
	for i := places; i < 20; i++ {
		h.must("queued", fmt.Sprintf("h%d", i), hog)
	}
	if n := h.a.LongInFlight(); n != places {
		t.Fatalf("%d long calls in flight, want %d (the hog alone, one per place)", n, places)
	}
	// The small caller's first call waits for the first of the hog's
	// calls to end.
	h.must("queued", "s0", small)
	if got := h.release("h0", 40*time.Millisecond); got != "s0" {
		t.Fatalf("h0's place went to %q, want s0", got)
	}
	// The hog holds three cores, its share is one: h1's and h2's ends
	// start none of its calls (places are free, cores are kept for
	// small); h3's end, leaving it none, starts one.
	for _, n := range []string{"h1", "h2"} {
		if got := h.release(n, 0); got != "" {
			t.Fatalf("%s's end started %s while the small caller is active and the hog holds more than its share of the cores", n, got)
		}
	}
	if got := h.release("h3", 0); got != "h4" {
		t.Fatalf("h3's end started %q, want h4 (the hog below its share of the cores)", got)
	}
	hogRunning := "h4"
	next := 5
	for i := 1; i <= 50; i++ {
		h.clk.Advance(2 * time.Millisecond)
		if got := h.releaseAll(fmt.Sprintf("s%d", i-1), 0); len(got) != 0 {
			t.Fatalf("s%d's end started %v: the hog took a second core", i-1, got)
		}
		if i%20 == 0 { // the hog's call ends: its next takes its core
			if got := h.release(hogRunning, 0); got != fmt.Sprintf("h%d", next) {
				t.Fatalf("%s's end started %q, want h%d", hogRunning, got, next)
			}
			hogRunning = fmt.Sprintf("h%d", next)
			next++
		}
		if n := h.a.flows["token:hog"].long; n > 1 {
			t.Fatalf("the hog holds %d cores while the small caller is active, share 1", n)
		}
		h.must("started", fmt.Sprintf("s%d", i), small)
		if h.a.flows["token:small"].long != 0 {
			t.Fatal("a small call holds a core")
		}
	}
	h.release("s50", 2*time.Millisecond)
	// The small caller has gone: after ActiveFor the hog's next end
	// starts its calls in every place.
	h.clk.Advance(100 * time.Millisecond)
	if got := h.releaseAll(hogRunning, 0); len(got) != places {
		t.Fatalf("after the small caller left, %s's end started %v, want %d of the hog's calls", hogRunning, got, places)
	}
}

// AdmitCPU's calls (an MCP tools/list, whose answer is the daemon's CPU)
// hold a core as well as a place while another identity is active, as
// long calls do, so one identity's flood of them keeps at most its share
// of the cores busy (its share of the places is every core on a 2-core
// machine): a second such call of the hog waits while places are free,
// and starts when its first ends. Their cost is learnt apart: however
// cheap, it does not make a small model call long. Alone, the hog takes
// every place.
func TestAdmissionCPUCallsShareTheCores(t *testing.T) {
	const places, cores = 4, 2
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: places, Cores: cores, MaxQueue: 1000, ActiveFor: 100 * time.Millisecond})
	small := spec{caller: "small", bytes: 100, deadline: time.Hour}
	hog := WithCaller(context.Background(), Caller{Name: "hog", Quota: "token:hog"})
	h.train(small, 3, 2*time.Millisecond)
	list := func() func() {
		t.Helper()
		_, release, err := h.a.AdmitCPU(hog, "mcp/tools/list")
		if err != nil {
			t.Fatal(err)
		}
		return release
	}
	for range 3 { // each 0.1 ms: a twentieth of a small call
		r := list()
		h.clk.Advance(100 * time.Microsecond)
		r()
	}
	if p := h.a.cost.predict(0); p != float64(100*time.Microsecond) {
		t.Fatalf("expected service of a tools/list %v, want 100µs", time.Duration(p))
	}
	if h.a.longLocked(h.a.cost.predict(100)) {
		t.Fatal("a small call is long beside tools/list twenty times cheaper")
	}
	h.must("started", "s0", small)
	first := list()
	if n := h.a.LongInFlight(); n != 1 {
		t.Fatalf("%d calls hold a core, want 1 (the hog's tools/list)", n)
	}
	second := make(chan func(), 1)
	go func() {
		_, release, err := h.a.AdmitCPU(hog, "mcp/tools/list")
		if err != nil {
			t.Error(err)
			release = func() {}
		}
		second <- release
	}()
	for deadline := time.Now().Add(10 * time.Second); h.a.Queued() == 0; time.Sleep(time.Millisecond) {
		if len(second) > 0 || time.Now().After(deadline) {
			t.Fatal("the hog's second tools/list did not wait for a core")
		}
	}
	if in := h.a.InFlight(); in != 2 {
		t.Fatalf("%d calls in flight, want 2: the hog's second tools/list waits for a core, its share of the places is 2", in)
	}
	h.clk.Advance(100 * time.Microsecond)
	first()
	r := <-second
	if n := h.a.LongInFlight(); n != 1 || h.a.Queued() != 0 {
		t.Fatalf("after the first ended: %d calls hold a core, %d wait; want the second holding one", n, h.a.Queued())
	}
	r()
	h.release("s0", 2*time.Millisecond)
	h.clk.Advance(time.Second) // the small caller has gone
	var rs []func()
	for range places {
		rs = append(rs, list()) // alone: every place at once
	}
	if n := h.a.LongInFlight(); n != places {
		t.Fatalf("%d of the hog's tools/list hold a core alone, want %d", n, places)
	}
	for _, r := range rs {
		r()
	}
}
