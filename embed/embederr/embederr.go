// Package embederr holds the errors an embedding call can return that its
// callers branch on: bad input, an engine shut down, and an engine too busy to queue more. They live apart
// from embed, in pure Go, so a package that maps them (server/ maps them
// to gRPC codes) need not link ONNX Runtime; embed re-exports them, and
// errors.Is(err, embed.ErrEmptyText) and errors.Is(err,
// embederr.ErrEmptyText) are the same test.
package embederr

import "errors"

var (
	// ErrEmptyText reports a text with no content after normalisation.
	ErrEmptyText = errors.New("embed: empty text")
	// ErrTooMany reports a batch larger than the engine's limit.
	ErrTooMany = errors.New("embed: too many texts")
	// ErrClosed reports use of a closed engine.
	ErrClosed = errors.New("embed: engine closed")
	// ErrQueueFull reports a call refused because the engine's queue of
	// texts waiting for the model is full: the caller should back off and
	// retry (the gRPC layer answers RESOURCE_EXHAUSTED). It is returned at
	// once, before any work.
	ErrQueueFull = errors.New("embed: queue full")
)
