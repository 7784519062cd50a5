package server

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAdmissionRejectsWhenFull(t *testing.T) {
	a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1, MinDeadline: 10 * time.Millisecond})
	ctx := context.Background()
	release, err := a.admit(ctx, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		r, err := a.admit(ctx, "m", 0)
		if err == nil {
			r()
		}
		queued <- err
	}()
	for a.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := a.admit(ctx, "m", 0); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call with 1 in flight and 1 queued: %v, want ResourceExhausted", err)
	}
	release()
	if err := <-queued; err != nil {
		t.Fatalf("queued call: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if _, err := a.admit(short, "m", 0); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call with 1ms left: %v, want DeadlineExceeded", err)
	}
	if a.InFlight() != 0 || a.Queued() != 0 {
		t.Fatalf("in flight %d, queued %d after all calls: want 0, 0", a.InFlight(), a.Queued())
	}
}

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// admissionHarness queues calls in a known order and records the order in
// which they get their places.
type admissionHarness struct {
	t        *testing.T
	a        *Admission
	clk      *fakeClock
	got      chan string
	mu       sync.Mutex
	releases map[string]func()
	refused  []string
}

func newAdmissionHarness(t *testing.T, cfg AdmissionConfig) *admissionHarness {
	h := &admissionHarness{t: t, a: NewAdmission(cfg), clk: &fakeClock{t: time.Unix(1_000_000, 0)},
		got: make(chan string, 100), releases: map[string]func(){}}
	h.a.now = h.clk.Now
	h.a.rejected = func(string) {}
	return h
}

// take admits name, which must get a place at once.
func (h *admissionHarness) take(name string) {
	h.t.Helper()
	r, err := h.a.admit(context.Background(), "m", 0)
	if err != nil {
		h.t.Fatalf("%s with a place free: %v", name, err)
	}
	h.releases[name] = r
}

// call sends name to admission and returns once it has been refused or
// has joined the queue (then it reports on h.got when it has a place).
// It reports whether it was queued.
func (h *admissionHarness) call(ctx context.Context, name string) bool {
	h.t.Helper()
	before := h.a.Queued()
	refused := make(chan error, 1)
	go func() {
		r, err := h.a.admit(ctx, "m", 0)
		if err != nil {
			refused <- err
			return
		}
		h.mu.Lock()
		h.releases[name] = r
		h.mu.Unlock()
		h.got <- name
	}()
	for {
		select {
		case err := <-refused:
			if status.Code(err) != codes.ResourceExhausted {
				h.t.Fatalf("%s: %v, want ResourceExhausted or a place in the queue", name, err)
			}
			h.refused = append(h.refused, name)
			return false
		default:
		}
		if h.a.Queued() > before {
			return true
		}
		runtime.Gosched()
	}
}

// release gives name's place back after d has passed on the clock, and
// returns the call that got it ("" if none waited).
func (h *admissionHarness) release(name string, d time.Duration) string {
	h.t.Helper()
	h.clk.Advance(d)
	h.mu.Lock()
	r := h.releases[name]
	h.mu.Unlock()
	if r == nil {
		h.t.Fatalf("release %s: it has no place", name)
	}
	queued := h.a.Queued()
	r()
	if queued == 0 {
		return ""
	}
	return <-h.got
}

func TestAdmissionFirstInFirstOut(t *testing.T) {
	h := newAdmissionHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 3})
	ctx := context.Background()
	h.take("running")
	for _, name := range []string{"a", "b", "c"} {
		if !h.call(ctx, name) {
			t.Fatalf("%s refused with %d of 3 waiting", name, h.a.Queued())
		}
	}
	if h.call(ctx, "d") {
		t.Fatal("d queued with 3 of 3 waiting")
	}
	prev := "running"
	for _, want := range []string{"a", "b", "c", ""} {
		if got := h.release(prev, time.Millisecond); got != want {
			t.Fatalf("place of %s went to %q, want %q (first in, first out)", prev, got, want)
		}
		prev = want
	}
	if h.a.InFlight() != 0 || h.a.Queued() != 0 {
		t.Fatalf("in flight %d, queued %d after all calls: want 0, 0", h.a.InFlight(), h.a.Queued())
	}
}

