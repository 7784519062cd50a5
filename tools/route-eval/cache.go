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
// evaluation with the same model embeds nothing it embedded before. Each
// text is embedded alone by the engine (the default model is batch
// dependent), so a cached vector is the vector a lone call gives.
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

func openDiskCache(path, fingerprint string, dims int, emb interface {
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
	h := sha256.New()
	h.Write([]byte(c.fp))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Embed returns the cached vectors and embeds the others.
func (c *diskCache) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([][32]byte, len(texts))
	var miss []int
	c.mu.Lock()
	for i, t := range texts {
		keys[i] = c.key(t)
		if v, ok := c.vecs[keys[i]]; ok {
			out[i] = v
		} else {
			miss = append(miss, i)
		}
	}
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
		if _, ok := c.vecs[keys[i]]; !ok {
			c.vecs[keys[i]] = vecs[j]
			c.fresh = append(c.fresh, keys[i])
		}
	}
	c.mu.Unlock()
	return out, nil
}

// Flush appends the vectors computed since the last Flush to the file.
func (c *diskCache) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fresh) == 0 {
		return nil
	}
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	rec := make([]byte, 32+4*c.dims)
	for _, k := range c.fresh {
		copy(rec, k[:])
		for i, x := range c.vecs[k] {
			binary.LittleEndian.PutUint32(rec[32+4*i:], math.Float32bits(x))
		}
		if _, err := w.Write(rec); err != nil {
			f.Close()
			return err
		}
	}
	c.fresh = nil
	return errors.Join(w.Flush(), f.Close())
}
