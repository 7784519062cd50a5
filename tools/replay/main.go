// Command replay measures learning from use (package learn) by replaying
// a dev set as a deployment would live it: its tasks in a fixed random
// order, each routed, then its needed servers reported (ReportUse by
// query), so task i is routed with what tasks < i taught.
//
//	replay --model DIR [--datasets ../shared/datasets] [--probe data/learn-probe] [--sets a,b] [--seed 1]
//
// The sets are the dev sets (learn-probe, mcp-bench, msc-bench, the
// default) and toolret-train's source families as catalogs of their own
// (toolret-seal-tools, toolret-bfcl, toolret-apibench, toolret-api-bank,
// toolret-toolalpaca: training data). Nothing in package learn is tuned
// on any of them: it weighs each kind of evidence by what the
// deployment's own reports say of it (learn.View.Fitted, printed).
//
// For each set it prints:
//   - the learning curve: recall@5 of needed servers, the default
//     answer's set F1 and the per-server ECE of the first five, over the
//     tasks routed after 0, 25, 50, 100, ... reports;
//   - half/half: feedback on one half, the other half routed, against the
//     same half routed with no feedback (averaged over --splits orders);
//   - poisoning: the same, with a hostile identity that reported random
//     servers for --poison requests first; how far the victim's answers
//     moved.
//
// Each set is indexed as the daemon indexes a catalog (indexbuild.Build,
// descriptions only) and routed through route.Router as the daemon
// routes, with a learn.Learner in memory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

type options struct {
	model, ortLib, datasets, probe, out string
	sets                                []string
	seed                                int64
	splits, poison, maxTasks, threads   int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.model, "model", "", "model directory (required)")
	fs.StringVar(&o.ortLib, "ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library")
	fs.StringVar(&o.datasets, "datasets", "../shared/datasets", "the shared dev datasets")
	fs.StringVar(&o.probe, "probe", "data/learn-probe", "the learn-probe set's directory")
	fs.StringVar(&o.out, "out", "var/replay", "where the embedding cache goes")
	sets := fs.String("sets", "learn-probe,mcp-bench,msc-bench", "comma-separated sets: learn-probe, mcp-bench, msc-bench (dev); toolret-seal-tools, toolret-bfcl, toolret-apibench, toolret-api-bank, toolret-toolalpaca (training)")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the task orders")
	fs.IntVar(&o.splits, "splits", 5, "half/half: orders averaged")
	fs.IntVar(&o.poison, "poison", 1000, "poisoning: requests the hostile identity reports (0: skip)")
	fs.IntVar(&o.maxTasks, "max-tasks", 600, "at most this many tasks of a set (a seeded sample; 0: all)")
	fs.IntVar(&o.threads, "threads", 2, "ONNX Runtime intra-op threads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.model == "" {
		return errors.New("--model is required")
	}
	o.sets = strings.Split(*sets, ",")
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
	cache, err := openCache(filepath.Join(o.out, "vectors-"+eng.Fingerprint()[:16]+".bin"), eng.Fingerprint(), eng.Dims(), eng)
	if err != nil {
		return err
	}
	defer cache.Flush()
	model := labels.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()}
	ref, err := indexbuild.ReferencePrior(ctx, cache, model, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "replay: model %s; seed %d; load %s\n", man.Name, o.seed, loadavg())
	var rows []summary
	for _, s := range sources(o.datasets, o.probe) {
		if !slices.Contains(o.sets, s.name) {
			continue
		}
		t0 := time.Now()
		d, err := load(s)
		if err != nil {
			return err
		}
		if o.maxTasks > 0 && len(d.Tasks) > o.maxTasks {
			rng := rand.New(rand.NewSource(o.seed))
			rng.Shuffle(len(d.Tasks), func(i, j int) { d.Tasks[i], d.Tasks[j] = d.Tasks[j], d.Tasks[i] })
			d.Tasks = d.Tasks[:o.maxTasks]
		}
		idx, err := indexbuild.Build(ctx, d.Cat, cache, model, indexbuild.Options{ReferencePrior: &ref,
			Embedding: labels.Options{Generator: "replay"}})
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		r := &replayer{o: o, d: d, idx: idx, emb: cache}
		row, err := r.all(ctx, stdout)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		rows = append(rows, row)
		if err := cache.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: %.1fs\n", d.Name, time.Since(t0).Seconds())
	}
	printSummary(stdout, rows, o)
	return nil
}

