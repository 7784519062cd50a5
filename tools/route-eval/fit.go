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
	"runtime"
	"slices"
	"sort"
	"sync"

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
	task    []int    // task index of each sample
	id      []string // server id of each sample
	// real are the samples of real (not synthetic) tasks, for measuring.
	real     []calibrate.EvidenceSample
	realTask []int
}

// bootstrapEvidence is the map the candidates are collected under: any
// map turns on the evidence path, and which servers are candidates does
// not depend on it. Its term on twin, weighing nothing, has the router
// compute the catalog's shape.
var bootstrapEvidence = calibrate.Evidence{Terms: []calibrate.EvidenceTerm{{Feature: "score", Scale: 1, Coef: 10}, {Feature: "twin", Scale: 1}}, Intercept: -5}

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
			out.id = append(out.id, c.ID)
			if !t.Synthetic {
				out.real = append(out.real, s)
				out.realTask = append(out.realTask, i)
			}
		}
	}
	return out, nil
}

// fitWithout fits the map on every catalog's rows but skip's ("" for none).
func fitWithout(all []*rows, skip string, c choice) (calibrate.Evidence, error) {
	var s []calibrate.EvidenceSample
	for _, r := range all {
		if r.name != skip {
			s = append(s, r.samples...)
		}
	}
	return calibrate.FitEvidenceTemperature(s, c.features, c.temp, c.l2)
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
// map fitted on the other catalogs): the penalty, which evidence it
// weighs, and what sets its temperature. A feature that names the catalog
// more than the candidate (its size, how alike its servers are) lets the
// map learn each catalog's base rate, which does not carry to a catalog
// it has not seen; these sets were written down before the choice was
// made.
var (
	// l2 0.1 was the worst penalty of every set in the first choice
	// with the catalog's shape (var/eval/route2), and is no longer tried.
	l2Grid      = []float64{0.001, 0.01}
	requestFeat = []string{"gap", "log_rank", "first", "z", "top_z", "margin", "need_first", "need_gap", "need_adv", "n_parts", "log_words", "lexical", "crowd"}
	// shapeFeat are the catalog's shape (route's shape.go).
	shapeFeat = []string{"twin", "twin_z", "cat_twin", "cat_cos", "cat_words"}
	// makeupFeat are the request's make-up times the candidate's
	// standing (calibrate.DeriveEvidence).
	makeupFeat = []string{"other_parts", "other_cues", "other_words", "other_first", "other_need_z", "z_words", "gap_words", "gap_parts"}
	// baseFeat are the features before the catalog's shape.
	baseFeat = slices.DeleteFunc(slices.Clone(calibrate.EvidenceFeatures), func(f string) bool {
		return slices.Contains(shapeFeat, f) || slices.Contains(makeupFeat, f)
	})
	featureSets = []featureSet{
		{"request and needs", requestFeat},
		{"+ need strength", append(slices.Clone(requestFeat), "need_z", "need_rank")},
		{"+ needs by kind", append(slices.Clone(requestFeat), "part_first", "cue_first", "part_z", "cue_z", "cue_score")},
		{"every feature", baseFeat},
		{"every + shape", append(slices.Clone(baseFeat), shapeFeat...)},
		{"every + twin", append(slices.Clone(baseFeat), "twin", "twin_z")},
		{"every + shape + make-up", append(slices.Clone(baseFeat), append(slices.Clone(shapeFeat), makeupFeat...)...)},
	}
	// tempSets are what may set the temperature: nothing, the catalog
	// (its shape and size), or the catalog and how the request stands out
	// of it.
	tempSets = []struct {
		name     string
		features []string
	}{
		{"none", nil},
		{"catalog", []string{"cat_twin", "cat_cos", "cat_words", "log_servers"}},
		{"catalog+request", []string{"cat_twin", "cat_cos", "cat_words", "log_servers", "top_z", "margin", "log_words"}},
	}
)

// featureSet is a named set of evidence features the map may weigh.
type featureSet struct {
	name     string
	features []string
}

// writeProbs writes every row's probability under the map fitted
// without its catalog (settings c), one a line in the rows' order.
func writeProbs(path string, all []*rows, c choice) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, r := range all {
		ev, err := fitWithout(all, r.name, c)
		if err != nil {
			f.Close()
			return err
		}
		for _, s := range r.samples {
			fmt.Fprintf(w, "%.6f\n", ev.Prob(s.X))
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

// choice is the selected settings.
type choice struct {
	set, tempSet   string
	features, temp []string
	l2             float64
	loss           float64
}

func (c choice) String() string {
	return fmt.Sprintf("features %q, temperature %q, l2 %g", c.set, c.tempSet, c.l2)
}

// choose picks the feature set, temperature and penalty by
// leave-one-catalog-out log-loss, printing the figures of each. Only the
// sets with the catalog's shape try a temperature (the others are the
// maps before it; a temperature set by the catalog alone changed their
// log-loss by under 0.002).
func choose(w io.Writer, all []*rows, only []string) (choice, error) {
	best := choice{loss: math.Inf(1)}
	for _, fs := range featureSets {
		if only != nil {
			fs.name, fs.features = "given", only
		}
		for ti, ts := range tempSets {
			if ti > 0 && only == nil && !slices.Contains(fs.features, "twin") {
				continue
			}
			for _, l2 := range l2Grid {
				c := choice{set: fs.name, tempSet: ts.name, features: fs.features, temp: ts.features, l2: l2}
				loss, eces, err := looFigures(all, c)
				if err != nil {
					return choice{}, err
				}
				c.loss = loss
				fmt.Fprintf(w, "  %-17s temp %-15s l2 %-6g leave-one-catalog-out log-loss %.4f, per-server ECE (offline) worst %.3f mean %.3f:", fs.name, ts.name, l2, loss, slices.Max(eces), mean(eces))
				for _, e := range eces {
					fmt.Fprintf(w, " %.3f", e)
				}
				fmt.Fprintln(w)
				if loss < best.loss {
					best = c
				}
			}
		}
		if only != nil {
			break
		}
	}
	return best, nil
}

// looFigures fits c without each catalog in turn (in parallel) and
// returns the mean left-out log-loss and each catalog's offline ECE.
func looFigures(all []*rows, c choice) (float64, []float64, error) {
	loss, eces := make([]float64, len(all)), make([]float64, len(all))
	errs := make([]error, len(all))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, r := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ev, err := fitWithout(all, r.name, c)
			if err != nil {
				errs[i] = err
				return
			}
			loss[i], eces[i] = ev.LogLoss(r.real), offlineECE(r, &ev)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	return mean(loss), eces, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
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
			m := map[string]any{"catalog": r.name, "task": r.task[i], "server": r.id[i], "needs": len(t.Steps), "kind": t.Kind, "needed": s.Needed, "synthetic": t.Synthetic}
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

// loadRows reads rows that --dump wrote (for refitting the map without
// routing again: --rows).
func loadRows(path string) ([]*rows, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	by := map[string]*rows{}
	var order []string
	tasks := map[string]map[int]bool{}
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		name, _ := m["catalog"].(string)
		r := by[name]
		if r == nil {
			r = &rows{name: name}
			by[name], tasks[name] = r, map[int]bool{}
			order = append(order, name)
		}
		ti, _ := m["task"].(float64)
		needed, _ := m["needed"].(bool)
		synth, _ := m["synthetic"].(bool)
		x := make([]float64, len(calibrate.EvidenceFeatures))
		for j, n := range calibrate.EvidenceFeatures {
			v, ok := m[n].(float64)
			if !ok && !calibrate.DerivedEvidence(n) {
				return nil, fmt.Errorf("%s: no feature %q (dumped by an older route-eval?)", path, n)
			}
			x[j] = v
		}
		// Rows dumped before a derived feature existed get it as route
		// computes it.
		calibrate.DeriveEvidence(x)
		tasks[name][int(ti)] = true
		s := calibrate.EvidenceSample{X: x, Needed: needed}
		r.samples = append(r.samples, s)
		r.task = append(r.task, int(ti))
		id, _ := m["server"].(string)
		r.id = append(r.id, id)
		if !synth {
			r.real = append(r.real, s)
			r.realTask = append(r.realTask, int(ti))
		}
	}
	var out []*rows
	for _, n := range order {
		r := by[n]
		r.tasks = len(tasks[n])
		w := 1 / float64(r.tasks)
		for i := range r.samples {
			r.samples[i].Weight = w
		}
		for i := range r.real {
			r.real[i].Weight = w
		}
		out = append(out, r)
	}
	return out, nil
}
