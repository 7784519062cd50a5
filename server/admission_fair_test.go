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
	// The clock starts now, so a context deadline set from it is real.
	h := &fairHarness{t: t, a: NewAdmission(cfg), clk: &fakeClock{t: time.Now()}, releases: map[string]func(){},
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
	if s.deadline > 0 {
		// Real deadlines at fake times: the fake clock only runs ahead of
		// the real one, so the context does not expire during the test.
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
		r, err := h.a.admit(h.ctx(s), "m", req)
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
// calls waiting than places: the places go by the service each has had,
// not by the number of calls, so the small caller gets several calls
// for each large one; and a small caller below its share starts at once
// while the hog holds every place.
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
	h.must("started", "h0", hog)
	h.must("started", "h1", hog)
	for i := 2; i < 12; i++ {
		h.must("queued", fmt.Sprintf("h%d", i), hog)
	}
	// The hog holds both places and ten calls wait; a small call starts
	// at once (a third place, as small is below its share of 1 of 2).
	h.must("started", "s0", small)
	// Its next call waits: small holds its share.
	for i := 1; i < 60; i++ {
		h.must("queued", fmt.Sprintf("s%d", i), small)
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
	ends := map[string]time.Time{}
	for _, n := range []string{"h0", "h1", "s0"} {
		ends[n] = h.clk.Now().Add(cost(n))
	}
	served := map[byte]time.Duration{'h': 100 * time.Millisecond, 's': 5 * time.Millisecond} // h0, h1, s0
	count := map[byte]int{'h': 2, 's': 1}
	for len(h.a.flows) == 2 && h.a.flows["token:hog"].waiting.Len() > 0 && h.a.flows["token:small"].waiting.Len() > 0 {
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

// A full queue holding only the hog's calls: another identity's call
// pushes out the hog's newest (RESOURCE_EXHAUSTED with a retry delay),
// never the reverse; a hog's newcomer is refused.
func TestAdmissionHogCannotRefuseOthers(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 4})
	hog := spec{caller: "hog", bytes: 50_000}
	small := spec{caller: "small", bytes: 100}
	h.train(hog, 3, 20*time.Millisecond)
	h.must("started", "s0", small)
	h.must("started", "h0", hog) // hog below its share: a second place
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
	// The small caller's call gets the place small gives back, not the
	// hog's older waiting calls; the hog keeps its own share of one.
	if got := h.release("s0", time.Millisecond); got != "s1" {
		t.Fatalf("s0's place went to %q, want s1", got)
	}
	if got := h.release("h0", 20*time.Millisecond); got != "h1" {
		t.Fatalf("h0's place went to %q, want h1", got)
	}
	if got := h.release("s1", time.Millisecond); got != "" {
		t.Fatalf("s1's place went to %q, want nobody (the hog holds its one place)", got)
	}
	for _, want := range []string{"h2", "h3"} {
		prev := map[string]string{"h2": "h1", "h3": "h2"}[want]
		if got := h.release(prev, 20*time.Millisecond); got != want {
			t.Fatalf("%s's place went to %q, want %s", prev, got, want)
		}
	}
	h.release("h3", 20*time.Millisecond)
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
// identities are forgotten once idle: state does not grow with the
// callers seen.
func TestAdmissionBoundedMemory(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 1000, MaxQueueBytes: 1 << 20})
	h.must("started", "r", spec{caller: "a", bytes: 100})
	h.must("queued", "big0", spec{caller: "a", bytes: 600 << 10})
	h.must("refused", "big1", spec{caller: "a", bytes: 600 << 10}) // 1.2 MiB waiting > 1 MiB
	h.must("queued", "small", spec{caller: "a", bytes: 1 << 10})
	h.release("r", time.Millisecond)
	h.release("big0", time.Millisecond)
	h.release("small", time.Millisecond)
	for i := range 500 {
		n := fmt.Sprintf("c%d", i)
		h.must("started", n, spec{caller: fmt.Sprintf("id%d", i), bytes: 100})
		h.release(n, time.Millisecond)
	}
	if n := h.a.Flows(); n != 0 || h.a.Queued() != 0 {
		t.Fatalf("%d identities, %d waiting after every call ended; want 0", n, h.a.Queued())
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
