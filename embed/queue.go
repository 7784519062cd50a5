package embed

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/classifierd/classifierd/embed/batch"
	"github.com/classifierd/classifierd/internal/tracing"
)

// tokenized is one text as the model sees it.
type tokenized struct{ ids, types []int64 }

// openQueue starts the micro-batching queue when the configuration asks
// for one (MaxQueue > 0): texts of concurrent Embed calls then share model
// runs of up to ChunkSize texts (1 for a batch-dependent model, so a
// vector never depends on another caller's text), and a call that finds
// MaxQueue texts already waiting fails at once with ErrQueueFull.
func (e *Engine) openQueue() error {
	if e.cfg.MaxQueue <= 0 {
		return nil
	}
	q, err := batch.New(batch.Config{
		MaxBatch:  e.cfg.ChunkSize,
		Window:    e.cfg.BatchWindow,
		MaxQueue:  e.cfg.MaxQueue,
		Workers:   e.cfg.MaxConcurrent,
		MaxWait:   e.cfg.MaxQueueWait,
		ActiveFor: batch.DefaultActiveFor,
		OnRun:     traceRun,
	}, e.runTokenized)
	if err != nil {
		return err
	}
	e.queue = q
	return nil
}

// traceRun records one model run a call's texts went into on the call's
// embed span (if it records): how long they waited, how many texts the run
// held.
func traceRun(ctx context.Context, waited time.Duration, items int) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	sp.AddEvent("model run", trace.WithAttributes(
		tracing.KeyQueueWait.Float64(float64(waited.Microseconds())/1000), tracing.KeyBatchItems.Int(items)))
}

// runTokenized is the queue's run function: one padded model run.
func (e *Engine) runTokenized(ctx context.Context, items []tokenized) ([][]float32, error) {
	ids := make([][]int64, len(items))
	types := make([][]int64, len(items))
	for i, it := range items {
		ids[i], types[i] = it.ids, it.types
	}
	return e.run(ctx, ids, types)
}

// embedQueued sends a call's tokenised texts through the queue.
func (e *Engine) embedQueued(ctx context.Context, items []tokenized) ([][]float32, error) {
	return e.queue.Do(ctx, items)
}

// QueueStats reports what the micro-batching queue has done: model runs,
// the texts they held, calls refused with ErrQueueFull, and texts waiting
// now. It is zero when the engine runs without a queue (MaxQueue 0).
func (e *Engine) QueueStats() batch.Stats {
	if e.queue == nil {
		return batch.Stats{}
	}
	return e.queue.Stats()
}
