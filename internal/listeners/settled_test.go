package listeners

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/vanguard"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	classifierv1 "github.com/classifierd/classifierd/gen/classifier/v1"
)

// routeEcho answers Route with the query it was given as its category.
type routeEcho struct {
	classifierv1.UnimplementedClassifierServiceServer
}

func (routeEcho) Route(_ context.Context, r *classifierv1.RouteRequest) (*classifierv1.RouteResponse, error) {
	if r.GetQuery() == "" {
		return nil, status.Error(codes.InvalidArgument, "empty query")
	}
	return &classifierv1.RouteResponse{}, nil
}

// TestSettledBodies: the transcoder's request bodies reach the gRPC
// server read whole, and one the transcoder refuses (JSON that does not
// parse, a field of the wrong type) never reaches it: vanguard 0.4.0
// answers such a body from within gRPC's read of it, on gRPC's reading
// goroutine, while gRPC's handler goroutine writes the same answer's
// headers when the request ends another way (its client reset it): the
// twenty-fifth hostile pass stopped the daemon with "concurrent map
// writes" in 10 s of unterminated JSON bodies sent 64 at a time. Under
// -race, the concurrent requests below reset as they are refused are a
// data race without settledBodies.
func TestSettledBodies(t *testing.T) {
	gs := grpc.NewServer()
	classifierv1.RegisterClassifierServiceServer(gs, routeEcho{})
	var calls atomic.Int64
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		gs.ServeHTTP(w, r)
	})
	tc, err := newTranscoderFor(gs.GetServiceInfo(), counted, vanguard.WithCodec(newJSONCodec))
	if err != nil {
		t.Fatal(err)
	}
	h := holdAnswers(tc)
	post := func(ctx context.Context, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/classifier.v1.ClassifierService/Route", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := post(context.Background(), `{"query":"github issues"}`); w.Code != http.StatusOK || calls.Load() != 1 {
		t.Fatalf("a good body: %d %q, %d calls of the gRPC server; want 200, 1", w.Code, w.Body, calls.Load())
	}
	for _, body := range []string{`{"query":"` + strings.Repeat("a", 70000), `{"query":5}`, `{"max_servers":"x"}`, `[`} {
		calls.Store(0)
		w := post(context.Background(), body)
		b, _ := io.ReadAll(w.Body)
		if w.Code != http.StatusBadRequest || !strings.Contains(string(b), "request body") {
			t.Errorf("body %.20q: %d %.100q, want 400 naming the request body", body, w.Code, b)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("body %.20q: the gRPC server was called %d times, want never", body, n)
		}
	}
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			go cancel() // reset as it is refused
			post(ctx, `{"query":"`+strings.Repeat("a", 4000))
		})
	}
	wg.Wait()
}
