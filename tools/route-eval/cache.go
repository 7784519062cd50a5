package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	"github.com/classifierd/classifierd/internal/vecfile"
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
	spans *spanCache
}

func openDiskCache(path, fingerprint string, dims int, emb interface {
	Embed(context.Context, []string) ([][]float32, error)
}) (*diskCache, error) {
	vecs, err := vecfile.Load(path, dims)
	if err != nil {
		return nil, err
	}
	c := &diskCache{emb: emb, fp: fingerprint, dims: dims, path: path, vecs: vecs}
	if err := c.loadSpans(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *diskCache) key(text string) [32]byte { return vecfile.Key(c.fp, text) }

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

// Flush appends the vectors computed since the last Flush to the files.
func (c *diskCache) Flush() error {
	if err := c.flushSpans(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := vecfile.Append(c.path, c.dims, c.fresh, c.vecs); err != nil {
		return err
	}
	c.fresh = nil
	return nil
}

// spanCache is diskCache's store of EmbedSpans results: for a text and its
// spans, the text's vector and each span's (a zero vector for a span the
// engine could not pool), in a file of its own.
type spanCache struct {
	mu    sync.Mutex
	vecs  map[[32]byte][][]float32
	fresh [][32]byte
}

func (c *diskCache) spansPath() string { return c.path + ".spans" }

func (c *diskCache) loadSpans() error {
	c.spans = &spanCache{vecs: map[[32]byte][][]float32{}}
	f, err := os.Open(c.spansPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		var head [36]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return nil
		}
		n := int(binary.LittleEndian.Uint32(head[32:]))
		if n > 64 {
			return nil // not a file of ours
		}
		buf := make([]byte, 4*c.dims*n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil
		}
		var k [32]byte
		copy(k[:], head[:32])
		vs := make([][]float32, n)
		for i := range vs {
			v := make([]float32, c.dims)
			var norm float32
			for j := range v {
				v[j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*(i*c.dims+j):]))
				norm += v[j] * v[j]
			}
			if norm > 0 {
				vs[i] = v
			}
		}
		c.spans.vecs[k] = vs
	}
}

// EmbedSpans is the engine's EmbedSpans, remembered by text and spans.
func (c *diskCache) EmbedSpans(ctx context.Context, text string, spans [][2]int) ([]float32, [][]float32, error) {
	se, ok := c.emb.(interface {
		EmbedSpans(context.Context, string, [][2]int) ([]float32, [][]float32, error)
	})
	if !ok {
		return nil, nil, errors.New("route-eval: the engine does not embed spans")
	}
	key := c.key(fmt.Sprintf("spans %v\x00%s", spans, text))
	c.spans.mu.Lock()
	vs, hit := c.spans.vecs[key]
	c.spans.mu.Unlock()
	if hit {
		return vs[0], vs[1:], nil
	}
	whole, parts, err := se.EmbedSpans(ctx, text, spans)
	if err != nil {
		return nil, nil, err
	}
	c.spans.mu.Lock()
	c.spans.vecs[key] = append([][]float32{whole}, parts...)
	c.spans.fresh = append(c.spans.fresh, key)
	c.spans.mu.Unlock()
	return whole, parts, nil
}

func (c *diskCache) flushSpans() error {
	c.spans.mu.Lock()
	defer c.spans.mu.Unlock()
	if len(c.spans.fresh) == 0 {
		return nil
	}
	f, err := os.OpenFile(c.spansPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, k := range c.spans.fresh {
		vs := c.spans.vecs[k]
		var head [36]byte
		copy(head[:], k[:])
		binary.LittleEndian.PutUint32(head[32:], uint32(len(vs)))
		w.Write(head[:])
		buf := make([]byte, 4*c.dims)
		for _, v := range vs {
			clear(buf)
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			w.Write(buf)
		}
	}
	c.spans.fresh = nil
	return errors.Join(w.Flush(), f.Close())
}
