package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// TestAdmissionLockExcludesAndWakes has goroutines take the lock in
// turn, by Lock, LockCtx and TryLock: every increment under it counts
// (mutual exclusion, under the race detector) and every waiter gets it
// in the end (each Unlock wakes one).
func TestAdmissionLockExcludesAndWakes(t *testing.T) {
	l := newAdmissionLock()
	const workers, each = 32, 500
	n := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				switch w % 3 {
				case 0:
					l.Lock()
				case 1:
					if err := l.LockCtx(context.Background()); err != nil {
						t.Error(err)
						return
					}
				default:
					if !l.TryLock() {
						l.Lock()
					}
				}
				n++
				l.Unlock()
			}
		})
	}
	wg.Wait()
	if n != workers*each {
		t.Fatalf("%d increments under the lock, want %d", n, workers*each)
	}
	if w := l.waiting.Load(); w != 0 {
		t.Fatalf("%d waiters counted after all have gone", w)
	}
}

// TestAdmissionLockWaiterLeavesWhenItsCallEnds: a waiter whose context
// ends leaves without the lock, which stays its holder's; the next
// waiter still gets it when it is given back.
func TestAdmissionLockWaiterLeavesWhenItsCallEnds(t *testing.T) {
	l := newAdmissionLock()
	l.Lock()
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error)
	go func() { left <- l.LockCtx(ctx) }()
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("LockCtx after its context ended: %v, want context.Canceled", err)
	}
	if l.TryLock() {
		t.Fatal("the lock was taken from its holder")
	}
	got := make(chan struct{})
	go func() {
		l.Lock()
		close(got)
	}()
	l.Unlock()
	<-got
}

// TestEdgeCallsLeaveTheAdmissionLockWhenTheyEnd holds the admission's
// lock (as a goroutine that lost its processor holding it does) while
// Route calls arrive through a real gRPC listener and client: they wait
// for it, and when their callers give up they leave, without the lock,
// so none of them is decided after its caller has gone (on a saturated
// daemon such calls queued for the lock for hundreds of milliseconds and
// were then decided, oldest first: docs/loadtest.md, "Eleventh pass").
// A call after the lock is given back is admitted and answered.
func TestEdgeCallsLeaveTheAdmissionLockWhenTheyEnd(t *testing.T) {
	adm := NewAdmission(AdmissionConfig{MaxInFlight: 4, MaxQueue: 64})
	addr := serveEdge(t, Edge{Timeout: time.Minute, Admission: adm})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := pb.NewClassifierServiceClient(conn)

	adm.mu.Lock()
	const calls = 16
	ctx, cancel := context.WithCancel(context.Background())
	codesc := make(chan codes.Code, calls)
	for range calls {
		go func() {
			_, err := cl.Route(ctx, &pb.RouteRequest{Query: "deploy the service"})
			codesc <- status.Code(err)
		}()
	}
	waitFor(t, "every call waiting for the admission's lock", func() bool { return adm.mu.waiting.Load() == calls })
	cancel()
	for range calls {
		if c := <-codesc; c != codes.Canceled {
			t.Fatalf("a cancelled call ended %v, want Canceled", c)
		}
	}
	waitFor(t, "the cancelled calls leaving the lock's queue", func() bool { return adm.mu.waiting.Load() == 0 })
	arrivals := adm.arrivals
	adm.mu.Unlock()
	if arrivals != 0 {
		t.Fatalf("%d calls reached the scheduler after their callers had gone, want 0", arrivals)
	}

	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if _, err := cl.Route(cctx, &pb.RouteRequest{Query: "deploy the service"}); err != nil {
		t.Fatalf("a call after the lock was given back: %v", err)
	}
	adm.mu.Lock()
	arrivals = adm.arrivals
	adm.mu.Unlock()
	if arrivals != 1 {
		t.Fatalf("%d calls reached the scheduler, want 1", arrivals)
	}
}

// waitFor polls cond until it holds, failing the test after a minute (a
// guard against a hang, not a measure).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s after a minute", what)
		}
	}
}