// summary is one set's line of the closing table: half/half before and
// after, and (when the set has them) its paraphrases'.
type summary struct {
	name           string
	servers, tasks int
	before, after  metrics
	para           *paraphrased
}

// printSummary is the table every set's half/half ends in: recall@5 of
// needed servers, set F1 and ECE@5 of the routed half with no feedback
// and with feedback on the other half.
func printSummary(w io.Writer, rows []summary, o options) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== before/after: feedback on one half, the other half routed (%d orders from seed %d; load %s)\n", o.splits, o.seed, loadavg())
	fmt.Fprintf(w, "| set | servers | tasks | recall@5 | Δ points | set F1 | ECE@5 |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %.3f → %.3f | %+.1f | %.3f → %.3f | %.3f → %.3f |\n", r.name, r.servers, r.tasks,
			r.before.recall(), r.after.recall(), 100*(r.after.recall()-r.before.recall()),
			r.before.f1(), r.after.f1(), r.before.ece(), r.after.ece())
	}
	for _, r := range rows {
		if p := r.para; p != nil {
			fmt.Fprintf(w, "%s paraphrased (%d task routings over the orders; reported in their own words, routed in a paraphrase's): recall@5 %.3f → %.3f (%+.1f), set F1 %.3f → %.3f; the unreported half's paraphrases %.3f → %.3f (%+.1f)\n",
				r.name, p.reported.before.tasks, p.reported.before.recall(), p.reported.after.recall(), 100*(p.reported.after.recall()-p.reported.before.recall()),
				p.reported.before.f1(), p.reported.after.f1(),
				p.unreported.before.recall(), p.unreported.after.recall(), 100*(p.unreported.after.recall()-p.unreported.before.recall()))
		}
	}
}

// replayer replays one set.
type replayer struct {
	o   options
	d   *dataset
	idx *index.Index
	emb *diskCache
}

// deployment is a fresh learner and a router that uses it.
type deployment struct {
	l    *learn.Learner
	view *learn.View
	rt   *route.Router
}

func (r *replayer) deploy(ctx context.Context) (*deployment, error) {
	l, err := learn.New(ctx, r.cfg(), nil)
	if err != nil {
		return nil, err
	}
	v := l.View(r.idx)
	dom, err := server.NewDomainConfig(r.idx, r.emb, server.DomainConfig{Learned: v})
	if err != nil {
		return nil, err
	}
	return &deployment{l: l, view: v, rt: dom.Router}, nil
}

// cfg is the learner's configuration: the daemon's defaults, no fading
// (a replay takes seconds) and no rate limit.
func (r *replayer) cfg() learn.Config {
	return learn.Config{HalfLife: -1, Rate: 1e9, Burst: 1 << 30}
}

// answer is one routed task: the first five servers with confidences, and
// the default answer's servers.
type answer struct {
	top  []string
	conf []float64
	def  []string
}

// seen is a routed request as a report of it needs it: its vector and
// the servers the descriptions ranked first.
type seen struct {
	vec       []float32
	described []learn.Prob
}