func TestAdmissionRefusesByExpectedWait(t *testing.T) {
	h := newAdmissionHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 100, MaxWait: 20 * time.Millisecond})
	ctx := context.Background()
	h.take("r0")
	// Before any place has come free to a waiting call there is no
	// estimate: only the count bounds the queue.
	for _, name := range []string{"w1", "w2", "w3"} {
		if !h.call(ctx, name) {
			t.Fatalf("%s refused before the queue was ever served", name)
		}
	}
	// Places now come free every 5 ms: a call with k waiting ahead would
	// wait (k+1) × 5 ms.
	if got := h.release("r0", 5*time.Millisecond); got != "w1" {
		t.Fatalf("r0's place went to %q, want w1", got)
	}
	if got := h.a.ExpectedWait(); got != 15*time.Millisecond {
		t.Fatalf("expected wait with 2 waiting and one place per 5 ms: %v, want 15ms", got)
	}
	if !h.call(ctx, "w4") { // 3 × 5 ms
		t.Fatal("w4 (expected wait 15ms, bound 20ms) refused")
	}
	if !h.call(ctx, "w5") { // 4 × 5 ms, at the bound
		t.Fatal("w5 (expected wait 20ms, bound 20ms) refused")
	}
	if h.call(ctx, "x1") { // 5 × 5 ms
		t.Fatal("x1 (expected wait 25ms, bound 20ms) queued")
	}
	// Serving the queue at the same rate makes room for exactly one more.
	if got := h.release("w1", 5*time.Millisecond); got != "w2" {
		t.Fatalf("w1's place went to %q, want w2", got)
	}
	if !h.call(ctx, "w6") {
		t.Fatal("w6 refused after one waiting call was served")
	}
	if h.call(ctx, "x2") {
		t.Fatal("x2 queued behind 20ms of expected wait")
	}
	// A slower service (places every 45 ms from now on) shrinks the
	// queue the bound allows: the estimate follows the recent intervals.
	prev := "w2"
	for _, want := range []string{"w3", "w4", "w5", "w6"} {
		if got := h.release(prev, 45*time.Millisecond); got != want {
			t.Fatalf("%s's place went to %q, want %q", prev, got, want)
		}
		prev = want
	}
	if h.a.Queued() != 0 {
		t.Fatalf("%d waiting after the queue was served, want 0", h.a.Queued())
	}
	// A call into an empty queue is always admitted, however slow the
	// service: it waits for one place only.
	if !h.call(ctx, "w7") {
		t.Fatalf("w7 refused into an empty queue (expected wait %v)", h.a.ExpectedWait())
	}
	if h.a.ExpectedWait() <= 20*time.Millisecond {
		t.Fatalf("expected wait behind one call after 45ms intervals: %v, want more than 20ms", h.a.ExpectedWait())
	}
	if h.call(ctx, "x3") {
		t.Fatal("x3 queued behind one call at a 45ms service interval (bound 20ms)")
	}
	if got := h.release("w6", time.Millisecond); got != "w7" {
		t.Fatalf("w6's place went to %q, want w7", got)
	}
	if got := h.release("w7", time.Millisecond); got != "" {
		t.Fatalf("w7's place went to %q, want nobody", got)
	}
	if want := []string{"x1", "x2", "x3"}; !slices.Equal(h.refused, want) {
		t.Fatalf("refused %v, want %v", h.refused, want)
	}
}

func TestAdmissionCancelledWaiterLeavesQueue(t *testing.T) {
	h := newAdmissionHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 2})
	h.take("r0")
	gone, cancel := context.WithCancel(context.Background())
	if !h.call(gone, "gone") || !h.call(context.Background(), "next") {
		t.Fatal("refused with room in the queue")
	}
	cancel()
	for h.a.Queued() != 1 {
		runtime.Gosched()
	}
	// The place skips the call that gave up, and its slot in the queue is
	// free again.
	if !h.call(context.Background(), "last") {
		t.Fatal("last refused after a waiting call gave up")
	}
	if got := h.release("r0", time.Millisecond); got != "next" {
		t.Fatalf("r0's place went to %q, want next", got)
	}
	if got := h.release("next", time.Millisecond); got != "last" {
		t.Fatalf("next's place went to %q, want last", got)
	}
	if got := h.release("last", time.Millisecond); got != "" {
		t.Fatalf("last's place went to %q, want nobody", got)
	}
	if h.a.InFlight() != 0 {
		t.Fatalf("in flight %d after all calls, want 0", h.a.InFlight())
	}
}

