package route

import (
	"math"
	"slices"
	"strings"

	"github.com/viterin/vek/vek32"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
)

// A catalog's shape is what the router can know about it without labels,
// from its own description vectors: how close each server stands to its
// nearest sibling ("twin": a catalog of near-duplicate servers, such as
// many versions of one model API, cannot tell them apart, and a top score
// there means less than in a catalog of distinct servers), how alike its
// servers are on the whole, and how long its descriptions are. The
// evidence map weighs these with the request's own evidence, so the same
// scores mean a different probability in a different catalog.

// shapeBudget bounds the dot products computing a catalog's shape: up to
// 4096 servers every pair is compared; beyond, each server is compared
// with an even sample of budget/servers others (its twin is then the
// nearest of those).
const shapeBudget = 4096 * 4096

// shape is a catalog's shape.
type shape struct {
	twin    map[int]float64 // server label -> cosine to its nearest other server
	catTwin float64         // mean twin over the servers
	twinSD  float64         // standard deviation of twin over the servers
	catCos  float64         // mean cosine between two servers
	words   float64         // log(1 + mean words of the servers' descriptions, or their tools')
}

// catalogShape computes the shape of rk's servers, each represented by its
// description vector, or where it has no description by the normalised
// sum of its tools' description vectors (a catalog of single tools under
// named servers), or else by its name's vector. budget bounds the dot
// products (shapeBudget).
func catalogShape(rk *rank.Ranker, budget int) shape {
	idx := rk.Index()
	srvs := rk.Servers()
	sh := shape{twin: make(map[int]float64, len(srvs))}
	n := len(srvs)
	if n == 0 {
		return sh
	}
	pos := make(map[int]int, n)
	for i, li := range srvs {
		pos[li] = i
	}
	vecs := make([][]float32, n)
	sums := make([][]float32, n)
	descWords := make([]float64, n)
	toolWords := make([]float64, n)
	tools := make([]float64, n)
	for _, ti := range rk.Tools() {
		i, ok := pos[rk.ServerOf(ti)]
		l := &idx.Labels[ti]
		if !ok || l.Count == 0 || l.Sources[0] != index.SourceDescription {
			continue
		}
		if sums[i] == nil {
			sums[i] = make([]float32, idx.Dims)
		}
		vek32.Add_Inplace(sums[i], idx.Vector(l.First))
		toolWords[i] += float64(len(strings.Fields(l.Description)))
		tools[i]++
	}
	var words float64
	for i, li := range srvs {
		l := &idx.Labels[li]
		switch {
		case l.Count > 0 && l.Sources[0] == index.SourceDescription:
			vecs[i] = idx.Vector(l.First)
			descWords[i] = float64(len(strings.Fields(l.Texts[0])))
		case sums[i] != nil:
			if nv := math.Sqrt(float64(vek32.Dot(sums[i], sums[i]))); nv > 0 {
				vek32.DivNumber_Inplace(sums[i], float32(nv))
			}
			vecs[i] = sums[i]
			descWords[i] = toolWords[i] / tools[i]
		default:
			vecs[i] = idx.Vector(l.First)
		}
		words += descWords[i]
	}
	vec := func(i int) []float32 { return vecs[i] }
	sh.words = math.Log1p(words / float64(n))
	if n == 1 {
		sh.twin[srvs[0]] = 0
		return sh
	}
	m := n - 1 // others each server is compared with
	if n*m > budget {
		m = max(1, budget/n)
	}
	stride := float64(n-1) / float64(m)
	var cosSum, cosN float64
	tw := make([]float64, n)
	for i := range n {
		vi := vec(i)
		best := math.Inf(-1)
		for k := range m {
			// The k-th of m others, evenly spread over the n-1 servers
			// that are not i.
			j := int(float64(k) * stride)
			if j >= i {
				j++
			}
			d := float64(vek32.Dot(vi, vec(j)))
			best = math.Max(best, d)
			cosSum += d
			cosN++
		}
		tw[i] = best
		sh.twin[srvs[i]] = best
	}
	sh.catCos = cosSum / cosN
	sh.catTwin, sh.twinSD = meanSD(tw)
	return sh
}

// shapeFeatures are the evidence features computed from the catalog's shape.
var shapeFeatures = []string{"twin", "twin_z", "cat_twin", "cat_cos", "cat_words"}

// weighsShape reports whether ev weighs the catalog's shape (only then is
// it computed: it costs up to shapeBudget dot products at load).
func weighsShape(ev *calibrate.Evidence) bool {
	for _, ts := range [][]calibrate.EvidenceTerm{ev.Terms, ev.Temperature} {
		for _, t := range ts {
			if slices.Contains(shapeFeatures, t.Feature) {
				return true
			}
		}
	}
	return false
}