func (dp *deployment) route(ctx context.Context, text string) (answer, seen, error) {
	zero := float32(0)
	ranked, err := dp.rt.Route(ctx, route.RouteQuery{Query: text, MaxServers: 5, MaxTools: 5, MinConfidence: &zero, Caller: "hub"})
	if err != nil {
		return answer{}, seen{}, err
	}
	def, err := dp.rt.Route(ctx, route.RouteQuery{Query: text, OnNoMatch: route.NoMatchNone, Caller: "hub"})
	if err != nil {
		return answer{}, seen{}, err
	}
	var a answer
	for _, s := range ranked.Servers {
		a.top, a.conf = append(a.top, s.ID), append(a.conf, s.Confidence)
	}
	for _, s := range def.Servers {
		a.def = append(a.def, s.ID)
	}
	return a, seen{ranked.Vector, ranked.Described}, nil
}

func (dp *deployment) report(ctx context.Context, identity string, q seen, servers []string) error {
	_, err := dp.view.Report(ctx, learn.Use{Vec: q.vec, Described: q.described, Identity: identity, Servers: servers})
	return err
}

// gold is the servers a task's report names: the first server of each
// step (the one the agent would have called).
func gold(t task) []string {
	var out []string
	for _, st := range t.Steps {
		out = append(out, st[0])
	}
	return out
}

func (r *replayer) order(seed int64) []task {
	ts := slices.Clone(r.d.Tasks)
	rng := rand.New(rand.NewSource(seed))
	rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	return ts
}

func (r *replayer) all(ctx context.Context, w io.Writer) (summary, error) {
	row := summary{name: r.d.Name, servers: len(r.idx.LabelsOf(index.KindServer)), tasks: len(r.d.Tasks)}
	fmt.Fprintf(w, "\n== %s: %d servers, %d tasks\n", r.d.Name, row.servers, row.tasks)
	if err := r.curve(ctx, w); err != nil {
		return row, err
	}
	var err error
	if row.before, row.after, err = r.halves(ctx, w); err != nil {
		return row, err
	}
	if len(r.d.Para) > 0 {
		p, err := r.paraphrases(ctx, w)
		if err != nil {
			return row, err
		}
		row.para = &p
	}
	if r.o.poison > 0 {
		return row, r.poisoning(ctx, w)
	}
	return row, nil
}

// curve routes every task in order, reporting each after it is routed.
func (r *replayer) curve(ctx context.Context, w io.Writer) error {
	dp, err := r.deploy(ctx)
	if err != nil {
		return err
	}
	ts := r.order(r.o.seed)
	bounds := []int{0, 25, 50, 100, 200, 400, 800, 1600, 3200}
	fmt.Fprintf(w, "learning curve (order seed %d): tasks routed after n reports\n", r.o.seed)
	fmt.Fprintf(w, "  %-11s %6s %10s %8s %8s\n", "reports", "tasks", "recall@5", "set F1", "ECE@5")
	var m metrics
	win := 0
	flush := func(hi int) {
		if m.tasks > 0 {
			fmt.Fprintf(w, "  %-11s %6d %10.3f %8.3f %8.3f\n", fmt.Sprintf("%d-%d", bounds[win], hi-1), m.tasks, m.recall(), m.f1(), m.ece())
		}
		m = metrics{}
	}
	var total metrics
	for i, t := range ts {
		for win+1 < len(bounds) && i >= bounds[win+1] {
			flush(bounds[win+1])
			win++
		}
		a, q, err := dp.route(ctx, t.Text)
		if err != nil {
			return err
		}
		m.add(t, a)
		total.add(t, a)
		if err := dp.report(ctx, "hub", q, gold(t)); err != nil {
			return err
		}
	}
	flush(len(ts) + 1)
	fmt.Fprintf(w, "  %-11s %6d %10.3f %8.3f %8.3f\n", "all", total.tasks, total.recall(), total.f1(), total.ece())
	printFit(w, dp.view.Fitted("hub"), len(ts))
	printOffsets(w, dp.view.Offsets("hub"), len(r.idx.LabelsOf(index.KindServer)))
	return nil
}

