package server

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/answerhold"
	"github.com/classifierd/classifierd/request"
)

// TestAdmissionHeldUntilAnswered: through the admission interceptor, a
// model call on a request with an answer hold (the HTTP/JSON listener's)
// keeps its place after its handler returned, until the answer is
// written (the hold's answered); an Embed keeps its last chunk's. Without
// a hold (the gRPC listener) the place is free when the handler returns.
// Before, the place was given back when the handler returned, and the
// HTTP/JSON listener encoded the answer outside admission (the ninth
// hostile pass: an Embed hog's answers, 79% of the daemon's CPU).
func TestAdmissionHeldUntilAnswered(t *testing.T) {
	dom, err := NewDomain(testIndex(t), bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{MaxEmbedBatch: 8}, dom, bagOfWords{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		method string
		req    any
		h      grpc.UnaryHandler
	}{
		{"/classifier.v1.ClassifierService/Route", &pb.RouteRequest{Query: "check github notifications"},
			func(ctx context.Context, req any) (any, error) { return srv.Route(ctx, req.(*pb.RouteRequest)) }},
		{"/classifier.v1.ClassifierService/Embed", &pb.EmbedRequest{Texts: []string{"a", "b", "c", "d", "e"}},
			func(ctx context.Context, req any) (any, error) { return srv.Embed(ctx, req.(*pb.EmbedRequest)) }},
	}
	for _, c := range calls {
		for _, hold := range []bool{true, false} {
			a := NewAdmission(AdmissionConfig{MaxInFlight: 4, MaxQueue: 4})
			ctx, answered := context.Background(), func() {}
			if hold {
				ctx, answered = answerhold.With(ctx)
			}
			if _, err := a.unary()(ctx, c.req, &grpc.UnaryServerInfo{FullMethod: c.method}, c.h); err != nil {
				t.Fatalf("%s: %v", c.method, err)
			}
			want := int64(0)
			if hold {
				want = 1
			}
			if got := a.InFlight(); got != want {
				t.Errorf("%s, hold %v: %d places taken after the handler returned, want %d", c.method, hold, got, want)
			}
			answered()
			if got := a.InFlight(); got != 0 {
				t.Errorf("%s, hold %v: %d places taken after the answer was written, want 0", c.method, hold, got)
			}
		}
	}
}
