package server

import (
	"container/list"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/request"
)

// TestAdmissionRefusalsPastRateMarked: an identity's refusals past
// AdmissionRefusalBurst at once are past its rate, and mark their
// request (rapidreset.RefusedPastRate) so that an HTTP/1.1 connection
// is closed after its answer;
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

// TestCheapCallsRefusedAtHeadersNeverClosed, over a TCP socket with the
// early-reset rule: a call that runs no model (GetIndexInfo) passes its
// caller's share (refused RESOURCE_EXHAUSTED while the caller holds every
// place and the queue), refused by the tap at its headers (no
// grpc-retry-pushback-ms trailer: the interceptor's refusal sets one),
// health checks are answered all the same, and a connection whose calls
// are refused far past the caller's rate of refusals is never closed nor
// its peer penalized: such refusals are counted, no more. Outside
// admission (the sixteenth hostile pass), GetIndexInfo at 864 calls a
// second cost the daemon 14 times its client's CPU; refused past the
// rate, such calls had their connection closed by the early-reset rule
// (the seventeenth), which also closed an honest hub's connections
// under overload (make loadtest, 1,000 and 2,000 clients of one
// identity: Unavailable).
func TestCheapCallsRefusedAtHeadersNeverClosed(t *testing.T) {
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
	var trailer metadata.MD
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}, grpc.Trailer(&trailer)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("GetIndexInfo of a caller holding its every place and the queue: %v, want ResourceExhausted", err)
	} else if retryAfter(err) <= 0 {
		t.Fatalf("GetIndexInfo refused with no retry delay: %v", err)
	}
	if v := trailer.Get(retryPushbackKey); len(v) != 0 {
		t.Fatalf("GetIndexInfo refused by the interceptor (trailer %s: %v), want by the tap at its headers", retryPushbackKey, v)
	}
	if _, err := healthpb.NewHealthClient(flood).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a health check meanwhile: %v", err)
	}
	// Refused at once, one after another, cheap calls and model calls:
	// far past the burst and the rate, and never closed.
	n := 4 * (AdmissionRefusalBurst + rapidreset.EarlyResetsMin)
	for i := range n {
		var err error
		if i%2 == 0 {
			_, err = c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
		} else {
			_, err = c.Classify(ctx, &pb.ClassifyRequest{Text: "list github notifications"})
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call %d of %d refused at once: %v, want ResourceExhausted (the connection kept)", i, n, err)
		}
	}
	if g.EarlyResetCloses() != 0 || g.PenalizedPeers() != 0 {
		t.Fatalf("%d calls refused at once: %d connections closed, %d peers penalized, want none", n, g.EarlyResetCloses(), g.PenalizedPeers())
	}
	if adm.RefusalsPastRate() < rapidreset.EarlyResetsMin {
		t.Fatalf("%d refusals past the rate counted, want at least %d (counted, no more)", adm.RefusalsPastRate(), rapidreset.EarlyResetsMin)
	}
	close(emb.release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("held call: %v", err)
		}
	}
	// The caller is served again, on the same connection.
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); err != nil {
		t.Fatalf("GetIndexInfo once the place is free: %v", err)
	}
	if g.EarlyResetCloses() != 0 {
		t.Fatal("the connection was closed")
	}
}

// TestPrecheckHTTP: on --http-listen admission's precheck refuses,
// before transcoding, a cheap call and a model call of a caller whose
// own calls fill the place and the queue (with a retry delay), and
// leaves to the interceptor a request with no authenticated caller and
// a method it does not admit (health).
func TestPrecheckHTTP(t *testing.T) {
	a := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})
	hog := WithCaller(context.Background(), Caller{Name: "hog", Quota: "token:hog"})
	release, err := a.admit(hog, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
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
	for _, m := range []string{"/classifier.v1.ClassifierService/GetIndexInfo", "/classifier.v1.ClassifierService/Route"} {
		if err := a.PrecheckHTTP(hog, m, 0); status.Code(err) != codes.ResourceExhausted || RetryAfter(err) <= 0 {
			t.Fatalf("%s of the hog with its place and the queue taken: %v, want ResourceExhausted with a retry delay", m, err)
		}
		if err := a.PrecheckHTTP(hog, m, time.Hour); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("%s of the hog with an hour's deadline: %v, want ResourceExhausted (the full queue)", m, err)
		}
	}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		method string
	}{
		{"no caller", context.Background(), "/classifier.v1.ClassifierService/GetIndexInfo"},
		{"a health check", hog, "/grpc.health.v1.Health/Check"},
	} {
		if err := a.PrecheckHTTP(tc.ctx, tc.method, 0); err != nil {
			t.Errorf("%s: %v, want nil (the interceptor decides)", tc.name, err)
		}
	}
	if a.Queued() != 1 || a.InFlight() != 1 {
		t.Fatalf("queued %d, in flight %d after the prechecks, want 1, 1", a.Queued(), a.InFlight())
	}
	release()
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
}

// TestWaitingCapRefusalEarlyOnlyWhenStale: a caller refused for
// MaxWaitingPerCaller calls waiting for their message counts that
// refusal as an early reset only once its oldest waiting call has waited
// StaleWaitingCall (a client parking calls without their message); a
// hub's calls that merely wait for their goroutine never do. Before the
// eighteenth pass every such refusal was early, and make loadtest's
// 1,000-2,000 local clients had their connections closed.
func TestWaitingCapRefusalEarlyOnlyWhenStale(t *testing.T) {
	w := waitingCalls{byPeer: map[string]*waitingOf{}}
	t0 := time.Unix(1_800_000_000, 0)
	var els []*list.Element
	for i := range MaxWaitingPerCaller {
		el, ok, _ := w.take("hub", false, t0.Add(time.Duration(i)*time.Millisecond))
		if !ok {
			t.Fatalf("call %d of %d refused", i+1, MaxWaitingPerCaller)
		}
		els = append(els, el)
	}
	if _, ok, stale := w.take("hub", false, t0.Add(StaleWaitingCall/2)); ok || stale {
		t.Fatalf("a call past the cap while the oldest waited %v: taken %v, stale %v; want refused, not stale", StaleWaitingCall/2, ok, stale)
	}
	if _, ok, stale := w.take("hub", false, t0.Add(StaleWaitingCall)); ok || !stale {
		t.Fatalf("a call past the cap while the oldest waited %v: taken %v, stale %v; want refused, stale", StaleWaitingCall, ok, stale)
	}
	// The oldest call's message arrives: the next oldest began 1 ms
	// later, so it is not stale yet; a place is free again.
	w.give("hub", false, els[0])
	if _, ok, _ := w.take("hub", false, t0.Add(StaleWaitingCall)); !ok {
		t.Fatal("a call with a place free refused")
	}
	if _, ok, stale := w.take("hub", false, t0.Add(StaleWaitingCall)); ok || stale {
		t.Fatalf("past the cap again, the oldest 1 ms younger than %v: taken %v, stale %v; want refused, not stale", StaleWaitingCall, ok, stale)
	}
	if _, ok, stale := w.take("other", false, t0.Add(StaleWaitingCall)); !ok || stale {
		t.Fatalf("another caller's call: taken %v, stale %v", ok, stale)
	}
}
