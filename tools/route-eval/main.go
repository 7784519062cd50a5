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
	"errors"
	"flag"
	"fmt"
	"io"
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
		fmt.Fprintln(os.Stderr, "route-eval:", err)
		os.Exit(1)
	}
}

type options struct {
	model, ortLib, data, probe, out string
	catalogs                        []string
	threads                         int
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
	if err := fs.Parse(args); err != nil {
		return err
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
		sets = append(sets, d)
	}
	ref, err := indexbuild.ReferencePrior(ctx, cache, model, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "model %s; %d catalogs; load %s\n", man.Name, len(sets), loadavg())
	for _, d := range sets {
		t0 := time.Now()
		rt, err := router(ctx, d, cache, model, &ref)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		r, err := evaluate(ctx, d, rt)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		if err := cache.Flush(); err != nil {
			return err
		}
		r.print(stdout, "")
		printReliability(stdout, r.Reliability)
		fmt.Fprintf(stderr, "%s: %.1fs\n", d.Name, time.Since(t0).Seconds())
		if err := reliability.WritePNG(filepath.Join(o.out, d.Name+".png"), d.Name+": per-server reliability", r.Reliability); err != nil {
			return err
		}
	}
	return nil
}

// router indexes a catalog as gen-index does and wires the router as the
// daemon does.
func router(ctx context.Context, d *dataset, emb labels.Embedder, m labels.Model, ref *calibrate.Calibration) (*route.Router, error) {
	idx, err := indexbuild.Build(ctx, d.Cat, emb, m, indexbuild.Options{ReferencePrior: ref, Embedding: labels.Options{Generator: "route-eval"}})
	if err != nil {
		return nil, err
	}
	dom, err := server.NewDomainConfig(idx, emb, server.DomainConfig{})
	if err != nil {
		return nil, err
	}
	return dom.Router, nil
}

// evaluate routes every task twice: the first five servers without a
// threshold, and the default answer.
func evaluate(ctx context.Context, d *dataset, rt *route.Router) (*result, error) {
	zero := float32(0)
	r := &result{Name: d.Name}
	for i := range d.Tasks {
		t := &d.Tasks[i]
		ranked, err := rt.Route(ctx, route.RouteQuery{Query: t.Text, MaxServers: 5, MaxTools: 5, MinConfidence: &zero})
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
	}
	r.finish()
	return r, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
