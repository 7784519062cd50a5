package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
)

// counts are the figures of one group of tasks.
type counts struct {
	N        int // tasks
	Full5    int // every need has a server among the first 5 (no threshold)
	Steps    int // needs
	Steps5   int // needs with a server among the first 5
	FullDef  int // every need has a server in the default answer
	F1       float64
	SetSize  int
	Top1     int // the first server answers a need
	Util     int // utility needs (probe)
	Util5    int
	UtilDef  int
	Abstain  int // out of scope: the default answer is empty
	OOSTasks int
}

// result is one catalog's evaluation.
type result struct {
	Name    string
	All     counts
	ByNeeds map[string]*counts
	ByKind  map[string]*counts
	// Conf and Needed are the confidences of the first five servers of
	// every in-scope task and whether each is needed (per-server ECE).
	Conf   []float64
	Needed []bool
	// Probs and Labels are every candidate's confidence and whether it is
	// needed (all candidates, not only the first five).
	ECE         float64
	Reliability []calibrate.Bin
}

// observe adds one task: ranked is the answer without threshold (up to 5
// servers, best first, with confidences), def the default answer.
func (r *result) observe(t *task, ranked []string, conf []float64, def []string) {
	groups := []*counts{&r.All}
	if r.ByNeeds == nil {
		r.ByNeeds, r.ByKind = map[string]*counts{}, map[string]*counts{}
	}
	b := needsBucket(t)
	if r.ByNeeds[b] == nil {
		r.ByNeeds[b] = &counts{}
	}
	if r.ByKind[t.Kind] == nil {
		r.ByKind[t.Kind] = &counts{}
	}
	groups = append(groups, r.ByNeeds[b], r.ByKind[t.Kind])
	if len(t.Steps) == 0 {
		for _, c := range groups {
			c.OOSTasks++
			if len(def) == 0 {
				c.Abstain++
			}
		}
		return
	}
	covered := func(got []string, st []string) bool {
		return slices.ContainsFunc(st, func(s string) bool { return slices.Contains(got, s) })
	}
	var hit5, hitDef, util, util5, utilDef int
	for i, st := range t.Steps {
		h5, hd := covered(ranked, st), covered(def, st)
		if h5 {
			hit5++
		}
		if hd {
			hitDef++
		}
		if i < len(t.Utility) && t.Utility[i] {
			util++
			if h5 {
				util5++
			}
			if hd {
				utilDef++
			}
		}
	}
	// Set F1: precision over the returned servers (needed by some step),
	// recall over the needs.
	var f1 float64
	if len(def) > 0 {
		good := 0
		for _, s := range def {
			if t.needed[s] {
				good++
			}
		}
		p, rc := float64(good)/float64(len(def)), float64(hitDef)/float64(len(t.Steps))
		if p+rc > 0 {
			f1 = 2 * p * rc / (p + rc)
		}
	}
	for _, c := range groups {
		c.N++
		c.Steps += len(t.Steps)
		c.Steps5 += hit5
		if hit5 == len(t.Steps) {
			c.Full5++
		}
		if hitDef == len(t.Steps) {
			c.FullDef++
		}
		c.F1 += f1
		c.SetSize += len(def)
		if len(ranked) > 0 && t.needed[ranked[0]] {
			c.Top1++
		}
		c.Util += util
		c.Util5 += util5
		c.UtilDef += utilDef
	}
	for i, s := range ranked {
		r.Conf = append(r.Conf, conf[i])
		r.Needed = append(r.Needed, t.needed[s])
	}
}

func (r *result) finish() {
	r.ECE = calibrate.ECE(r.Conf, r.Needed, calibrate.ECEBins)
	r.Reliability = calibrate.Reliability(r.Conf, r.Needed, calibrate.ECEBins)
}

func frac(a, b int) string {
	if b == 0 {
		return "  -  "
	}
	return fmt.Sprintf("%.3f", float64(a)/float64(b))
}

func (c *counts) f1() string {
	if c.N == 0 {
		return "  -  "
	}
	return fmt.Sprintf("%.3f", c.F1/float64(c.N))
}

// print writes one catalog's figures.
func (r *result) print(w io.Writer, label string) {
	a := &r.All
	fmt.Fprintf(w, "== %s%s: %d tasks (%d out of scope)\n", r.Name, label, a.N+a.OOSTasks, a.OOSTasks)
	fmt.Fprintf(w, "  needed servers in the first 5 (no threshold), by number of needs:")
	for _, b := range buckets {
		if c := r.ByNeeds[b]; c != nil && c.N > 0 {
			fmt.Fprintf(w, "  %s: %s (%d)", b, frac(c.Full5, c.N), c.N)
		}
	}
	fmt.Fprintf(w, "  all: %s\n", frac(a.Full5, a.N))
	fmt.Fprintf(w, "  needs in the first 5 %s  top-1 %s  default answer: all needs %s  set F1 %s  mean size %.2f\n",
		frac(a.Steps5, a.Steps), frac(a.Top1, a.N), frac(a.FullDef, a.N), a.f1(), float64(a.SetSize)/float64(max(1, a.N)))
	if a.Util > 0 {
		fmt.Fprintf(w, "  utility needs (%d): in the first 5 %s, in the default answer %s\n", a.Util, frac(a.Util5, a.Util), frac(a.UtilDef, a.Util))
	}
	if a.OOSTasks > 0 {
		fmt.Fprintf(w, "  out of scope: default answer empty for %s\n", frac(a.Abstain, a.OOSTasks))
	}
	fmt.Fprintf(w, "  per-server ECE (first 5 servers) %.3f\n", r.ECE)
	if len(r.ByKind) > 1 && len(r.ByKind) <= 6 {
		var kinds []string
		for k := range r.ByKind {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			c := r.ByKind[k]
			if c.N == 0 {
				continue
			}
			fmt.Fprintf(w, "    %-14s %4d: all needs in the first 5 %s, in the default answer %s, set F1 %s\n", k, c.N, frac(c.Full5, c.N), frac(c.FullDef, c.N), c.f1())
		}
	}
}

// printReliability writes the reliability diagram as a table: per
// confidence bin, how many servers and how often they were needed.
func printReliability(w io.Writer, bins []calibrate.Bin) {
	var b strings.Builder
	for _, x := range bins {
		if x.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, " [%.2f,%.2f) n=%d conf %.2f needed %.2f;", x.Lo, x.Hi, x.Count, x.MeanConf, x.Accuracy)
	}
	fmt.Fprintf(w, "  reliability:%s\n", strings.TrimSuffix(b.String(), ";"))
}
