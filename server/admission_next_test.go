package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
)

// The sixth hostile pass's MED finding (issue 27): a hog keeps every
// place busy with long calls and has more of its own waiting; another
// identity, below its share with nothing waiting, sends a small call with
// a 200 ms deadline of its own. Its call takes the next place that comes
// free, so the wait to expect is the time to the next of the running
// calls' ends (here 10 ms), not the mean running call ÷ places (100 ms),
// and not scaled by what the hog's own calls, queued behind each other,
// taught (waitScale): it is admitted to wait, by the interceptor and the
// tap alike, gets the next place before the hog's waiting calls, and its
// next call, its share being kept for it, starts at once. On main the
// call was refused ("expected wait 104ms ... do not fit in the call's
// deadline"), and so was every next one: a caller refused was never
// active, so no place was ever kept for it.
func TestAdmissionBelowShareWaitsForTheNextEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scale float64 // waitScale, as if learnt from the hog's queued calls
	}{
		{"no learnt scale", 1},
		{"scale learnt from the hog", maxWaitScale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFairHarness(t, AdmissionConfig{MaxInFlight: 4, Cores: 2, MaxQueue: 1000, MaxWait: 10 * time.Millisecond})
			hog := spec{caller: "hog", bytes: 8000} // an Embed chunk of two 4 KB texts
			victim := spec{caller: "victim", bytes: 100, deadline: 200 * time.Millisecond}
			h.train(spec{caller: "victim", bytes: 100}, 3, 2*time.Millisecond)
			h.train(hog, 3, 400*time.Millisecond)
			h.clk.Advance(time.Second) // the victim is no longer active
			// The hog's four calls started 100 ms apart: the first ends
			// 10 ms from now.
			for i := range 4 {
				h.must("started", fmt.Sprintf("h%d", i), hog)
				h.clk.Advance(100 * time.Millisecond)
			}
			h.clk.Advance(-10 * time.Millisecond)
			for i := 4; i < 16; i++ {
				h.must("queued", fmt.Sprintf("h%d", i), spec{caller: "hog", bytes: 8000, deadline: time.Hour})
			}
			h.a.mu.Lock()
			h.a.waitScale = tc.scale
			h.a.mu.Unlock()
			// The tap lets it through (it may fit).
			tp := h.a.tap(nil, func(ctx context.Context, _ *tap.Info) Caller { return CallerFrom(ctx) })
			if _, err := tp(h.ctx(victim), &tap.Info{FullMethodName: "/classifier.v1.ClassifierService/Route", Header: metadata.MD{}}); err != nil {
				t.Fatalf("the tap refused the victim's call 10 ms before the next end: %v", err)
			}
			h.must("queued", "v0", victim)
			if got := h.release("h0", 10*time.Millisecond); got != "v0" {
				t.Fatalf("h0's place went to %q, want v0 (below its share, before the hog's waiting calls)", got)
			}
			h.release("v0", 2*time.Millisecond)
			// Its share is kept while it is active: the next call starts
			// at once, whatever the hog has waiting.
			for i := 1; i <= 5; i++ {
				h.clk.Advance(20 * time.Millisecond)
				n := fmt.Sprintf("v%d", i)
				h.must("started", n, victim)
				h.release(n, 2*time.Millisecond)
			}
		})
	}
}

// A call of a caller below its share refused because even the next end
// would come too late for its deadline still makes its caller active: the
// place that comes free next is kept for it (for ActiveFor), not given to
// the hog's waiting calls, so its next call starts at once. On main the
// refused caller left no state, the hog took every place that came free,
// and each of the caller's calls was refused in turn (40 of 40 through
// the daemon), while the same caller's calls without a deadline, admitted
// to wait once, were answered in about a millisecond.
func TestAdmissionRefusedBelowShareKeepsItsShare(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 4, Cores: 2, MaxQueue: 1000})
	hog := spec{caller: "hog", bytes: 8000, deadline: time.Hour}
	victim := spec{caller: "victim", bytes: 100, deadline: 200 * time.Millisecond}
	h.train(spec{caller: "victim", bytes: 100}, 3, 2*time.Millisecond)
	h.train(hog, 3, 400*time.Millisecond)
	h.clk.Advance(time.Second)
	// The hog's calls all started together: the next end is 300 ms away.
	for i := range 4 {
		h.must("started", fmt.Sprintf("h%d", i), hog)
	}
	for i := 4; i < 16; i++ {
		h.must("queued", fmt.Sprintf("h%d", i), hog)
	}
	h.clk.Advance(100 * time.Millisecond)
	tp := h.a.tap(nil, func(ctx context.Context, _ *tap.Info) Caller { return CallerFrom(ctx) })
	if _, err := tp(h.ctx(victim), &tap.Info{FullMethodName: "/classifier.v1.ClassifierService/Route", Header: metadata.MD{}}); err == nil {
		t.Fatal("the tap let through a call with 200 ms left, 300 ms before the next end")
	}
	h.must("refused", "v0", victim)
	h.clk.Advance(100 * time.Millisecond)
	h.must("refused", "v1", victim) // 200 ms before the next end: still too late
	// Told to come back when the place kept for it comes free, not
	// merely by the excess over its budget (200 - 80 ms).
	if d := retryAfter(h.refusals["v1"]); d != 200*time.Millisecond {
		t.Fatalf("v1's retry delay %v, want 200ms (the next end)", d)
	}
	// h0 ends: its place is kept for the victim, active since its refusals.
	if got := h.release("h0", 200*time.Millisecond); got != "" {
		t.Fatalf("h0's place went to %s, want kept for the victim", got)
	}
	h.clk.Advance(20 * time.Millisecond)
	h.must("started", "v2", victim)
	h.release("v2", 2*time.Millisecond)
	// Once the victim has gone for ActiveFor, the hog takes the place.
	h.clk.Advance(DefaultAdmissionActiveFor)
	if got := h.releaseAll("h1", 0); len(got) != 2 || got[0][0] != 'h' || got[1][0] != 'h' {
		t.Fatalf("h1's end started %v after the victim left, want two of the hog's calls (h0's place and h1's)", got)
	}
}

// Each wait scale is learnt from the kind of call it is applied to: the
// waits of calls queued behind others (a hog's, behind its own) teach
// waitScale only, and those of first calls, which wait for the next end,
// teach nextScale only.
func TestAdmissionWaitScalesByKind(t *testing.T) {
	a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})
	for range 100 {
		a.learnWaitLocked(&waiter{expected: 10 * time.Millisecond}, 100*time.Millisecond)
	}
	if a.waitScale < 9 || a.nextScale != 1 {
		t.Fatalf("after queued calls waited 10× their estimates: wait scale %v, next-end scale %v; want about 10 and 1", a.waitScale, a.nextScale)
	}
	for range 100 {
		a.learnWaitLocked(&waiter{expected: 10 * time.Millisecond, next: true}, 30*time.Millisecond)
	}
	if a.nextScale < 2.9 || a.nextScale > 3.1 || a.waitScale < 9 {
		t.Fatalf("after first calls waited 3× their estimates: wait scale %v, next-end scale %v; want about 10 and 3", a.waitScale, a.nextScale)
	}
}
