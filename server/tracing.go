package server

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/classifierd/classifierd/internal/tracing"
)

// answerTrace is what a Route, Classify or AnalyzePrompt call records on
// its span (the gRPC server span, or an MCP tool call's): sizes, counts
// and the outcome, never the text.
type answerTrace struct {
	textBytes, messages int
	results, tools      int
	abstained, degraded bool
	top                 float32
}

// traceAnswer sets a on the span in ctx, with the model and index
// generation that answered; it does nothing when the span does not record
// (tracing off).
func traceAnswer(ctx context.Context, cur *served, a answerTrace) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		tracing.KeyModel.String(cur.dom.Index.Model),
		tracing.KeyGeneration.Int64(int64(cur.load.Generation)),
		tracing.KeyTextBytes.Int(a.textBytes),
		tracing.KeyResults.Int(a.results),
		tracing.KeyAbstained.Bool(a.abstained),
		tracing.KeyTopConfidence.Float64(float64(a.top)),
	}
	if a.messages > 0 {
		attrs = append(attrs, tracing.KeyMessages.Int(a.messages))
	}
	if a.tools > 0 {
		attrs = append(attrs, tracing.KeyTools.Int(a.tools))
	}
	if a.degraded {
		attrs = append(attrs, tracing.KeyDegraded.Bool(true))
	}
	sp.SetAttributes(attrs...)
}
