package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
)

// A call with its own deadline is admitted to wait only when the time it
// has left, less the return trip learnt from the calls' dispatch delays,
// leaves room for its expected wait and service: the same call that fits
// on a daemon whose calls reach their handlers at once is refused on one
// where they take 10 ms (a 20 ms margin), as its answer would reach the
// caller after its deadline.
func TestAdmissionKeepsALearntReturnMargin(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dispatched time.Duration
		want       string
		margin     time.Duration
	}{
		{"no dispatch delay", 0, "queued", 0},
		{"dispatch delays of 1ms", time.Millisecond, "queued", 2 * time.Millisecond},
		{"dispatch delays of 10ms", 10 * time.Millisecond, "refused", 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 100, DeadlineShare: 0.5})
			c := spec{caller: "c", bytes: 100, dispatched: tc.dispatched}
			h.train(c, 40, 10*time.Millisecond)
			if got := h.a.ReturnMargin(); got != tc.margin {
				t.Fatalf("return margin %v after dispatch delays of %v, want %v", got, tc.dispatched, tc.margin)
			}
			h.must("started", "r", c)
			h.must("queued", "w", spec{caller: "c", bytes: 100, deadline: time.Hour, dispatched: tc.dispatched})
			// Expected: 10ms of w ahead + 10ms until r ends + 10ms of its
			// own = 30ms, within half of 70ms (35ms) but not of 70ms less
			// a 20ms margin (25ms).
			h.must(tc.want, "d70", spec{caller: "c", bytes: 100, deadline: 70 * time.Millisecond, dispatched: tc.dispatched})
		})
	}
}

// The margin follows the dispatch delays as they change: a burst of slow
// dispatches raises it, and the fast ones after it bring it back down.
func TestTripModelFollowsTheDelays(t *testing.T) {
	var m tripModel
	at := time.Unix(1_000_000, 0)
	for range tripSamples {
		m.observe(time.Millisecond, at)
	}
	if got := m.get(at); got != 2*time.Millisecond {
		t.Fatalf("margin %v after delays of 1ms, want 2ms", got)
	}
	for range tripSamples / 2 {
		m.observe(20*time.Millisecond, at)
	}
	if got := m.get(at); got != 40*time.Millisecond {
		t.Fatalf("margin %v with half the recent delays at 20ms, want 40ms", got)
	}
	for range tripSamples {
		m.observe(time.Millisecond, at)
	}
	if got := m.get(at); got != 2*time.Millisecond {
		t.Fatalf("margin %v once the delays are back at 1ms, want 2ms", got)
	}
}

// The margin is learnt from recent calls only: at an idle daemon it
// halves for each tripStale past the first without a call, and the first delay after a
// stale gap starts the samples afresh, not one in 32 of them. (The sixth
// hostile pass: a margin a burst taught stayed at an idle daemon until 32
// new calls had come.)
func TestTripModelForgetsAnOldMargin(t *testing.T) {
	var m tripModel
	at := time.Unix(1_000_000, 0)
	for range tripSamples {
		m.observe(40*time.Millisecond, at)
	}
	if got := m.get(at); got != 80*time.Millisecond {
		t.Fatalf("margin %v after delays of 40ms, want 80ms", got)
	}
	if got := m.get(at.Add(tripStale)); got != 80*time.Millisecond {
		t.Fatalf("margin %v after %v without a call, want 80ms (it stands within tripStale)", got, tripStale)
	}
	if got := m.get(at.Add(2 * tripStale)); got != 40*time.Millisecond {
		t.Fatalf("margin %v after %v without a call, want 40ms (halved)", got, 2*tripStale)
	}
	if got := m.get(at.Add(20 * tripStale)); got > time.Microsecond {
		t.Fatalf("margin %v after %v without a call, want about 0", got, 20*tripStale)
	}
	at = at.Add(tripStale)
	m.observe(time.Millisecond, at)
	if got := m.get(at); got != 2*time.Millisecond {
		t.Fatalf("margin %v from the first delay (1ms) after a stale gap, want 2ms: the old delays forgotten", got)
	}
}

