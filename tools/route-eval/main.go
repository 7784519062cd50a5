// Command route-eval measures routing decisions on many catalogs at once:
// for each dev catalog (the probe set, MCP-Bench, MSC-Bench and
// toolret-train's five sources, converted by tools/datasets), whether every
// need of a task reaches the first five servers, the default answer's set
// F1, and the per-server calibration.
//
//	route-eval --model DIR [--data var/route-eval/data] [--probe data/probe] [--catalogs a,b]
//
// Each catalog is indexed as the daemon indexes it (indexbuild.Build,
// descriptions only) and routed through route.Router as the daemon routes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/internal/reliability"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/route"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "route-eval:", err)
		os.Exit(1)
	}
}

type options struct {
	model, ortLib, data, probe, out string
	catalogs                        []string
	threads                         int
	baseline                        bool
	features, writeMap, dump        string
	synthetic                       float64
	seed, mapFile                   string
	seedOnly, dumpOnly              bool
	rows, temp, probs, setName      string
	l2                              float64
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("route-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.model, "model", "", "model directory (required)")
	fs.StringVar(&o.ortLib, "ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library")
	fs.StringVar(&o.data, "data", "var/route-eval/data", "catalogs and tasks converted by tools/datasets")
	fs.StringVar(&o.probe, "probe", "data/probe", "the probe set's directory")
	fs.StringVar(&o.out, "out", "var/route-eval", "where reliability diagrams and the embedding cache go")
	cats := fs.String("catalogs", "", "comma-separated catalog names (default: every dev catalog)")
	fs.IntVar(&o.threads, "threads", 2, "ONNX Runtime intra-op threads")
	fs.BoolVar(&o.baseline, "baseline", false, "route with each catalog's calibration as indexbuild fits it (no cross-catalog map)")
	fs.StringVar(&o.features, "features", "", "comma-separated evidence features the map weighs (default: all)")
	fs.StringVar(&o.writeMap, "write-map", "", "fit the map on every catalog and write it here (JSON)")
	fs.Float64Var(&o.synthetic, "synthetic", 0.5, "joined two- and three-need tasks added to each catalog's training candidates, as a share of its tasks (never measured)")
	fs.StringVar(&o.seed, "seed", "cmd/classifierd/testdata/seed.json", "the seed-style hub catalog the contract checks run on (\"\": none)")
	fs.StringVar(&o.mapFile, "map", "", "route every catalog with this evidence map instead of fitting (inspection only: not left out)")
	fs.BoolVar(&o.seedOnly, "seed-only", false, "run the seed contract checks only")
	fs.StringVar(&o.dump, "dump", "", "write every candidate's evidence here (JSON lines, for analysis)")
	fs.BoolVar(&o.dumpOnly, "dump-only", false, "stop once --dump is written")
	fs.StringVar(&o.rows, "rows", "", "the candidates' rows as --dump wrote them, instead of collecting them again; without --model, only choose the map's settings on them")
	fs.StringVar(&o.temp, "temp", "", "with --features and --l2: the temperature's features (\"\": none), the settings fixed instead of chosen")
	fs.Float64Var(&o.l2, "l2", 0, "with --features: the penalty, the settings fixed instead of chosen")
	fs.StringVar(&o.probs, "probs", "", "with --rows and fixed settings: write each row's probability under the map fitted without its catalog here, one a line in the rows' order (for analysis)")
	fs.StringVar(&o.setName, "set", "", "with --rows: the feature set by its name in the grid (\"every + shape\"...), instead of --features")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.rows != "" && o.model == "" {
		all, err := loadRows(o.rows)
		if err != nil {
			return err
		}
		var only []string
		if o.features != "" {
			only = strings.Split(o.features, ",")
		}
		if o.setName != "" {
			i := slices.IndexFunc(featureSets, func(f featureSet) bool { return f.name == o.setName })
			if i < 0 {
				return fmt.Errorf("no feature set %q", o.setName)
			}
			only = featureSets[i].features
		}
		if only != nil && o.l2 > 0 && o.probs != "" {
			ch := choice{set: "given", tempSet: o.temp, features: only, l2: o.l2}
			if o.temp != "" {
				ch.temp = strings.Split(o.temp, ",")
			}
			return writeProbs(o.probs, all, ch)
		}
		if only != nil && o.l2 > 0 {
			ch := choice{set: "given", tempSet: o.temp, features: only, l2: o.l2}
			if o.temp != "" {
				ch.temp = strings.Split(o.temp, ",")
			}
			loss, eces, err := looFigures(all, ch)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: leave-one-catalog-out log-loss %.4f, per-server ECE (offline) %v\n", ch, loss, eces)
			return nil
		}
		ch, err := choose(stdout, all, only)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "chosen: %s\n", ch)
		return nil
	}
	if o.model == "" {
		return errors.New("--model is required")
	}
	if *cats != "" {
		o.catalogs = strings.Split(*cats, ",")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	man, err := models.Resolve(o.model, "")
	if err != nil {
		return err
	}
	rt, err := embed.InitRuntime(o.ortLib)
	if err != nil {
		return err
	}
	defer rt.Close()
	eng, err := embed.Open(rt, embed.Config{ModelDir: o.model, Manifest: man, IntraOpThreads: o.threads, MaxConcurrent: 1})
	if err != nil {
		return err
	}
	defer eng.Close()
	cache, err := openDiskCache(filepath.Join(o.out, "vectors-"+eng.Fingerprint()[:16]+".bin"), eng.Fingerprint(), eng.Dims(), eng)
	if err != nil {
		return err
	}
	defer cache.Flush()
	model := labels.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()}

	var sets []*dataset
	for _, s := range defaultSources(o.data, o.probe) {
		if len(o.catalogs) > 0 && !slices.Contains(o.catalogs, s.name) {
			continue
		}
		d, err := loadDataset(s)
		if err != nil {
			return fmt.Errorf("%s: %w (run tools/eval.sh, or tools/datasets, to convert the dev sets)", s.name, err)
		}
		if o.synthetic > 0 {
			d.Tasks = append(d.Tasks, synthesize(d, int(o.synthetic*float64(len(d.Tasks))), 1)...)
		}
		sets = append(sets, d)
	}
	ref, err := indexbuild.ReferencePrior(ctx, cache, model, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model %s; %d catalogs; load %s\n", man.Name, len(sets), loadavg())
	if o.seed != "" {
		checks, err := seedContract(ctx, o.seed, cache, model)
		if err != nil {
			return fmt.Errorf("seed contract: %w", err)
		}
		printSeed(stdout, checks)
		if o.seedOnly {
			return nil
		}
	}
	var xs []*indexed
	for _, d := range sets {
		idx, err := indexbuild.Build(ctx, d.Cat, cache, model, indexbuild.Options{ReferencePrior: &ref, NoEvidence: true, Embedding: labels.Options{Generator: "route-eval"}})
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		xs = append(xs, &indexed{d: d, idx: idx, emb: cache})
	}
	if o.baseline {
		fmt.Fprintln(stdout, "baseline: each catalog's own calibration as indexbuild fits it, no evidence map")
		for _, x := range xs {
			rt, err := x.router(nil)
			if err != nil {
				return err
			}
			if err := report(ctx, o, x.d, rt, "", stdout); err != nil {
				return err
			}
			if err := cache.Flush(); err != nil {
				return err
			}
		}
		return nil
	}
	if o.mapFile != "" {
		b, err := os.ReadFile(o.mapFile)
		if err != nil {
			return err
		}
		var ev calibrate.Evidence
		if err := json.Unmarshal(b, &ev); err != nil {
			return err
		}
		if err := ev.Validate(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "every catalog routed with the map in %s (not left out: for inspection only)\n", o.mapFile)
		for _, x := range xs {
			rt, err := x.router(&ev)
			if err != nil {
				return err
			}
			if err := report(ctx, o, x.d, rt, "", stdout); err != nil {
				return err
			}
		}
		return cache.Flush()
	}
	var all []*rows
	if o.rows != "" {
		// Rows dumped by this build on these catalogs: the candidates do
		// not depend on the map, so they need not be collected again.
		if all, err = loadRows(o.rows); err != nil {
			return err
		}
		// Every catalog routed must be in them; the others' rows still
		// count in the fits (--catalogs then measures a few catalogs with
		// the maps fitted without each).
		have := map[string]bool{}
		for _, r := range all {
			have[r.name] = true
		}
		for _, x := range xs {
			if !have[x.d.Name] {
				return fmt.Errorf("%s has no rows of %s", o.rows, x.d.Name)
			}
		}
	}
	for _, x := range xs {
		if o.rows != "" {
			break
		}
		t0 := time.Now()
		r, err := collect(ctx, x)
		if err != nil {
			return fmt.Errorf("%s: %w", x.d.Name, err)
		}
		if err := cache.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: %d candidates of %d tasks (%.1fs)\n", x.d.Name, len(r.samples), r.tasks, time.Since(t0).Seconds())
		all = append(all, r)
	}
	if o.dump != "" {
		if err := dumpRows(o.dump, xs, all); err != nil {
			return err
		}
		if o.dumpOnly {
			return nil
		}
	}
	var only []string
	if o.features != "" {
		only = strings.Split(o.features, ",")
	}
	var ch choice
	if only != nil && o.l2 > 0 {
		ch = choice{set: "given", tempSet: "given", features: only, l2: o.l2}
		if o.temp != "" {
			ch.temp = strings.Split(o.temp, ",")
		}
		fmt.Fprintf(stdout, "cross-catalog confidence map: settings given (%s)\n", ch)
	} else {
		fmt.Fprintln(stdout, "cross-catalog confidence map: evidence, temperature and penalty chosen by leave-one-catalog-out log-loss")
		if ch, err = choose(stdout, all, only); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "chosen: %s; each catalog below is routed with the map fitted on the other catalogs\n", ch)
	var left []calibrate.EvidenceLeftOut
	rowsOf := map[string]*rows{}
	for _, r := range all {
		rowsOf[r.name] = r
	}
	for _, x := range xs {
		ev, err := fitWithout(all, x.d.Name, ch)
		if err != nil {
			return err
		}
		rt, err := x.router(&ev)
		if err != nil {
			return err
		}
		r, err := evaluate(ctx, x.d, rt)
		if err != nil {
			return fmt.Errorf("%s: %w", x.d.Name, err)
		}
		r.print(stdout, " (map fitted without it)")
		printReliability(stdout, r.Reliability)
		if err := reliability.WritePNG(filepath.Join(o.out, x.d.Name+".png"), x.d.Name+": per-server reliability, left out", r.Reliability); err != nil {
			return err
		}
		left = append(left, calibrate.EvidenceLeftOut{Catalog: x.d.Name, ECE: round(r.ECE), LogLoss: round(ev.LogLoss(rowsOf[x.d.Name].real))})
	}
	if o.writeMap != "" {
		ev, err := fitWithout(all, "", ch)
		if err != nil {
			return err
		}
		rec := &calibrate.EvidenceRecord{Model: man.Name, Fingerprint: eng.Fingerprint(), L2: ch.l2, LeftOut: left,
			Selection: selection(ch, o.synthetic),
			Command:   "make fit-evidence (go run ./tools/route-eval --model DIR --write-map FILE)"}
		for _, r := range all {
			rec.Catalogs = append(rec.Catalogs, calibrate.EvidenceCatalog{Name: r.name, Tasks: r.tasks, Candidates: len(r.samples)})
		}
		ev.Record = rec
		if err := writeEvidence(o.writeMap, &ev); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote the map fitted on every catalog to %s\n", o.writeMap)
	}
	return nil
}

func round(x float64) float64 { return math.Round(x*10000) / 10000 }

// report evaluates one catalog with rt and prints its figures.
func report(ctx context.Context, o options, d *dataset, rt *route.Router, label string, w io.Writer) error {
	r, err := evaluate(ctx, d, rt)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Name, err)
	}
	r.print(w, label)
	printReliability(w, r.Reliability)
	return reliability.WritePNG(filepath.Join(o.out, d.Name+".png"), d.Name+": per-server reliability", r.Reliability)
}

