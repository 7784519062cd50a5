package indexbuild

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/classifierd/classifierd/labels"
)

// Cache is a labels.Embedder that remembers the vector of every text it
// embedded, keyed by the sha256 of the model fingerprint and the text, so
// rebuilding an index after a few tools changed embeds only their texts.
// Prune after each build keeps only what that build used, which bounds the
// cache to one index's texts. A Cache is safe for concurrent use.
type Cache struct {
	emb         labels.Embedder
	fingerprint string

	mu     sync.Mutex
	vecs   map[[32]byte][]float32
	used   map[[32]byte]bool
	hits   int
	misses int
}

// NewCache caches emb, which embeds with the model of the fingerprint.
func NewCache(emb labels.Embedder, fingerprint string) *Cache {
	return &Cache{emb: emb, fingerprint: fingerprint, vecs: map[[32]byte][]float32{}, used: map[[32]byte]bool{}}
}

func (c *Cache) key(text string) [32]byte {
	h := sha256.New()
	h.Write([]byte(c.fingerprint))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Embed returns cached vectors and embeds the rest in one call to the
// underlying embedder. Callers must not modify the vectors.
func (c *Cache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([][32]byte, len(texts))
	var miss []int
	c.mu.Lock()
	for i, t := range texts {
		keys[i] = c.key(t)
		c.used[keys[i]] = true
		if v, ok := c.vecs[keys[i]]; ok {
			out[i] = v
			c.hits++
		} else {
			miss = append(miss, i)
		}
	}
	c.misses += len(miss)
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	todo := make([]string, len(miss))
	for j, i := range miss {
		todo[j] = texts[i]
	}
	vecs, err := c.emb.Embed(ctx, todo)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	for j, i := range miss {
		out[i] = vecs[j]
		c.vecs[keys[i]] = vecs[j]
	}
	c.mu.Unlock()
	return out, nil
}

// Missing counts the distinct texts whose vectors are not cached: what
// an Embed of texts would embed.
func (c *Cache) Missing(texts []string) int {
	miss := map[[32]byte]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range texts {
		k := c.key(t)
		if _, ok := c.vecs[k]; !ok {
			miss[k] = true
		}
	}
	return len(miss)
}

// Prune drops every vector not used since the last Prune and returns the
// hits and misses since then.
func (c *Cache) Prune() (hits, misses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.vecs {
		if !c.used[k] {
			delete(c.vecs, k)
		}
	}
	hits, misses = c.hits, c.misses
	c.used, c.hits, c.misses = map[[32]byte]bool{}, 0, 0
	return hits, misses
}

// Len is the number of cached vectors.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.vecs)
}