func TestAdmissionBoundsOnlyAStandingQueue(t *testing.T) {
	h := newAdmissionHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 100, MaxWait: 20 * time.Millisecond,
		StandingAfter: 100 * time.Millisecond, IdleAfter: time.Second})
	ctx := context.Background()
	queue := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if !h.call(ctx, n) {
				t.Fatalf("%s refused (overloaded %v, expected wait %v)", n, h.a.Overloaded(), h.a.ExpectedWait())
			}
		}
	}
	refuse := func(n string) {
		t.Helper()
		if h.call(ctx, n) {
			t.Fatalf("%s queued (overloaded %v, expected wait %v)", n, h.a.Overloaded(), h.a.ExpectedWait())
		}
	}
	serve := func(from string, to ...string) {
		t.Helper()
		for _, want := range to {
			if got := h.release(from, 10*time.Millisecond); got != want {
				t.Fatalf("%s's place went to %q, want %q", from, got, want)
			}
			from = want
		}
	}
	h.take("r0")
	queue("w1")
	serve("r0", "w1") // one place per 10 ms
	// A burst into an idle daemon queues past the time bound (5 × 10 ms):
	// it is not overload yet, and it would drain within StandingAfter.
	queue("w2", "w3", "w4", "w5", "w6")
	if h.a.Overloaded() {
		t.Fatal("overloaded by a burst that has waited 0ms")
	}
	// The same queue 100 ms later is standing: the bound applies.
	h.clk.Advance(100 * time.Millisecond)
	refuse("x1")
	if !h.a.Overloaded() {
		t.Fatal("not overloaded after 100ms of standing queue")
	}
	serve("w1", "w2", "w3", "w4", "w5", "w6")
	// Empty for less than IdleAfter: still overloaded, so a second
	// herd is held to the bound.
	h.clk.Advance(500 * time.Millisecond)
	queue("y1") // an empty queue always admits
	refuse("y2")
	serve("w6", "y1")
	// Empty for IdleAfter: a burst queues again.
	h.clk.Advance(time.Second)
	if h.a.Overloaded() {
		t.Fatal("still overloaded after the queue was empty for 1s")
	}
	// (The clock's jumps above, while calls waited, made their waits
	// longer than expected; a real queue's would not: forget that.)
	h.a.mu.Lock()
	h.a.waitScale = 1
	h.a.mu.Unlock()
	// but no more of it than would drain within StandingAfter: past the
	// MaxWait bound (20ms), up to 100ms.
	var burst []string
	for i := 1; len(h.refused) == 2; i++ {
		if i > 50 {
			t.Fatalf("a burst of %d queued with %v expected wait (bound 100ms before overload)", i, h.a.ExpectedWait())
		}
		n := fmt.Sprintf("z%d", i)
		if h.call(ctx, n) {
			burst = append(burst, n)
		}
	}
	// The refused call would have waited past 100 ms, the last one queued
	// (one service less) not, and more than MaxWait.
	next, q := h.a.ExpectedWait(), h.a.Queued()
	if last := next - next/time.Duration(q+1); next <= 100*time.Millisecond || last > 100*time.Millisecond || last <= 20*time.Millisecond {
		t.Fatalf("burst refused at %v expected wait (last admitted: %v) with %d waiting, want the 100ms bound between, past 20ms", next, last, q)
	}
	serve("y1", append(burst, "")...)
	if want := []string{"x1", "y2", fmt.Sprintf("z%d", len(burst)+1)}; !slices.Equal(h.refused, want) {
		t.Fatalf("refused %v, want %v", h.refused, want)
	}
}
