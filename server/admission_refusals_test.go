package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// TestAdmissionRefusalsPastRateMarked: an identity's refusals past
// AdmissionRefusalBurst at once are past its rate, and mark their
// request (rapidreset.RefusedPastRate) so its connection can be closed;
// another identity's refusals are counted apart, and the rate comes back
// with time.
func TestAdmissionRefusalsPastRateMarked(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})
	a.now = clk.Now
	hog := WithCaller(context.Background(), Caller{Name: "hog", Quota: "token:hog"})
	release, err := a.admit(hog, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	queued := make(chan error, 1)
	go func() {
		r, err := a.admit(hog, "m", 0)
		if err == nil {
			r()
		}
		queued <- err
	}()
	for a.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	refuse := func(ctx context.Context) bool {
		t.Helper()
		ctx, past := rapidreset.WithRequest(ctx)
		if _, err := a.admit(ctx, "m", 0); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a call with the place and the queue taken: %v, want ResourceExhausted", err)
		}
		return past()
	}
	for i := range AdmissionRefusalBurst {
		if refuse(hog) {
			t.Fatalf("refusal %d of a burst of %d marked past the rate", i+1, AdmissionRefusalBurst)
		}
	}
	if !refuse(hog) {
		t.Fatalf("refusal %d at once not marked past the rate", AdmissionRefusalBurst+1)
	}
	if a.RefusalsPastRate() != 1 {
		t.Fatalf("RefusalsPastRate %d, want 1", a.RefusalsPastRate())
	}
	clk.Advance(time.Second)
	for i := range AdmissionRefusalsPerSecond {
		if refuse(hog) {
			t.Fatalf("refusal %d of the %d a second later marked", i+1, AdmissionRefusalsPerSecond)
		}
	}
	if !refuse(hog) {
		t.Fatal("a refusal past the rate a second later not marked")
	}
	// Another identity's refusals have their own rate.
	a.mu.Lock()
	for i := range AdmissionRefusalBurst {
		if a.refusedLocked("token:other", clk.Now()) {
			a.mu.Unlock()
			t.Fatalf("another identity's refusal %d marked past the rate", i+1)
		}
	}
	a.mu.Unlock()
	// A client that backs off (a call every 100 ms, each refused) is
	// never past its rate.
	for range 10 * AdmissionRefusalBurst {
		clk.Advance(100 * time.Millisecond)
		if refuse(hog) {
			t.Fatal("a refusal every 100 ms marked past the rate")
		}
	}
}

