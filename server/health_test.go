package server

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestHealthWatchesBounded: health needs no token, so its Watch streams
// are bounded per peer and in all (the ninth hostile pass held 32,000
// open: +496 MB, 65,000 goroutines). Over a real socket: the peer's
// fourth watch is refused RESOURCE_EXHAUSTED, and one closed frees its
// place; Check is never refused.
func TestHealthWatchesBounded(t *testing.T) {
	h := NewHealth()
	h.MaxWatchesPerPeer, h.MaxWatches = 3, 100
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, h)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// watch opens a Watch and returns the code of its first answer.
	watch := func(ctx context.Context) codes.Code {
		st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return status.Code(err)
		}
		_, err = st.Recv()
		return status.Code(err)
	}
	var cancels []context.CancelFunc
	for i := 0; i < 3; i++ {
		wctx, wcancel := context.WithCancel(ctx)
		cancels = append(cancels, wcancel)
		if c := watch(wctx); c != codes.OK {
			t.Fatalf("watch %d: %v, want OK", i, c)
		}
	}
	if c := watch(ctx); c != codes.ResourceExhausted {
		t.Fatalf("the peer's fourth watch: %v, want RESOURCE_EXHAUSTED", c)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Check beside the watches: %v", err)
	}
	cancels[0]()
	// The server sees the cancel a moment later.
	for deadline := time.Now().Add(10 * time.Second); ; {
		wctx, wcancel := context.WithCancel(ctx)
		c := watch(wctx)
		if c == codes.OK {
			wcancel()
			break
		}
		wcancel()
		if c != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("a watch after one closed: %v, want OK", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range cancels[1:] {
		c()
	}

	// In all: past MaxWatches, whatever the peer holds.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h.mu.Lock()
		n := h.watches
		if n == 0 {
			h.MaxWatches = 1
		}
		h.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watches still counted after every one closed", n)
		}
	}
	if c := watch(ctx); c != codes.OK {
		t.Fatalf("the one watch MaxWatches allows: %v, want OK", c)
	}
	if c := watch(ctx); c != codes.ResourceExhausted {
		t.Fatalf("a watch past MaxWatches: %v, want RESOURCE_EXHAUSTED", c)
	}
}
