package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAdmissionRejectsWhenFull(t *testing.T) {
	a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1, MinDeadline: 10 * time.Millisecond})
	ctx := context.Background()
	release, err := a.admit(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan error, 1)
	go func() {
		r, err := a.admit(ctx, "m")
		if err == nil {
			r()
		}
		queued <- err
	}()
	for a.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := a.admit(ctx, "m"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call with 1 in flight and 1 queued: %v, want ResourceExhausted", err)
	}
	release()
	if err := <-queued; err != nil {
		t.Fatalf("queued call: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if _, err := a.admit(short, "m"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call with 1ms left: %v, want DeadlineExceeded", err)
	}
	if a.InFlight() != 0 || a.Queued() != 0 {
		t.Fatalf("in flight %d, queued %d after all calls: want 0, 0", a.InFlight(), a.Queued())
	}
}