// The tap refuses at once a call that the interceptor would refuse even
// at the cheapest size (a cheap call, as AdmitCPU would: before the
// eighteenth pass it let every such call through), and lets through one
// that may fit, leaving no state behind either way.
func TestAdmissionTapPrechecks(t *testing.T) {
	h := newFairHarness(t, AdmissionConfig{MaxInFlight: 1, MaxQueue: 100, DeadlineShare: 0.5, MinDeadline: 10 * time.Millisecond})
	var refused []string
	h.a.rejected = func(m string) { refused = append(refused, m) }
	c := spec{caller: "c", bytes: 100}
	h.train(c, 3, 10*time.Millisecond)
	h.must("started", "r", c)
	for i := range 4 {
		h.must("queued", fmt.Sprintf("w%d", i), spec{caller: "c", bytes: 100, deadline: time.Hour})
	}
	tp := h.a.tap(nil, func(ctx context.Context, _ *tap.Info) Caller { return CallerFrom(ctx) })
	const route = "/classifier.v1.ClassifierService/Route"
	for _, tc := range []struct {
		name     string
		caller   string
		method   string
		deadline time.Duration
		refused  bool
	}{
		// c: 40ms ahead + 10ms until r ends + 10ms > half of 100ms.
		{"c, 100ms", "c", route, 100 * time.Millisecond, true},
		{"c, 1s", "c", route, time.Second, false},
		// Another identity is below its share: it waits for r only.
		{"d, 100ms", "d", route, 100 * time.Millisecond, false},
		{"d, 30ms", "d", route, 30 * time.Millisecond, true},
		// Less than MinDeadline left: the interceptor's DEADLINE_EXCEEDED.
		{"c, 5ms", "c", route, 5 * time.Millisecond, false},
		// A cheap call (AdmitCPU's) is prechecked as AdmitCPU would
		// decide it; a health check is not (its own per-peer bound).
		{"c, 100ms, a cheap call", "c", "/classifier.v1.ClassifierService/GetIndexInfo", 100 * time.Millisecond, true},
		{"c, 1s, a cheap call", "c", "/classifier.v1.ClassifierService/GetIndexInfo", time.Second, false},
		{"c, 100ms, a health check", "c", "/grpc.health.v1.Health/Check", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(refused)
			ctx := h.ctx(spec{caller: tc.caller, deadline: tc.deadline})
			ctx, err := tp(ctx, &tap.Info{FullMethodName: tc.method, Header: metadata.MD{}})
			if (err != nil) != tc.refused {
				t.Fatalf("tap: %v, want refused %v", err, tc.refused)
			}
			if got := len(refused) - before; got != map[bool]int{false: 0, true: 1}[tc.refused] {
				t.Fatalf("%d refusals counted, want %v", got, tc.refused)
			}
			if _, ok := ctx.Value(connArrivalKey{}).(time.Time); !ok && !tc.refused {
				t.Fatal("the call's context carries no arrival stamp")
			}
		})
	}
	// d's call refused below its share keeps d's share for ActiveFor
	// (the next place that comes free is kept for its next call), as the
	// interceptor's refusal does; the let-through call leaves nothing.
	if n := h.a.Flows(); n != 2 {
		t.Fatalf("%d flows after the tap's checks, want 2 (c's, and d's kept after its refusal)", n)
	}
	h.clk.Advance(DefaultAdmissionActiveFor)
	if n := h.a.Flows(); n != 1 {
		t.Fatalf("%d flows once d has been gone for ActiveFor, want 1 (c's)", n)
	}
	if h.a.Queued() != 4 || h.a.InFlight() != 1 {
		t.Fatalf("queued %d, in flight %d after the tap's checks, want 4, 1", h.a.Queued(), h.a.InFlight())
	}
}
