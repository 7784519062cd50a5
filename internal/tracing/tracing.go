// Package tracing starts the child spans of a request's stages (embed,
// score, calibrate) under the span its context already carries.
//
// There is no global tracer: the tracer is the one of the span in the
// context, which the daemon's entry points (the gRPC stats handler, the MCP
// middleware) start with the provider --otel-endpoint built. Without that
// flag no span is recording, Start returns at once with a no-op span, and
// nothing is allocated or sent anywhere.
//
// What goes into a span is sizes, counts, names the catalog or model owns,
// and outcomes: never a prompt, a message, terminal text, a token or a
// session id (docs/operations.md, "Tracing").
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of classifierd's own spans.
const Scope = "github.com/classifierd/classifierd"

// Span names of the stages of a Route, Classify or AnalyzePrompt call.
const (
	// Embed is one call into the model (package embed): tokenising, the
	// time queued for a model run, the run.
	Embed = "embed"
	// Score is the similarity of the request's vectors to every vector of
	// the index, the lexical evidence and their fusion (package rank).
	Score = "score"
	// Calibrate turns scores into confidences and applies the thresholds
	// and the policy (no match, kept needs, abstaining).
	Calibrate = "calibrate"
)

// Attribute keys classifierd sets. None holds request text.
const (
	KeyTexts         = attribute.Key("classifierd.embed.texts")         // texts in one model call
	KeyTokens        = attribute.Key("classifierd.embed.tokens")        // their tokens after truncation
	KeyModel         = attribute.Key("classifierd.model")               // model name of the manifest or index
	KeyQueueWait     = attribute.Key("classifierd.embed.queue_wait_ms") // longest wait of a text for its model run
	KeyBatchItems    = attribute.Key("classifierd.embed.batch_texts")   // texts of the largest model run it shared
	KeyTurns         = attribute.Key("classifierd.turns")               // texts scored (the request, its parts, earlier turns)
	KeyVectors       = attribute.Key("classifierd.index.vectors")       // vectors scored against
	KeyLabels        = attribute.Key("classifierd.labels")              // labels scored
	KeyGeneration    = attribute.Key("classifierd.index.generation")    // index generation serving the call
	KeyAbstained     = attribute.Key("classifierd.abstained")           // nothing reached the threshold
	KeyTopConfidence = attribute.Key("classifierd.top_confidence")      // confidence of the best answer
	KeyResults       = attribute.Key("classifierd.results")             // labels returned
	KeyTools         = attribute.Key("classifierd.tools")               // tools returned (Route)
	KeyTextBytes     = attribute.Key("classifierd.request.text_bytes")  // bytes of the request's texts
	KeyMessages      = attribute.Key("classifierd.request.messages")    // conversation messages sent
	KeyDegraded      = attribute.Key("classifierd.degraded")            // answered by keywords, model failed
)

var noopSpan trace.Span = noop.Span{}

// Start starts the span name as a child of the recording span in ctx. When
// ctx has none (tracing off, or this trace not sampled) it returns ctx and
// a span that records nothing, without allocating.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noopSpan
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name)
}

// Recording reports whether ctx carries a recording span: the cheap check
// before computing attributes.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }
