package rank

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"sync"
)

// SpanEmbedder embeds a text in one model run with a vector for each byte
// span of it (embed.Engine.EmbedSpans: the mean of the span's token states,
// "late chunking"); a span it cannot pool so gets nil. Vectors uses it,
// where the embedder has it, for the clauses of a request (Clauses): a
// request's needs then cost one model run, not one each.
type SpanEmbedder interface {
	EmbedSpans(ctx context.Context, text string, spans [][2]int) ([]float32, [][]float32, error)
}

// Vectors embeds the turns' texts, one vector per turn. Where the embedder
// is a SpanEmbedder, the request's clauses (turns with a Span) are pooled
// from the request's own run; every other text (a clause that could not
// be pooled, a cue's capability, an earlier turn) is embedded on its own,
// beside that run (see embedSplit). The policies call it and Dense apart,
// so a trace shows the model call (the embed spans) apart from the scoring.
func (r *Ranker) Vectors(ctx context.Context, ts []Turn) ([][]float32, error) {
	se, ok := r.emb.(SpanEmbedder)
	var spans [][2]int
	var spanTurn []int
	if ok && len(ts) > 0 && !isLong(ts[0].Text) {
		for i := 1; i < len(ts); i++ {
			if ts[i].Span != ([2]int{}) {
				spans = append(spans, ts[i].Span)
				spanTurn = append(spanTurn, i)
			}
		}
	}
	texts := make([]string, len(ts))
	for i, t := range ts {
		texts[i] = embedText(t.Text)
	}
	if len(spans) == 0 {
		return r.embedSplit(ctx, texts)
	}
	out := make([][]float32, len(ts))
	var spanErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		var parts [][]float32
		out[0], parts, spanErr = se.EmbedSpans(ctx, texts[0], spans)
		if spanErr == nil {
			for k, ti := range spanTurn {
				out[ti] = parts[k]
			}
		}
	}()
	// The texts that are not spans of the request meanwhile (cues and
	// earlier turns are mostly cached); the spans that could not be
	// pooled after.
	isSpan := map[int]bool{0: true}
	for _, ti := range spanTurn {
		isSpan[ti] = true
	}
	var rest []int
	for i := range ts {
		if !isSpan[i] {
			rest = append(rest, i)
		}
	}
	restErr := r.embedInto(ctx, texts, rest, out)
	<-done
	if err := errors.Join(spanErr, restErr); err != nil {
		return nil, err
	}
	var missing []int
	for _, ti := range spanTurn {
		if out[ti] == nil {
			missing = append(missing, ti)
		}
	}
	if err := r.embedInto(ctx, texts, missing, out); err != nil {
		return nil, err
	}
	return out, nil
}

// embedInto embeds texts[i] for each i of which into out[i].
func (r *Ranker) embedInto(ctx context.Context, texts []string, which []int, out [][]float32) error {
	if len(which) == 0 {
		return nil
	}
	batch := make([]string, len(which))
	for k, i := range which {
		batch[k] = texts[i]
	}
	vecs, err := r.emb.Embed(ctx, batch)
	if err != nil {
		return err
	}
	if len(vecs) != len(batch) {
		return errors.New("rank: embedder returned the wrong number of vectors")
	}
	for k, i := range which {
		out[i] = vecs[k]
	}
	return nil
}

// VectorCache is an Embedder that remembers the vectors of recent texts,
// so the earlier turns of a conversation, which come back with every
// request, and the capabilities of cues, which are the same for every
// request, are not embedded again. It holds at most its capacity of
// vectors, dropping the least recently used. A text's key is the sha256 of
// the caller's scope (CacheScope) and the text: a caller cannot tell from
// the time an answer takes whether another caller sent a text. A
// VectorCache is safe for concurrent use.
type VectorCache struct {
	emb Embedder
	max int

	mu    sync.Mutex
	byKey map[[32]byte]*list.Element
	lru   *list.List // of *cached, most recent first
	hits  uint64
	miss  uint64
}

type cached struct {
	key [32]byte
	vec []float32
}

// NewVectorCache caches up to n vectors of emb's (n < 1: 1).
func NewVectorCache(emb Embedder, n int) *VectorCache {
	return &VectorCache{emb: emb, max: max(1, n), byKey: map[[32]byte]*list.Element{}, lru: list.New()}
}

type scopeKey struct{}

// WithCacheScope returns ctx whose cached vectors are apart from other
// scopes' (the server passes the caller).
func WithCacheScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

func cacheKey(scope, text string) [32]byte {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Embed returns the cached vectors and embeds the others in one call.
// The returned vectors are shared: callers must not modify them.
func (c *VectorCache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	scope, _ := ctx.Value(scopeKey{}).(string)
	out := make([][]float32, len(texts))
	keys := make([][32]byte, len(texts))
	var miss []int
	c.mu.Lock()
	for i, t := range texts {
		sc := scope
		if isCueText(t) {
			sc = "" // a capability is no one's text
		}
		keys[i] = cacheKey(sc, t)
		if e, ok := c.byKey[keys[i]]; ok {
			c.lru.MoveToFront(e)
			out[i] = e.Value.(*cached).vec
			c.hits++
		} else {
			miss = append(miss, i)
			c.miss++
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	todo := make([]string, len(miss))
	for k, i := range miss {
		todo[k] = texts[i]
	}
	vecs, err := c.emb.Embed(ctx, todo)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(todo) {
		return nil, errors.New("rank: embedder returned the wrong number of vectors")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, i := range miss {
		out[i] = vecs[k]
		if _, ok := c.byKey[keys[i]]; ok {
			continue
		}
		c.byKey[keys[i]] = c.lru.PushFront(&cached{key: keys[i], vec: vecs[k]})
		for c.lru.Len() > c.max {
			old := c.lru.Remove(c.lru.Back()).(*cached)
			delete(c.byKey, old.key)
		}
	}
	return out, nil
}

// EmbedSpans passes through to the cached embedder when it is a
// SpanEmbedder (a request's own text is not cached: it is new each time).
func (c *VectorCache) EmbedSpans(ctx context.Context, text string, spans [][2]int) ([]float32, [][]float32, error) {
	if se, ok := c.emb.(SpanEmbedder); ok {
		return se.EmbedSpans(ctx, text, spans)
	}
	v, err := c.Embed(ctx, []string{text})
	if err != nil {
		return nil, nil, err
	}
	return v[0], make([][]float32, len(spans)), nil
}

// Stats returns the cache's hits and misses so far and its size.
func (c *VectorCache) Stats() (hits, misses uint64, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.miss, c.lru.Len()
}

// isCueText reports whether t is the capability text of a cue.
func isCueText(t string) bool {
	return cueTexts[t]
}

var cueTexts = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range cueText {
		m[t] = true
	}
	return m
}()
