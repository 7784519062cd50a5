package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/testgrpc"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/session"
)

// rawBytes is a client codec that sends its bytes as they are.
type rawBytes struct{}

func (rawBytes) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawBytes) Unmarshal(data []byte, v any) error { *v.(*[]byte) = data; return nil }
func (rawBytes) Name() string                       { return "proto" }

// edgeClient serves ClassifierService with sessions behind the Edge (codec,
// anonymous auth, admission) on bufconn.
func edgeClient(t *testing.T) (*grpc.ClientConn, *session.Store) {
	t.Helper()
	idx := testIndex(t)
	dom, err := NewDomain(idx, bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	st, err := session.NewStore(session.Config{AllCategories: []string{"filesystem", "github", "meta"}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{Sessions: st}, dom, bagOfWords{}, log)
	if err != nil {
		t.Fatal(err)
	}
	edge := Edge{Log: log, Stats: srv.Stats(), Timeout: 5 * time.Second, Admission: NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})}
	gs := grpc.NewServer(edge.ServerOptions()...)
	pb.RegisterClassifierServiceServer(gs, srv)
	conn := testgrpc.Serve(t, gs)
	return conn, st
}

func TestEdgeUnparseableRequestsAreInvalidArgument(t *testing.T) {
	conn, _ := edgeClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bad := []byte{0x0f, 0xff, 0xff} // field 1, wire type 7: not protobuf
	var out []byte
	err := conn.Invoke(ctx, "/classifier.v1.ClassifierService/Classify", &bad, &out, grpc.ForceCodec(rawBytes{}))
	wantCode(t, err, codes.InvalidArgument)
	desc := &grpc.StreamDesc{StreamName: "WatchExposure", ServerStreams: true}
	cs, err := conn.NewStream(ctx, desc, "/classifier.v1.ClassifierService/WatchExposure", grpc.ForceCodec(rawBytes{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(&bad); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, cs.RecvMsg(&out), codes.InvalidArgument)
	// Well-formed calls still work on the same connection.
	if _, err := pb.NewClassifierServiceClient(conn).Classify(ctx, &pb.ClassifyRequest{Text: "list github notifications"}); err != nil {
		t.Fatal(err)
	}
}

func TestEdgeWatchExposureUnavailableWhenStoreCloses(t *testing.T) {
	conn, st := edgeClient(t)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.CreateSession(ctx, &pb.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: s.GetSession().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	// The watch is registered some time after the call returns: change
	// the exposure until it sees a change.
	if _, err := testgrpc.FirstChange(ctx, c, s.GetSession().GetId(), w, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var rerr error
	for rerr == nil {
		_, rerr = w.Recv()
	}
	wantCode(t, rerr, codes.Unavailable)
}

// blockingEmbedder holds every call until release is closed.
type blockingEmbedder struct {
	started chan struct{}
	release chan struct{}
}

func (b blockingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return bagOfWords{}.Embed(ctx, texts)
}

// TestEdgeRejectsAtOnceWhenFull holds the only place and the only queue
// slot with calls the model does not finish, then times refused calls:
// RESOURCE_EXHAUSTED comes back without waiting (figures logged, not
// asserted), and so does a cheap call (GetIndexInfo) of the same caller.
func TestEdgeRejectsAtOnceWhenFull(t *testing.T) {
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
	gs := grpc.NewServer(Edge{Log: log, Stats: srv.Stats(), Timeout: 30 * time.Second, Admission: adm}.ServerOptions()...)
	pb.RegisterClassifierServiceServer(gs, srv)
	conn := testgrpc.Serve(t, gs)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "list github notifications"})
			held <- err
		}()
	}
	<-emb.started // one runs
	for adm.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	var worst time.Duration
	const probes = 50
	var total time.Duration
	for range probes {
		start := time.Now()
		_, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "list github notifications"})
		took := time.Since(start)
		wantCode(t, err, codes.ResourceExhausted)
		total += took
		worst = max(worst, took)
	}
	// A cheap call of the caller holding every place passes its share
	// too: refused at once (TestCheapCallsRefusedAtHeadersNeverClosed).
	wantCode(t, func() error { _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); return err }(), codes.ResourceExhausted)
	t.Logf("%d refused calls while full: mean %v, max %v (bufconn round trip included)", probes, total/probes, worst)
	close(emb.release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("held call: %v", err)
		}
	}
}
