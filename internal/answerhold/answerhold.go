// Package answerhold keeps a model call's admission until its answer is
// encoded. On the HTTP/JSON listener the transcoder turns a call's
// protobuf answer into JSON after the handler has returned: for an Embed
// of 64 texts that is 24,576 floats formatted one by one, more CPU than
// the model runs when the embeddings come from the cache. Released when
// the handler returned, that work ran outside admission, as many at once
// as a caller sent, and slowed every other identity's calls (the ninth
// hostile pass: one identity's cached Embeds took another's small Route
// from p50 2.5 ms to 43.6 ms). With a hold, the listener's request
// context carries the releases of the call's admission, and the listener
// gives them back when the answer's first byte is written (the encoding
// is done by then; the write itself may wait on a slow reader, which must
// not hold a place) or when the request ends.
package answerhold

import (
	"context"
	"sync"
)

type key struct{}

type hold struct {
	mu       sync.Mutex
	answered bool
	releases []func()
}

// With returns ctx carrying a hold and answered, which runs the releases
// held in it and every one held after (at once). answered is safe to
// call more than once and from any goroutine.
func With(ctx context.Context) (context.Context, func()) {
	h := &hold{}
	return context.WithValue(ctx, key{}, h), h.answer
}

func (h *hold) answer() {
	h.mu.Lock()
	h.answered = true
	rs := h.releases
	h.releases = nil
	h.mu.Unlock()
	for _, r := range rs {
		r()
	}
}

// Until runs release when ctx's answer is written: at once when ctx
// carries no hold (a call on the gRPC listener, whose answer is encoded
// as protobuf by the handler's goroutine already) or its answer has been
// written, else when the listener calls the hold's answered.
func Until(ctx context.Context, release func()) {
	h, ok := ctx.Value(key{}).(*hold)
	if ok {
		h.mu.Lock()
		if !h.answered {
			h.releases = append(h.releases, release)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
	release()
}
