package rank

import "sync"

// buffers recycles the slices a turn holds that grow with the catalog
// (BM25 scores and dot products by label or vector, shortlist marks):
// at 100,000 tools they are megabytes per request, and allocating them
// afresh cost page faults and garbage collections over a heap of
// hundreds of megabytes. Only a released request's slices return
// (Ranker.Release); the rest are left to the garbage collector.
type buffers struct {
	f64s, f32s, marks sync.Pool
}

// f64 returns a zeroed slice of n.
func (b *buffers) f64(n int) []float64 {
	if p, ok := b.f64s.Get().(*[]float64); ok && len(*p) == n {
		return *p
	}
	return make([]float64, n)
}

// f32 returns a zeroed slice of n.
func (b *buffers) f32(n int) []float32 {
	if p, ok := b.f32s.Get().(*[]float32); ok && len(*p) == n {
		return *p
	}
	return make([]float32, n)
}

// bools returns a zeroed slice of n.
func (b *buffers) bools(n int) []bool {
	if p, ok := b.marks.Get().(*[]bool); ok && len(*p) == n {
		return *p
	}
	return make([]bool, n)
}

// Release gives the turns' large slices back for later requests to use;
// the turns must not be used afterwards. Scores already computed from
// them keep their values.
func (r *Ranker) Release(ts []Turn) {
	for i := range ts {
		t := &ts[i]
		for _, s := range [][]float64{t.bm, t.exBM} {
			if s != nil {
				clear(s)
				r.bufs.f64s.Put(&s)
			}
		}
		if t.dots != nil {
			d := t.dots
			clear(d)
			r.bufs.f32s.Put(&d)
		}
		if t.sl != nil {
			m := t.sl.in
			clear(m)
			r.bufs.marks.Put(&m)
		}
		t.bm, t.exBM, t.dots, t.sl, t.bmBy = nil, nil, nil, nil, nil
	}
}
