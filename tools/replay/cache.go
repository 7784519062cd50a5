package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"sync"
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
	c := &diskCache{emb: emb, fp: fingerprint, dims: dims, path: path, vecs: map[[32]byte][]float32{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	rec := make([]byte, 32+4*dims)
	for {
		if _, err := io.ReadFull(r, rec); err != nil {
			break // a torn last record is dropped
		}
		var k [32]byte
		copy(k[:], rec)
		v := make([]float32, dims)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(rec[32+4*i:]))
		}
		c.vecs[k] = v
	}
	return c, nil
}

func (c *diskCache) key(text string) [32]byte {
	return sha256.Sum256([]byte(c.fp + "\x00" + text))
}

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
	if len(c.fresh) == 0 {
		return nil
	}
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	buf := make([]byte, 4)
	for _, k := range c.fresh {
		w.Write(k[:])
		for _, x := range c.vecs[k] {
			binary.LittleEndian.PutUint32(buf, math.Float32bits(x))
			w.Write(buf)
		}
	}
	c.fresh = nil
	return errors.Join(w.Flush(), f.Close())
}