// printOffsets says which servers' offsets the reports moved: how many
// servers the reports count for (listed, called or shown), how many of
// them moved, and the most lowered and raised.
func printOffsets(w io.Writer, offs []learn.Offset, servers int) {
	moved := 0
	for _, o := range offs {
		if math.Abs(o.LogOdds) >= 0.01 {
			moved++
		}
	}
	fmt.Fprintf(w, "  offsets: %d of %d servers counted for by a report, %d moved (|δ| ≥ 0.01 log-odds); the others keep their descriptions'\n", len(offs), servers, moved)
	if moved == 0 {
		return
	}
	show := func(o learn.Offset) {
		fmt.Fprintf(w, "    %-32s δ %+.2f: called %.0f of %.0f, descriptions expected %.1f\n", o.Server, o.LogOdds, o.Calls, o.Reports, o.Expected)
	}
	for _, o := range offs[:min(3, len(offs))] {
		if o.LogOdds <= -0.01 {
			show(o)
		}
	}
	for _, o := range offs[max(3, len(offs)-3):] {
		if o.LogOdds >= 0.01 {
			show(o)
		}
	}
}

// printFit prints what the reports said of their own trust.
func printFit(w io.Writer, f learn.Fitted, reports int) {
	fmt.Fprintf(w, "  fitted on %d reports: tau %.2g (servers' offsets, log-odds), tau co-use %.2g, tools' kappa %.3g; rho by cosine", reports, f.Tau, f.TauCo, f.KappaTool)
	for i, r := range f.Rho {
		if i%2 == 1 {
			fmt.Fprintf(w, " %.2f:%.2f", float64(i+1)/float64(len(f.Rho)), r)
		}
	}
	fmt.Fprintln(w)
}

// halves: feedback on the first half of an order, the second half routed
// with it and without (averaged over the orders).
func (r *replayer) halves(ctx context.Context, w io.Writer) (before, after metrics, err error) {
	for k := 0; k < r.o.splits; k++ {
		ts := r.order(r.o.seed + int64(k))
		h := len(ts) / 2
		dp, err := r.deploy(ctx)
		if err != nil {
			return before, after, err
		}
		for _, t := range ts[h:] {
			a, _, err := dp.route(ctx, t.Text)
			if err != nil {
				return before, after, err
			}
			before.add(t, a)
		}
		for _, t := range ts[:h] {
			_, q, err := dp.route(ctx, t.Text)
			if err != nil {
				return before, after, err
			}
			if err := dp.report(ctx, "hub", q, gold(t)); err != nil {
				return before, after, err
			}
		}
		for _, t := range ts[h:] {
			a, _, err := dp.route(ctx, t.Text)
			if err != nil {
				return before, after, err
			}
			after.add(t, a)
		}
	}
	fmt.Fprintf(w, "half/half (%d orders): feedback on one half, the other routed\n", r.o.splits)
	fmt.Fprintf(w, "  %-16s %10s %8s %8s %9s\n", "", "recall@5", "set F1", "ECE@5", "set size")
	fmt.Fprintf(w, "  %-16s %10.3f %8.3f %8.3f %9.2f\n", "no feedback", before.recall(), before.f1(), before.ece(), before.size())
	fmt.Fprintf(w, "  %-16s %10.3f %8.3f %8.3f %9.2f\n", "with feedback", after.recall(), after.f1(), after.ece(), after.size())
	fmt.Fprintf(w, "  %-16s %+10.1f %+8.1f   (points)\n", "change", 100*(after.recall()-before.recall()), 100*(after.f1()-before.f1()))
	return before, after, nil
}

// paraphrased is the paraphrase test's figures: the reported half's
// tasks and the other half's, each routed in its paraphrase's words
// before and after the reports.
type paraphrased struct {
	reported, unreported struct{ before, after metrics }
}

