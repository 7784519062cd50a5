// Package indexbuild is the build pipeline: catalog → label texts →
// embeddings → fitted calibration → index. Build is its one entry;
// gen-index's build and eval subcommands both run it, and the index it
// returns is what gen-index writes to disk.
package indexbuild

import (
	"context"
	"fmt"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/data/catalogs"
	"github.com/classifierd/classifierd/data/evidence"
	"github.com/classifierd/classifierd/fit"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/labels"
)

// Options tunes Build. The zero value embeds, fits the calibration and
// learns description-only maps on the built-in reference catalog.
type Options struct {
	// Embedding tunes the embedding step (batch size, progress, time stamp,
	// generator name).
	Embedding labels.Options
	// NoCalibrate leaves the index without calibration: confidence then
	// uses calibrate.DefaultCalibration, a documented prior.
	NoCalibrate bool
	// FitProgress, if set, is called as held-out examples are scored.
	FitProgress func(done, total int)
	// Reference is the catalog whose examples teach this model's maps for
	// a catalog too sparse to fit its own (default: the out-of-the-box
	// catalog, data/catalogs/default.json, compiled in).
	Reference *catalog.Catalog
	// Evidence, if set, is the cross-catalog confidence map given to a
	// catalog without tool examples, instead of the map data/evidence
	// holds for the model (route-eval fits and measures its own).
	Evidence *calibrate.Evidence
	// NoEvidence leaves a catalog without tool examples on the
	// reference-catalog prior, as before the cross-catalog map existed.
	NoEvidence bool
	// ReferencePrior, if set, is the prior ReferencePrior returned for
	// this model, used instead of embedding the reference catalog again:
	// a caller that rebuilds indexes (the MCP proxy, as servers' tools
	// change) computes it once.
	ReferencePrior *calibrate.Calibration
}

// Build embeds every label text of cat with emb and fits the calibration
// on the catalog's own examples (leave-one-out, see fit.Fit). Maps the
// catalog has too few examples for (a description-only catalog) are learnt
// for the same model on the reference catalog (fit.ReferencePrior) instead
// of being taken from constants written for one model.
func Build(ctx context.Context, cat *catalog.Catalog, emb labels.Embedder, m labels.Model, opts Options) (*index.Index, error) {
	idx, err := labels.Embed(ctx, cat, emb, m, opts.Embedding)
	if err != nil {
		return nil, err
	}
	if opts.NoCalibrate {
		return idx, nil
	}
	cal, err := fit.Fit(ctx, idx, fit.FitOptions{Progress: opts.FitProgress})
	if err != nil {
		return nil, err
	}
	// A catalog whose servers map could not be fitted on its own tool
	// examples decides from evidence with the map learnt across catalogs
	// for this model (data/evidence), where there is one.
	ownServers := cal.Servers.Method != calibrate.MethodPrior
	if fit.NeedsReference(cal) {
		ref := opts.ReferencePrior
		if ref == nil {
			r, err := ReferencePrior(ctx, emb, m, opts.Reference)
			if err != nil {
				return nil, err
			}
			ref = &r
		}
		cal = fit.UseReference(cal, *ref)
	}
	if !ownServers && !opts.NoEvidence {
		ev := opts.Evidence
		if ev == nil {
			var err error
			if ev, _, err = evidence.For(m.Fingerprint); err != nil {
				return nil, err
			}
		}
		cal.ServerEvidence = ev
	}
	idx.Calibration = &cal
	return idx, nil
}

// ReferencePrior embeds the reference catalog (nil: the built-in default
// catalog) with the same model and fits fit.ReferencePrior on it: what
// Build uses for the maps a sparse catalog cannot fit.
func ReferencePrior(ctx context.Context, emb labels.Embedder, m labels.Model, ref *catalog.Catalog) (calibrate.Calibration, error) {
	if ref == nil {
		var err error
		if ref, err = catalog.Parse(catalogs.Default, ""); err != nil {
			return calibrate.Calibration{}, fmt.Errorf("indexbuild: reference catalog: %w", err)
		}
	}
	idx, err := labels.Embed(ctx, ref, emb, m, labels.Options{Generator: "indexbuild reference"})
	if err != nil {
		return calibrate.Calibration{}, fmt.Errorf("indexbuild: reference catalog: %w", err)
	}
	return fit.ReferencePrior(ctx, idx)
}
