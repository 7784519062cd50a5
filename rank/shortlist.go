package rank

import (
	"cmp"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/classifierd/classifierd/index"
	"github.com/viterin/vek/vek32"
)

// Shortlisting: past a catalog size where scoring every label costs more
// than a request should (docs/scale.md), a turn is scored exactly, but
// only against a shortlist of labels: those with a vector in the
// inverted-file cells nearest the turn's embedding, those the lexicon or
// BM25 finds in its text, every category, and the servers of the tools
// shortlisted. Below that size (every catalog `make eval` measures) every
// label is scored, as before.

// DefaultShortlistFrom is the number of server and tool vectors from
// which a Ranker shortlists by default: about 20,000 tools.
const DefaultShortlistFrom = 20_000

const (
	// shortlistScan is the least number of vectors a request's probed
	// cells hold, and shortlistScanShare the least share of all vectors:
	// cells are probed nearest first until both are reached. Other turns
	// than the request (its parts, earlier turns) probe a
	// shortlistOtherTurns-th of that.
	shortlistScan       = 3072
	shortlistScanShare  = 1.0 / 32
	shortlistOtherTurns = 4
	// shortlistNearest is how many labels of a turn's nearest vectors in
	// the probed cells join the shortlist.
	shortlistNearest = 512
	// shortlistLexical is how many labels BM25 adds per turn and kind
	// (descriptions, examples), best first.
	shortlistLexical = 64
	// shortlistServersOf is how many of each turn's nearest tools bring
	// their server onto the shortlist.
	shortlistServersOf = 256
	// The inverted file has ivfCellsPerRoot×√n cells for n vectors; its
	// k-means runs on ivfSamplePerCell sample vectors per cell for
	// ivfIterations rounds.
	ivfCellsPerRoot  = 2
	ivfSamplePerCell = 16
	ivfIterations    = 6
)

// shortlister holds the inverted file once it is built (in the
// background: a ranker serves, scoring every label, while it is).
type shortlister struct {
	ivf     atomic.Pointer[ivf]
	ready   chan struct{}
	labelOf []int32 // vector -> label
	repeats bool    // some shortlisted label has several vectors
}

func newShortlister(idx *index.Index, vs []int32) *shortlister {
	s := &shortlister{ready: make(chan struct{}), labelOf: make([]int32, idx.NumVectors())}
	for li, l := range idx.Labels {
		for v := l.First; v < l.First+l.Count; v++ {
			s.labelOf[v] = int32(li)
		}
		s.repeats = s.repeats || l.Count > 1 && l.Kind != index.KindCategory
	}
	go func() {
		s.ivf.Store(newIVF(idx, vs))
		close(s.ready)
	}()
	return s
}

// get returns the inverted file, nil until it is built (or without one).
func (s *shortlister) get() *ivf {
	if s == nil {
		return nil
	}
	return s.ivf.Load()
}

// ivf is an inverted file over some of an index's vectors: unit
// centroids from spherical k-means, and under each the vectors nearest
// to it.
type ivf struct {
	dims  int
	cent  []float32 // len(cells) × dims
	cells [][]int32 // vector indices by cell
	// rows holds a copy of the vectors cell after cell (cell c's from
	// start[c]), so a probe reads them in order instead of scattered over
	// the index's matrix: a fifth less time per request at 100,000 tools
	// for 4 × dims bytes more per vector (docs/scale.md).
	rows  []float32
	start []int
	// scan is how many vectors a turn's probed cells hold at least.
	scan int
}

// newIVF clusters the vectors vs of idx into about √len(vs) cells. It is
// deterministic: the same index gives the same cells.
func newIVF(idx *index.Index, vs []int32) *ivf {
	n, dims := len(vs), idx.Dims
	k := max(1, min(4096, int(ivfCellsPerRoot*math.Sqrt(float64(n)))))
	f := &ivf{dims: dims, cent: make([]float32, k*dims),
		scan: min(n, max(shortlistScan, int(float64(n)*shortlistScanShare)))}
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	// Train on a sample, seeded with k distinct sample vectors.
	sample := slices.Clone(vs)
	rng.Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
	sample = sample[:min(n, k*ivfSamplePerCell)]
	for c := 0; c < k; c++ {
		copy(f.cent[c*dims:(c+1)*dims], idx.Vector(int(sample[c])))
	}
	assign := make([]int32, len(sample))
	for it := 0; it < ivfIterations; it++ {
		f.nearest(idx, sample, assign)
		sum := make([]float32, k*dims)
		count := make([]int, k)
		for i, v := range sample {
			c := int(assign[i])
			vek32.Add_Inplace(sum[c*dims:(c+1)*dims], idx.Vector(int(v)))
			count[c]++
		}
		for c := 0; c < k; c++ {
			row := sum[c*dims : (c+1)*dims]
			if count[c] == 0 { // an empty cell restarts from a random sample
				copy(row, idx.Vector(int(sample[rng.IntN(len(sample))])))
			}
			if norm := vek32.Norm(row); norm > 0 {
				vek32.DivNumber_Inplace(row, norm)
			}
			copy(f.cent[c*dims:(c+1)*dims], row)
		}
	}
	all := make([]int32, n)
	f.nearest(idx, vs, all)
	f.cells = make([][]int32, k)
	for i, v := range vs {
		f.cells[all[i]] = append(f.cells[all[i]], v)
	}
	f.rows, f.start = make([]float32, 0, n*dims), make([]int, k)
	for c, cell := range f.cells {
		f.start[c] = len(f.rows) / dims
		for _, v := range cell {
			f.rows = append(f.rows, idx.Vector(int(v))...)
		}
	}
	return f
}

