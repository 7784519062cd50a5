package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/server"
)

// The cross-catalog map (calibrate.Evidence) is fitted on the candidates
// of every task of every catalog: each candidate's evidence as route
// computes it, labelled by whether the task needs that server. Every
// catalog weighs the same in the fit (each task 1/tasks of its catalog),
// so the largest does not decide what a score means everywhere.

// rows are one catalog's candidates.
type rows struct {
	name    string
	tasks   int
	samples []calibrate.EvidenceSample
	task    []int // task index of each sample
	// real are the samples of real (not synthetic) tasks, for measuring.
	real     []calibrate.EvidenceSample
	realTask []int
}

// bootstrapEvidence is the map the candidates are collected under: any
// map turns on the evidence path, and which servers are candidates does
// not depend on it.
var bootstrapEvidence = calibrate.Evidence{Terms: []calibrate.EvidenceTerm{{Feature: "score", Scale: 1, Coef: 10}}, Intercept: -5}

// indexed is a catalog's index and the daemon's router over it.
type indexed struct {
	d   *dataset
	idx *index.Index
	emb interface {
		Embed(context.Context, []string) ([][]float32, error)
	}
}

// router wires the daemon's router over the index with ev as its
// cross-catalog map (nil: the index's calibration as built).
func (x *indexed) router(ev *calibrate.Evidence) (*route.Router, error) {
	idx := *x.idx
	cal := calibrate.OrDefault(x.idx.Calibration)
	if ev != nil {
		cal.ServerEvidence = ev
	}
	idx.Calibration = &cal
	dom, err := server.NewDomainConfig(&idx, x.emb, server.DomainConfig{})
	if err != nil {
		return nil, err
	}
	return dom.Router, nil
}

// collect routes every task once under the bootstrap map and keeps each
// candidate's evidence.
func collect(ctx context.Context, x *indexed) (*rows, error) {
	rt, err := x.router(&bootstrapEvidence)
	if err != nil {
		return nil, err
	}
	zero := float32(0)
	out := &rows{name: x.d.Name, tasks: len(x.d.Tasks)}
	w := 1 / float64(len(x.d.Tasks))
	for i := range x.d.Tasks {
		t := &x.d.Tasks[i]
		res, err := rt.Route(ctx, route.RouteQuery{Query: t.Text, MaxServers: 5, MinConfidence: &zero, Evidence: true})
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		for _, c := range res.Considered {
			s := calibrate.EvidenceSample{X: c.X, Needed: t.needed[c.ID], Weight: w}
			out.samples = append(out.samples, s)
			out.task = append(out.task, i)
			if !t.Synthetic {
				out.real = append(out.real, s)
				out.realTask = append(out.realTask, i)
			}
		}
	}
	return out, nil
}

// fitWithout fits the map on every catalog's rows but skip's ("" for none).
func fitWithout(all []*rows, skip string, features []string, l2 float64) (calibrate.Evidence, error) {
	var s []calibrate.EvidenceSample
	for _, r := range all {
		if r.name != skip {
			s = append(s, r.samples...)
		}
	}
	return calibrate.FitEvidence(s, features, l2)
}

// offlineECE is the per-server ECE of ev on a catalog's rows, over the
// five most probable candidates of each task (what Route returns without
// threshold, but for the places kept for needs).
func offlineECE(r *rows, ev *calibrate.Evidence) float64 {
	byTask := map[int][]int{}
	for i, t := range r.realTask {
		byTask[t] = append(byTask[t], i)
	}
	var conf []float64
	var ok []bool
	for _, is := range byTask {
		type c struct {
			p      float64
			needed bool
		}
		var cs []c
		for _, i := range is {
			cs = append(cs, c{ev.Prob(r.real[i].X), r.real[i].Needed})
		}
		sort.SliceStable(cs, func(a, b int) bool { return cs[a].p > cs[b].p })
		for _, x := range cs[:min(5, len(cs))] {
			conf = append(conf, x.p)
			ok = append(ok, x.needed)
		}
	}
	return calibrate.ECE(conf, ok, calibrate.ECEBins)
}

// The map's settings are chosen by leave-one-catalog-out log-loss (the
// mean over catalogs of the log-loss of a catalog's real tasks under the
// map fitted on the other catalogs): the penalty, and which evidence it
// weighs. A feature that names the catalog more than the candidate (its
// size, how alike its servers are) lets the map learn each catalog's base
// rate, which does not carry to a catalog it has not seen; these sets were
// written down before the choice was made.
var (
	l2Grid      = []float64{0.001, 0.01, 0.1}
	requestFeat = []string{"gap", "log_rank", "first", "z", "top_z", "margin", "need_first", "need_gap", "need_adv", "n_parts", "log_words", "lexical", "crowd"}
	featureSets = []struct {
		name     string
		features []string
	}{
		{"request and needs", requestFeat},
		{"+ need strength", append(slices.Clone(requestFeat), "need_z", "need_rank")},
		{"+ needs by kind", append(slices.Clone(requestFeat), "part_first", "cue_first", "part_z", "cue_z", "cue_score")},
		{"every feature", calibrate.EvidenceFeatures},
	}
)

// choice is the selected settings.
type choice struct {
	set      string
	features []string
	l2       float64
	loss     float64
}

// choose picks the feature set and penalty by leave-one-catalog-out
// log-loss, printing the figures of each.
func choose(w io.Writer, all []*rows, only []string) (choice, error) {
	best := choice{loss: math.Inf(1)}
	for _, fs := range featureSets {
		if only != nil {
			fs.name, fs.features = "given", only
		}
		for _, l2 := range l2Grid {
			var sum, eceMax float64
			for _, r := range all {
				ev, err := fitWithout(all, r.name, fs.features, l2)
				if err != nil {
					return choice{}, err
				}
				sum += ev.LogLoss(r.real)
				eceMax = math.Max(eceMax, offlineECE(r, &ev))
			}
			loss := sum / float64(len(all))
			fmt.Fprintf(w, "  %-18s l2 %-6g leave-one-catalog-out log-loss %.4f, worst per-server ECE (offline) %.3f\n", fs.name, l2, loss, eceMax)
			if loss < best.loss {
				best = choice{fs.name, fs.features, l2, loss}
			}
		}
		if only != nil {
			break
		}
	}
	return best, nil
}

// dumpRows writes every candidate as a JSON line: catalog, task, its
// number of needs, whether needed, and its features by name.
func dumpRows(path string, xs []*indexed, all []*rows) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for k, r := range all {
		for i, s := range r.samples {
			t := &xs[k].d.Tasks[r.task[i]]
			m := map[string]any{"catalog": r.name, "task": r.task[i], "needs": len(t.Steps), "kind": t.Kind, "needed": s.Needed, "synthetic": t.Synthetic}
			for j, n := range calibrate.EvidenceFeatures {
				m[n] = s.X[j]
			}
			if err := enc.Encode(m); err != nil {
				f.Close()
				return err
			}
		}
	}
	return errors.Join(w.Flush(), f.Close())
}
