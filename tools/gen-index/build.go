package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/models"
)

// modelFlags are the flags every subcommand uses to load the model.
type modelFlags struct {
	model, manifest, ortLib string
	threads                 int
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.model, "model", "", "model directory with model.onnx and tokenizer.json (required)")
	fs.StringVar(&m.manifest, "manifest", "", "model manifest (default: DIR/manifest.json, else a known manifest under models/)")
	fs.StringVar(&m.ortLib, "ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library (default: $ORT_LIB, else where make put it)")
	fs.IntVar(&m.threads, "threads", 2, "ONNX Runtime intra-op threads")
}

// open loads the ONNX Runtime and the model; close releases both.
func (m *modelFlags) open() (*embed.Engine, func() error, error) {
	if m.model == "" {
		return nil, nil, fmt.Errorf("--model is required")
	}
	man, err := models.Resolve(m.model, m.manifest)
	if err != nil {
		return nil, nil, err
	}
	rt, err := embed.InitRuntime(m.ortLib)
	if err != nil {
		return nil, nil, err
	}
	eng, err := embed.Open(rt, embed.Config{ModelDir: m.model, Manifest: man, IntraOpThreads: m.threads, MaxConcurrent: 1})
	if err != nil {
		_ = rt.Close()
		return nil, nil, err
	}
	return eng, func() error {
		err := eng.Close()
		if e := rt.Close(); err == nil {
			err = e
		}
		return err
	}, nil
}

// buildIndex runs the build pipeline (indexbuild.Build) with progress on
// stderr; gen-index build and gen-index eval both use it.
func buildIndex(ctx context.Context, cat *catalog.Catalog, eng *embed.Engine, generator string, noCal, quiet bool, stderr io.Writer) (*index.Index, error) {
	now, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return nil, err
	}
	man := eng.Manifest()
	ep := newProgress(stderr, "embedding", quiet)
	fp := newProgress(stderr, "calibrating", quiet)
	idx, err := indexbuild.Build(ctx, cat, eng.Labels(), labels.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()},
		indexbuild.Options{Embedding: labels.Options{Progress: ep.updateThenDone, Generator: generator, Now: now}, NoCalibrate: noCal,
			FitProgress: fp.update})
	ep.done()
	if !noCal {
		fp.done()
	}
	return idx, err
}

// sourceDateEpoch is the build time SOURCE_DATE_EPOCH names
// (reproducible-builds.org): seconds since 1970 UTC. With it, the same
// catalog and model give a byte-identical index, as `make image` needs;
// without it (empty), nil, so the index is stamped with the time now.
func sourceDateEpoch(v string) (func() time.Time, error) {
	if v == "" {
		return nil, nil
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 {
		return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", v)
	}
	t := time.Unix(secs, 0).UTC()
	return func() time.Time { return t }, nil
}

func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("gen-index", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	catPath := fs.String("catalog", "", "catalog JSON file (required unless --from-mcp; with it, the base catalog the live tools are merged into)")
	fromMCP := fs.String("from-mcp", "", `MCP client config ({"mcpServers": ...}): index the live tools of its servers`)
	mcpTimeout := fs.Duration("mcp-timeout", 10*time.Second, "with --from-mcp: bound on connecting to a server and on listing its tools")
	out := fs.String("out", "", "index file to write (required)")
	noCal := fs.Bool("no-calibrate", false, "skip calibration fitting (confidence then uses a documented prior)")
	quiet := fs.Bool("quiet", false, "no progress output")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the build to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gen-index (--catalog FILE | --from-mcp CONFIG [--catalog FILE]) --model DIR --out FILE [--ort-lib PATH]\n       gen-index eval --catalog FILE --queries FILE --model DIR [...]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*catPath == "" && *fromMCP == "") || *out == "" {
		fs.Usage()
		return fmt.Errorf("--catalog (or --from-mcp) and --out are required")
	}
	var cat *catalog.Catalog
	if *catPath != "" {
		if cat, err = catalog.Load(*catPath); err != nil {
			return err
		}
	}
	if *fromMCP != "" {
		if cat, err = mcpCatalog(ctx, *fromMCP, cat, *mcpTimeout, stderr); err != nil {
			return err
		}
	}
	printWarnings(stderr, cat)
	eng, closeModel, err := mf.open()
	if err != nil {
		return err
	}
	defer func() {
		if e := closeModel(); err == nil {
			err = e
		}
	}()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	man := eng.Manifest()
	idx, err := buildIndex(ctx, cat, eng, "gen-index", *noCal, *quiet, stderr)
	if err != nil {
		return err
	}
	if err := idx.WriteFile(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d categories, %d servers, %d tools, %d vectors of %d dims (model %s, %s)\n",
		*out, len(idx.LabelsOf(index.KindCategory)), len(idx.LabelsOf(index.KindServer)), len(idx.LabelsOf(index.KindTool)),
		idx.NumVectors(), idx.Dims, man.Name, time.Since(start).Round(time.Millisecond))
	return nil
}

// printWarnings prints one line for each suspicious but indexable entry
// (catalog.Warnings): ids derived from names, empty or repeated
// descriptions, very long names.
func printWarnings(w io.Writer, cat *catalog.Catalog) {
	for _, m := range cat.Warnings() {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}