// nearest sets out[i] to the cell whose centroid is nearest vs[i], on
// every core.
func (f *ivf) nearest(idx *index.Index, vs []int32, out []int32) {
	workers := max(1, min(runtime.GOMAXPROCS(0), len(vs)/256))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*len(vs)/workers, (w+1)*len(vs)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			scores := make([]float32, len(f.cent)/f.dims)
			for i := lo; i < hi; i++ {
				f.dotCentroids(scores, idx.Vector(int(vs[i])))
				out[i] = int32(vek32.ArgMax(scores))
			}
		}()
	}
	wg.Wait()
}

// dotCentroids sets dst[c] to centroid c's dot product with q.
func (f *ivf) dotCentroids(dst, q []float32) {
	for c := range dst {
		dst[c] = vek32.Dot(f.cent[c*f.dims:(c+1)*f.dims], q)
	}
}

// probe returns the cells to scan for q: nearest first, until they hold
// scan vectors.
func (f *ivf) probe(q []float32, scan int) []int {
	k := len(f.cells)
	scores := make([]float32, k)
	f.dotCentroids(scores, q)
	order := make([]int32, k)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(scores[b], scores[a]) })
	var out []int
	for n, i := 0, 0; n < scan && i < k; i++ {
		out = append(out, int(order[i]))
		n += len(f.cells[order[i]])
	}
	return out
}

// shortlisted is the label set one turn of a request is scored against
// (in), and the union of its turns' sets (u): a label is scored in the
// turns whose set has it.
type shortlisted struct {
	in []bool // by label
	u  *shortUnion
}

// shortUnion is the labels of every turn's set, sorted, and its tools
// and servers.
type shortUnion struct {
	labels, tools, servers []int
}

// has reports whether label li is on the turn's shortlist (every label is
// when there is none).
func (s *shortlisted) has(li int) bool { return s == nil || s.in[li] }

// filter returns the labels of of (the shortlist's tools or servers) that
// are ok, in order: a list of every tool is never read through.
func filter(of []int, ok func(li int) bool) []int {
	out := make([]int, 0, len(of))
	for _, li := range of {
		if ok(li) {
			out = append(out, li)
		}
	}
	return out
}

// shortlist picks, for each turn (embedded as vecs, lexical scores set),
// the labels it is scored against, and sets its dot products for their
// vectors only. A turn probes the inverted file's cells nearest it and
// keeps the labels of its nearest vectors there; its lexical and BM25
// hits, every category, and the servers of its nearest tools join them.
// Each turn is scored exactly against its own labels; the request's
// rankings are over their union.
func (r *Ranker) shortlist(f *ivf, ts []Turn, vecs [][]float32) {
	n, nv := len(r.idx.Labels), r.idx.NumVectors()
	u := &shortUnion{}
	inU := make([]bool, n)
	for i := range ts {
		t := &ts[i]
		sl := &shortlisted{in: r.bufs.bools(n), u: u}
		var own []int
		add := func(li int) {
			if li >= 0 && !sl.in[li] {
				sl.in[li] = true
				own = append(own, li)
			}
		}
		for _, li := range r.cats {
			add(li)
		}
		// dots[v] is set for the vectors of the probed cells, then for
		// every vector of the turn's labels (done marks what is set).
		dots, done := r.bufs.f32(nv), make([]uint64, (nv+63)/64)
		scan := f.scan
		if i > 0 { // parts and earlier turns: their neighbours mostly are the request's
			scan = max(1, scan/shortlistOtherTurns)
		}
		near := newTopK(shortlistNearest, r.short.repeats)
		for _, c := range f.probe(vecs[i], scan) {
			for j, v := range f.cells[c] {
				off := (f.start[c] + j) * f.dims
				d := vek32.Dot(vecs[i], f.rows[off:off+f.dims])
				dots[v], done[v/64] = d, done[v/64]|1<<(v%64)
				near.push(r.short.labelOf[v], d)
			}
		}
		servers := 0
		for _, li := range near.sorted() {
			add(li)
			if si := r.serverOf[li]; si >= 0 && servers < shortlistServersOf {
				add(si)
				servers++
			}
		}
		if t.lexHits == nil {
			r.lx.scan(t)
		}
		for li, h := range t.lexHits {
			if h.kind != lexNone {
				add(li)
				add(r.serverOf[li])
			}
		}
		for _, li := range append(topScored(t.bm, shortlistLexical), topScored(t.exBM, shortlistLexical)...) {
			add(li)
			add(r.serverOf[li])
		}
		slices.Sort(own)
		r.dotLabels(own, vecs[i], dots, done)
		t.dots, t.sl = dots, sl
		for _, li := range own {
			if !inU[li] {
				inU[li] = true
				u.labels = append(u.labels, li)
			}
		}
	}
	slices.Sort(u.labels)
	for _, li := range u.labels {
		switch r.idx.Labels[li].Kind {
		case index.KindTool:
			u.tools = append(u.tools, li)
		case index.KindServer:
			u.servers = append(u.servers, li)
		}
	}
}