// paraphrases: as halves (the same orders), the first half reported by
// query text as ReportUse {"query", "servers"} reports it (the vector and
// description-based probabilities of Router.Describe, no request id),
// and every task with a paraphrase routed in the paraphrase's words
// before and after: do the learned vectors and co-use carry over to
// other wording of the same task (the reported half), and of other tasks
// (the unreported one)?
func (r *replayer) paraphrases(ctx context.Context, w io.Writer) (paraphrased, error) {
	var p paraphrased
	routeAll := func(dp *deployment, ts []task, m *metrics) error {
		for _, t := range ts {
			text, ok := r.d.Para[t.ID]
			if !ok {
				continue
			}
			a, _, err := dp.route(ctx, text)
			if err != nil {
				return err
			}
			m.add(t, a)
		}
		return nil
	}
	for k := 0; k < r.o.splits; k++ {
		ts := r.order(r.o.seed + int64(k))
		h := len(ts) / 2
		dp, err := r.deploy(ctx)
		if err != nil {
			return p, err
		}
		if err := routeAll(dp, ts[:h], &p.reported.before); err != nil {
			return p, err
		}
		if err := routeAll(dp, ts[h:], &p.unreported.before); err != nil {
			return p, err
		}
		for _, t := range ts[:h] {
			vec, described, err := dp.rt.Describe(ctx, t.Text)
			if err != nil {
				return p, err
			}
			if err := dp.report(ctx, "hub", seen{vec, described}, gold(t)); err != nil {
				return p, err
			}
		}
		if err := routeAll(dp, ts[:h], &p.reported.after); err != nil {
			return p, err
		}
		if err := routeAll(dp, ts[h:], &p.unreported.after); err != nil {
			return p, err
		}
	}
	fmt.Fprintf(w, "paraphrases (%d orders): one half reported by query text, every task routed in a paraphrase's words\n", r.o.splits)
	fmt.Fprintf(w, "  %-28s %10s %8s %8s\n", "", "recall@5", "set F1", "ECE@5")
	for _, x := range []struct {
		name string
		m    metrics
	}{{"reported half, no feedback", p.reported.before}, {"reported half, feedback", p.reported.after},
		{"other half, no feedback", p.unreported.before}, {"other half, feedback", p.unreported.after}} {
		fmt.Fprintf(w, "  %-28s %10.3f %8.3f %8.3f\n", x.name, x.m.recall(), x.m.f1(), x.m.ece())
	}
	return p, nil
}