func writeEvidence(path string, ev *calibrate.Evidence) error {
	b, err := json.MarshalIndent(ev, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// evaluate routes every task twice: the first five servers without a
// threshold, and the default answer.
func evaluate(ctx context.Context, d *dataset, rt *route.Router) (*result, error) {
	zero := float32(0)
	r := &result{Name: d.Name}
	for i := range d.Tasks {
		t := &d.Tasks[i]
		if t.Synthetic {
			continue
		}
		ranked, err := rt.Route(ctx, route.RouteQuery{Query: t.Text, MaxServers: 5, MaxTools: 5, MinConfidence: &zero, Evidence: showKind != ""})
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		def, err := rt.Route(ctx, route.RouteQuery{Query: t.Text, OnNoMatch: route.NoMatchNone})
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		var ids, defIDs []string
		var conf []float64
		for _, s := range ranked.Servers {
			ids = append(ids, s.ID)
			conf = append(conf, s.Confidence)
		}
		for _, s := range def.Servers {
			defIDs = append(defIDs, s.ID)
		}
		r.observe(t, ids, conf, defIDs)
		if showKind != "" && (t.Kind == showKind || showKind == "all") {
			var missed [][]string
			for _, st := range t.Steps {
				if !slices.ContainsFunc(st, func(s string) bool { return slices.Contains(ids, s) }) {
					missed = append(missed, st)
				}
			}
			if len(missed) > 0 {
				fmt.Fprintf(os.Stderr, "MISS %s %q\n  gold %v missed %v\n  top5 %v %v\n  default %v\n  %s\n", t.ID, t.Text, t.Steps, missed, ids, fmtConf(conf), defIDs, ranked.Reasoning)
				for _, c := range ranked.Considered {
					if t.needed[c.ID] {
						fmt.Fprintf(os.Stderr, "    gold candidate %s p %.2f\n", c.ID, c.P)
					}
				}
			}
		}
	}
	r.finish()
	return r, nil
}

// showKind, when set (ROUTE_EVAL_SHOW), prints the tasks of that kind
// whose needs miss the first five servers.
var showKind = os.Getenv("ROUTE_EVAL_SHOW")

func fmtConf(c []float64) string {
	var b strings.Builder
	for _, x := range c {
		fmt.Fprintf(&b, "%.2f ", x)
	}
	return b.String()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// selection says how the map's settings were chosen, for its record.
func selection(ch choice, synthetic float64) string {
	how := fmt.Sprintf("the lowest mean leave-one-catalog-out log-loss (%.4f) over %d feature sets, %d temperature sets and l2 in %v", ch.loss, len(featureSets), len(tempSets), l2Grid)
	if ch.set == "given" {
		how = "given on the command line"
	}
	return fmt.Sprintf("%s: %s; every catalog weighs the same; synthetic joined tasks %.2f of each catalog's, in training only", ch, how, synthetic)
}
