package server

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// chunkedMethods are admitted a chunk of their work at a time by their
// handler (admitChunk), not once for the whole call. An Embed of 64 texts
// is 64 model runs: about 2 s on a quiet 2-core machine and past the
// daemon's --timeout on a busy one. Admitted whole, it held its place and,
// as a long call, one of the cores for all of them, so another identity's
// small call that needed a core waited for the whole Embed to end (the
// fifth hostile pass: one identity's two concurrent Embeds of 64 × 4 KB
// took another's Route from p50 2-3 ms, p99 36-39 ms to p50 10-45 ms, p99
// 4-10 s, with a DEADLINE_EXCEEDED). A chunk holds them for a few runs.
var chunkedMethods = map[string]bool{
	"/classifier.v1.ClassifierService/Embed": true,
}

// EmbedChunk is how many texts of an Embed call one admission covers: a
// few model runs, so a caller alone still keeps the workers busy and a
// batch-capable model still batches, while another identity waits for at
// most one chunk.
const EmbedChunk = 2

type chunkAdmitKey struct{}

type chunkAdmitter struct {
	a      *Admission
	method string
}

// admitChunk admits one chunk of bytes of a chunked call's work (its
// handler calls it before each chunk and releases after): ctx with the
// caller's flow, the release, or the refusal as a status error (its retry
// delay set as the call's pushback trailer). Without admission (a
// method called with no interceptor, tests) it admits everything.
func admitChunk(ctx context.Context, bytes int64) (context.Context, func(), error) {
	c, ok := ctx.Value(chunkAdmitKey{}).(chunkAdmitter)
	if !ok {
		return ctx, func() {}, nil
	}
	actx, release, err := c.a.Admit(ctx, c.method, bytes)
	if err != nil {
		setPushback(ctx, err)
		return ctx, nil, err
	}
	return actx, release, nil
}

// setPushback sets the retry delay of a refusal err as the call's
// grpc-retry-pushback-ms trailer.
func setPushback(ctx context.Context, err error) {
	if d := retryAfter(err); d > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(retryPushbackKey, strconv.FormatInt(d.Milliseconds(), 10)))
	}
}