// poisoning: as halves (one order), with a hostile identity that first
// reports random servers for o.poison requests (the set's own task texts,
// so they are as near the victim's as can be).
func (r *replayer) poisoning(ctx context.Context, w io.Writer) error {
	ts := r.order(r.o.seed)
	h := len(ts) / 2
	srvs := r.idx.LabelsOf(index.KindServer)
	rng := rand.New(rand.NewSource(r.o.seed + 99))
	run := func(hostile bool) ([]answer, error) {
		dp, err := r.deploy(ctx)
		if err != nil {
			return nil, err
		}
		if hostile {
			for i := 0; i < r.o.poison; i++ {
				t := r.d.Tasks[rng.Intn(len(r.d.Tasks))]
				vec, described, err := dp.rt.Describe(ctx, t.Text)
				if err != nil {
					return nil, err
				}
				var bad []string
				for n := 1 + rng.Intn(3); n > 0; n-- {
					bad = append(bad, r.idx.Labels[srvs[rng.Intn(len(srvs))]].ID)
				}
				if err := dp.report(ctx, "hostile", seen{vec, described}, bad); err != nil {
					return nil, err
				}
			}
		}
		for _, t := range ts[:h] {
			_, q, err := dp.route(ctx, t.Text)
			if err != nil {
				return nil, err
			}
			if err := dp.report(ctx, "hub", q, gold(t)); err != nil {
				return nil, err
			}
		}
		var out []answer
		for _, t := range ts[h:] {
			a, _, err := dp.route(ctx, t.Text)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	}
	clean, err := run(false)
	if err != nil {
		return err
	}
	dirty, err := run(true)
	if err != nil {
		return err
	}
	var mc, md metrics
	var maxDP, sumDP float64
	var n, changedTop int
	for i, t := range ts[h:] {
		mc.add(t, clean[i])
		md.add(t, dirty[i])
		conf := map[string]float64{}
		for j, s := range dirty[i].top {
			conf[s] = dirty[i].conf[j]
		}
		for j, s := range clean[i].top {
			if c, ok := conf[s]; ok {
				d := math.Abs(c - clean[i].conf[j])
				maxDP, sumDP, n = max(maxDP, d), sumDP+d, n+1
			}
		}
		if !slices.Equal(clean[i].top, dirty[i].top) {
			changedTop++
		}
	}
	// The victim's answers move only where the others' tallies without
	// each other identity agree (learn.Request); with the hostile
	// identity the only other one, they move by nothing.
	fmt.Fprintf(w, "poisoning: a hostile identity reports random servers for %d requests before the victim's %d; no single other identity moves the victim's answers (learn.Request)\n",
		r.o.poison, h)
	fmt.Fprintf(w, "  victim recall@5 %.3f -> %.3f (%+.1f points); set F1 %.3f -> %.3f; top-5 changed in %d of %d tasks; |Δconfidence| of a top-5 server mean %.3f, max %.3f\n",
		mc.recall(), md.recall(), 100*(md.recall()-mc.recall()), mc.f1(), md.f1(), changedTop, len(clean), sumDP/float64(max(n, 1)), maxDP)
	return nil
}

// metrics accumulates recall@5 of needed servers (a step counts when one
// of its servers is in the first five), the default answer's set F1 and
// the reliability of the first five's confidences.
type metrics struct {
	tasks          int
	steps, found   int
	f1sum          float64
	f1n            int
	binN, binRight [10]float64
	binConf        [10]float64
	// setSize sums the default answer's sizes.
	setSize int
}

func (m *metrics) add(t task, a answer) {
	need := t.needs()
	if len(t.Steps) > 0 {
		m.tasks++
		top := map[string]bool{}
		for _, s := range a.top {
			top[s] = true
		}
		for _, st := range t.Steps {
			m.steps++
			for _, s := range st {
				if top[s] {
					m.found++
					break
				}
			}
		}
	}
	// Set F1 of the default answer over steps.
	m.setSize += len(a.def)
	def := map[string]bool{}
	for _, s := range a.def {
		def[s] = true
	}
	switch {
	case len(t.Steps) == 0 && len(a.def) == 0:
		m.f1sum++
	case len(t.Steps) == 0 || len(a.def) == 0:
	default:
		sat := 0
		for _, st := range t.Steps {
			for _, s := range st {
				if def[s] {
					sat++
					break
				}
			}
		}
		right := 0
		for _, s := range a.def {
			if need[s] {
				right++
			}
		}
		p, r := float64(right)/float64(len(a.def)), float64(sat)/float64(len(t.Steps))
		if p+r > 0 {
			m.f1sum += 2 * p * r / (p + r)
		}
	}
	m.f1n++
	for i, s := range a.top {
		b := min(int(a.conf[i]*10), 9)
		m.binN[b]++
		m.binConf[b] += a.conf[i]
		if need[s] {
			m.binRight[b]++
		}
	}
}

func (m *metrics) recall() float64 { return float64(m.found) / float64(max(m.steps, 1)) }
func (m *metrics) f1() float64     { return m.f1sum / float64(max(m.f1n, 1)) }

// size is the default answer's mean size.
func (m *metrics) size() float64 { return float64(m.setSize) / float64(max(m.f1n, 1)) }

// ece is the expected calibration error of the first five's confidences
// (10 equal-width bins).
func (m *metrics) ece() float64 {
	var n, e float64
	for b := range m.binN {
		n += m.binN[b]
	}
	for b := range m.binN {
		if m.binN[b] > 0 {
			e += m.binN[b] / n * math.Abs(m.binConf[b]/m.binN[b]-m.binRight[b]/m.binN[b])
		}
	}
	return e
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
