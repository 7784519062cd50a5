package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/data/catalogs"
	"github.com/classifierd/classifierd/fit"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
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

// calibrateIndex fits the calibration on the index's own examples and
// stores it in the header. Maps the catalog has too few examples to fit
// (a description-only catalog) are learnt for this model on the built-in
// reference catalog instead of the hard-coded prior.
func calibrateIndex(ctx context.Context, idx *index.Index, eng *embed.Engine, progress func(int, int)) error {
	cal, err := fit.Fit(ctx, idx, fit.FitOptions{Progress: progress})
	if err != nil {
		return err
	}
	if cal.CategoriesMulti.Method == "prior" || cal.Servers.Method == "prior" || cal.Tools.Method == "prior" {
		ref, err := referencePrior(ctx, eng)
		if err != nil {
			return err
		}
		cal = fit.UseReference(cal, ref)
	}
	raw, err := json.Marshal(cal)
	if err != nil {
		return fmt.Errorf("encode calibration: %w", err)
	}
	idx.Calibration = raw
	return nil
}

// referencePrior embeds the built-in reference catalog with eng and fits
// fit.ReferencePrior on it.
func referencePrior(ctx context.Context, eng *embed.Engine) (calibrate.Calibration, error) {
	cat, err := catalog.Parse(catalogs.Default, "")
	if err != nil {
		return calibrate.Calibration{}, fmt.Errorf("reference catalog: %w", err)
	}
	man := eng.Manifest()
	ref, err := indexbuild.Build(ctx, cat, eng, indexbuild.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()},
		indexbuild.Options{Generator: "gen-index reference"})
	if err != nil {
		return calibrate.Calibration{}, fmt.Errorf("reference catalog: %w", err)
	}
	return fit.ReferencePrior(ctx, ref)
}

func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("gen-index", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	catPath := fs.String("catalog", "", "catalog JSON file (required)")
	out := fs.String("out", "", "index file to write (required)")
	noCal := fs.Bool("no-calibrate", false, "skip calibration fitting (confidence then uses a documented prior)")
	quiet := fs.Bool("quiet", false, "no progress output")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gen-index --catalog FILE --model DIR --out FILE [--ort-lib PATH]\n       gen-index eval --catalog FILE --queries FILE --model DIR [...]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *catPath == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("--catalog and --out are required")
	}
	cat, err := catalog.Load(*catPath)
	if err != nil {
		return err
	}
	eng, closeModel, err := mf.open()
	if err != nil {
		return err
	}
	defer func() {
		if e := closeModel(); err == nil {
			err = e
		}
	}()
	p := newProgress(stderr, "embedding", *quiet)
	start := time.Now()
	man := eng.Manifest()
	idx, err := indexbuild.Build(ctx, cat, eng, indexbuild.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()},
		indexbuild.Options{Progress: p.update, Generator: "gen-index"})
	p.done()
	if err != nil {
		return err
	}
	if !*noCal {
		cp := newProgress(stderr, "calibrating", *quiet)
		if err := calibrateIndex(ctx, idx, eng, cp.update); err != nil {
			return err
		}
		cp.done()
	}
	if err := idx.WriteFile(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d categories, %d servers, %d tools, %d vectors of %d dims (model %s, %s)\n",
		*out, len(idx.LabelsOf(index.KindCategory)), len(idx.LabelsOf(index.KindServer)), len(idx.LabelsOf(index.KindTool)),
		idx.NumVectors(), idx.Dims, man.Name, time.Since(start).Round(time.Millisecond))
	return nil
}
