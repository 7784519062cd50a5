package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/testgrpc"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/session"
)

// TestWatchExposureLimits checks WatchExposure against Config.Watches
// through bufconn: one watch per session, two per client (every call here
// is the same anonymous client), RESOURCE_EXHAUSTED past them, and a
// place back when a stream ends.
func TestWatchExposureLimits(t *testing.T) {
	dom, err := NewDomain(testIndex(t), bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	st, err := session.NewStore(session.Config{AllCategories: []string{"filesystem", "github", "meta"}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{Sessions: st, Watches: session.NewWatches(10, 2, 1)}, dom, bagOfWords{}, log)
	if err != nil {
		t.Fatal(err)
	}
	edge := Edge{Log: log, Stats: srv.Stats(), Timeout: 5 * time.Second, Admission: NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 1})}
	gs := grpc.NewServer(edge.ServerOptions()...)
	pb.RegisterClassifierServiceServer(gs, srv)
	conn := testgrpc.Serve(t, gs)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
	// watch opens a watch of id and waits for its headers (the watch is
	// in place) or its status.
	watch := func(ctx context.Context, id string) error {
		w, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: id})
		if err != nil {
			return err
		}
		if md, err := w.Header(); err != nil || md == nil {
			_, err = w.Recv()
			return err
		}
		return nil
	}
	first, stopFirst := context.WithCancel(ctx)
	if err := watch(first, "a"); err != nil {
		t.Fatalf("first watch of a: %v", err)
	}
	for _, tc := range []struct {
		id   string
		want codes.Code
		msg  string
	}{
		{"a", codes.ResourceExhausted, "too many watches of this session (limit 1): end one before watching again"},
		{"b", codes.OK, ""},
		{"c", codes.ResourceExhausted, "too many watches for this client (limit 2)"},
	} {
		err := watch(ctx, tc.id)
		if st := status.Convert(err); st.Code() != tc.want || st.Message() != tc.msg {
			t.Fatalf("watch %s: %v, want %v %q", tc.id, err, tc.want, tc.msg)
		}
	}
	// The first stream ends: its place comes back once the server has
	// seen it end.
	stopFirst()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := watch(ctx, "c")
		if err == nil {
			break
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("watch c after a's stream ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A session that does not exist is NOT_FOUND before any place is
	// taken.
	if err := watch(ctx, "nobody"); status.Code(err) != codes.NotFound {
		t.Fatalf("watch of no session: %v, want NOT_FOUND", err)
	}
}
