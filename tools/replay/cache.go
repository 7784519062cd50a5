package main

import (
	"context"
	"sync"

	"github.com/classifierd/classifierd/internal/vecfile"
)

// diskCache is an embedder that keeps every vector it computed, keyed by
// sha256(model fingerprint, text), in memory and in a file, so a second
// replay embeds nothing it embedded before. Each text is embedded alone
// (the default model's vectors depend a little on the batch), so a
// cached vector is what a lone call, as Route makes, gives.
type diskCache struct {
	emb interface {
		Embed(context.Context, []string) ([][]float32, error)
	}
	fp   string
	dims int
	path string

	mu    sync.Mutex
	vecs  map[[32]byte][]float32
	fresh [][32]byte
}

func openCache(path, fingerprint string, dims int, emb interface {
	Embed(context.Context, []string) ([][]float32, error)
}) (*diskCache, error) {
	vecs, err := vecfile.Load(path, dims)
	if err != nil {
		return nil, err
	}
	return &diskCache{emb: emb, fp: fingerprint, dims: dims, path: path, vecs: vecs}, nil
}

func (c *diskCache) key(text string) [32]byte { return vecfile.Key(c.fp, text) }

// Embed implements the embedder interfaces.
func (c *diskCache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		k := c.key(t)
		c.mu.Lock()
		v, ok := c.vecs[k]
		c.mu.Unlock()
		if !ok {
			vs, err := c.emb.Embed(ctx, []string{t})
			if err != nil {
				return nil, err
			}
			v = vs[0]
			c.mu.Lock()
			c.vecs[k] = v
			c.fresh = append(c.fresh, k)
			c.mu.Unlock()
		}
		out[i] = v
	}
	return out, nil
}

// Flush appends the vectors computed since the last flush to the file.
func (c *diskCache) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := vecfile.Append(c.path, c.dims, c.fresh, c.vecs); err != nil {
		return err
	}
	c.fresh = nil
	return nil
}
