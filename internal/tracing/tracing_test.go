package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestStartOffRecordsNothingAndAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	gotCtx, sp := Start(ctx, Embed)
	if gotCtx != ctx || sp.IsRecording() || trace.SpanFromContext(gotCtx).SpanContext().IsValid() {
		t.Fatalf("Start without a recording parent: ctx changed %v, recording %v", gotCtx != ctx, sp.IsRecording())
	}
	if n := testing.AllocsPerRun(100, func() {
		_, sp := Start(ctx, Score)
		sp.End()
	}); n != 0 {
		t.Fatalf("Start with tracing off: %v allocations per call, want 0", n)
	}
}

func TestStartChildOfTheContextsProvider(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "rpc")
	_, child := Start(ctx, Calibrate)
	child.End()
	parent.End()
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	c := ended[0]
	if c.Name() != Calibrate || c.Parent().SpanID() != parent.SpanContext().SpanID() || c.InstrumentationScope().Name != Scope {
		t.Fatalf("child %q parent %v scope %q; want %q under %v in scope %q", c.Name(), c.Parent().SpanID(),
			c.InstrumentationScope().Name, Calibrate, parent.SpanContext().SpanID(), Scope)
	}
	// A trace the sampler dropped: no child either.
	tpOff := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(rec))
	ctx, p := tpOff.Tracer("test").Start(context.Background(), "rpc")
	if _, sp := Start(ctx, Embed); sp.IsRecording() {
		t.Fatal("a child of an unsampled span records")
	}
	p.End()
}

// BenchmarkStartOff is the cost tracing adds to each stage when it is off.
func BenchmarkStartOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, sp := Start(ctx, Score)
		sp.End()
	}
}

// BenchmarkStartOn is the cost of one recorded child span (started, given
// two attributes, ended and queued to the SDK's batch processor).
func BenchmarkStartOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, parent := tp.Tracer("bench").Start(context.Background(), "rpc")
	defer parent.End()
	b.ReportAllocs()
	for b.Loop() {
		_, sp := Start(ctx, Score)
		sp.SetAttributes(KeyTurns.Int(3), KeyVectors.Int(1000))
		sp.End()
	}
}
