package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthgrpc "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/request"
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

// TestCheapCallsAdmittedAndClosedPastRate, over a TCP socket with the
// early-reset rule: a call that runs no model (GetIndexInfo) passes its
// caller's share (refused RESOURCE_EXHAUSTED while the caller holds every
// place and the queue), health checks are answered all the same, and a
// connection whose calls are refused past the caller's rate is closed
// by the rule. Outside admission (the sixteenth hostile pass),
// GetIndexInfo at 864 calls a second cost the daemon 14 times its
// client's CPU.
func TestCheapCallsAdmittedAndClosedPastRate(t *testing.T) {
	idx := testIndex(t)
	emb := blockingEmbedder{started: make(chan struct{}, 8), release: make(chan struct{})}
	dom, err := NewDomain(idx, emb, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{}, dom, emb, log)
	if err != nil {
		t.Fatal(err)
	}
	adm := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})
	g := NewRecvGuard(&shareBudget{share: 1 << 20, by: map[string]int64{}})
	gs := grpc.NewServer(Edge{Log: log, Stats: srv.Stats(), Timeout: 30 * time.Second, Admission: adm, Recv: g}.ServerOptions()...)
	pb.RegisterClassifierServiceServer(gs, srv)
	healthpb.RegisterHealthServer(gs, healthgrpc.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(g.Listener(lis)) }()
	t.Cleanup(gs.Stop)
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The anonymous caller (this host) holds the place and the queue.
	holder := pb.NewClassifierServiceClient(dial())
	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := holder.Classify(ctx, &pb.ClassifyRequest{Text: "list github notifications"})
			held <- err
		}()
	}
	<-emb.started
	for adm.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	flood := dial()
	c := pb.NewClassifierServiceClient(flood)
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("GetIndexInfo of a caller holding its every place and the queue: %v, want ResourceExhausted", err)
	}
	if _, err := healthpb.NewHealthClient(flood).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a health check meanwhile: %v", err)
	}
	// Refused at once, one after another: past the burst, each is past
	// the rate and early; the rule closes the connection.
	unavailable := 0
	for i := 0; g.EarlyResetCloses() == 0 && i < 4*(AdmissionRefusalBurst+rapidreset.EarlyResetsMin); i++ {
		_, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
		switch status.Code(err) {
		case codes.ResourceExhausted:
		case codes.Unavailable:
			unavailable++
		default:
			t.Fatalf("GetIndexInfo %d: %v, want ResourceExhausted", i, err)
		}
	}
	if g.EarlyResetCloses() == 0 {
		t.Fatalf("a connection of %d calls refused at once, %d past the rate: not closed", 4*(AdmissionRefusalBurst+rapidreset.EarlyResetsMin), adm.RefusalsPastRate())
	}
	if adm.RefusalsPastRate() < rapidreset.EarlyResetsMin {
		t.Fatalf("%d refusals past the rate when the connection was closed, want at least %d", adm.RefusalsPastRate(), rapidreset.EarlyResetsMin)
	}
	close(emb.release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("held call: %v", err)
		}
	}
	// The caller is served again, on a new connection.
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); err != nil {
		t.Fatalf("GetIndexInfo once the place is free: %v", err)
	}
}