// topK keeps the k labels of the highest scores pushed, each label with
// its best score.
type topK struct {
	k    int
	heap []labelScore  // min-heap by score
	pos  map[int32]int // label -> its place in heap
}

type labelScore struct {
	label int32
	score float32
}

// newTopK keeps k labels; repeats says whether a label may be pushed
// more than once.
func newTopK(k int, repeats bool) *topK {
	h := &topK{k: k, heap: make([]labelScore, 0, k)}
	if repeats {
		h.pos = make(map[int32]int, k)
	}
	return h
}

func (h *topK) push(label int32, score float32) {
	if i, ok := h.pos[label]; ok { // never with a nil pos
		if score > h.heap[i].score {
			h.heap[i].score = score
			h.down(i)
		}
		return
	}
	if len(h.heap) < h.k {
		h.heap = append(h.heap, labelScore{label, score})
		if h.pos != nil {
			h.pos[label] = len(h.heap) - 1
		}
		h.up(len(h.heap) - 1)
		return
	}
	if score <= h.heap[0].score {
		return
	}
	if h.pos != nil {
		delete(h.pos, h.heap[0].label)
		h.pos[label] = 0
	}
	h.heap[0] = labelScore{label, score}
	h.down(0)
}

func (h *topK) swap(i, j int) {
	h.heap[i], h.heap[j] = h.heap[j], h.heap[i]
	if h.pos != nil {
		h.pos[h.heap[i].label], h.pos[h.heap[j].label] = i, j
	}
}

func (h *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h.heap[p].score <= h.heap[i].score {
			return
		}
		h.swap(p, i)
		i = p
	}
}

func (h *topK) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(h.heap) && h.heap[l].score < h.heap[m].score {
			m = l
		}
		if l+1 < len(h.heap) && h.heap[l+1].score < h.heap[m].score {
			m = l + 1
		}
		if m == i {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// sorted returns the labels kept, best first.
func (h *topK) sorted() []int {
	ls := slices.Clone(h.heap)
	slices.SortFunc(ls, func(a, b labelScore) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.label, b.label)) })
	out := make([]int, len(ls))
	for i, x := range ls {
		out[i] = int(x.label)
	}
	return out
}

// dotLabels sets dots[v] to q·v for every vector v of the labels ls not
// yet done.
func (r *Ranker) dotLabels(ls []int, q []float32, dots []float32, done []uint64) {
	for _, li := range ls {
		l := &r.idx.Labels[li]
		for v := l.First; v < l.First+l.Count; v++ {
			if done[v/64]&(1<<(v%64)) == 0 {
				dots[v] = vek32.Dot(q, r.idx.Vector(v))
			}
		}
	}
}

// topScored returns the indices of the n largest positive scores, best
// first (ties by index).
func topScored(scores []float64, n int) []int {
	var out []int
	floor := 0.0 // the n-th best so far, once there are n
	for i, v := range scores {
		if v <= floor {
			continue
		}
		j, _ := slices.BinarySearchFunc(out, v, func(li int, v float64) int { return -cmp.Compare(scores[li], v) })
		for j < len(out) && scores[out[j]] == v {
			j++
		}
		if len(out) < n {
			out = append(out, 0)
		}
		copy(out[j+1:], out[j:])
		out[j] = i
		if len(out) == n {
			floor = scores[out[n-1]]
		}
	}
	return out
}
