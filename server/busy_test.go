package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/embed/batch"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/request"
)

// queuedEmbedder is the daemon's embedding queue (embed/batch) over the
// bag-of-words fake, one text per run, whose runs wait for gate.
type queuedEmbedder struct {
	q       *batch.Batcher[string, []float32]
	started chan struct{}
}

func newQueuedEmbedder(t *testing.T, maxQueue int, gate chan struct{}) *queuedEmbedder {
	t.Helper()
	e := &queuedEmbedder{started: make(chan struct{}, 100)}
	q, err := batch.New(batch.Config{MaxBatch: 1, MaxQueue: maxQueue, Workers: 1},
		func(ctx context.Context, texts []string) ([][]float32, error) {
			e.started <- struct{}{}
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return bagOfWords{}.Embed(ctx, texts)
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	e.q = q
	return e
}

func (e *queuedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.q.Do(ctx, texts)
}

// A Route that finds the embedding queue full is RESOURCE_EXHAUSTED at
// once, with a message that says to back off; AnalyzePrompt answers from
// keywords, degraded; the calls already admitted are answered.
func TestRouteQueueFullIsResourceExhausted(t *testing.T) {
	gate := make(chan struct{})
	emb := newQueuedEmbedder(t, 1, gate)
	// Building the domain embeds nothing; the index comes from the fake.
	dom, err := NewDomain(testIndex(t), emb, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{MaxEmbedBatch: 2}, dom, emb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c := pb.NewClassifierServiceClient(dial(t, func(gs *grpc.Server) { pb.RegisterClassifierServiceServer(gs, srv) }))
	ctx := context.Background()
	route := func() chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := c.Route(ctx, &pb.RouteRequest{Query: "check github notifications"})
			ch <- err
		}()
		return ch
	}
	running := route()
	<-emb.started // its text holds the only worker
	queued := route()
	for emb.q.Stats().Queued != 1 {
		select {
		case err := <-queued:
			t.Fatalf("second Route ended before the queue was released: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	_, err = c.Route(ctx, &pb.RouteRequest{Query: "read file config json"})
	wantCode(t, err, codes.ResourceExhausted)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "retry") || strings.HasPrefix(msg, "embed:") {
		t.Fatalf("message %q: want advice to retry, without the package prefix", msg)
	}
	// AnalyzePrompt keeps its contract for a model it cannot use: a
	// keyword answer marked degraded, here saying why.
	an, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "check github notifications"})
	if err != nil {
		t.Fatalf("AnalyzePrompt with the queue full: %v, want a degraded answer", err)
	}
	if !an.GetDegraded() || !strings.Contains(an.GetReasoning(), "overloaded") {
		t.Fatalf("AnalyzePrompt: degraded %v, reasoning %q; want degraded, overloaded", an.GetDegraded(), an.GetReasoning())
	}
	close(gate)
	for _, ch := range []chan error{running, queued} {
		if err := <-ch; err != nil {
			t.Fatalf("admitted Route: %v", err)
		}
	}
}
