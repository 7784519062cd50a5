// Package indexbuild is the build pipeline: catalog → label texts →
// embeddings → fitted calibration → index. Build is its one entry;
// gen-index's build and eval subcommands both run it, and the index it
// returns is what gen-index writes to disk.
package indexbuild

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/data/catalogs"
	"github.com/classifierd/classifierd/data/evidence"
	"github.com/classifierd/classifierd/fit"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/models"
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
	// Fusion, if set, is the fusion weights to start the fit from; nil:
	// the model's committed fit on the reference catalog (ModelFusion,
	// by the model's name), else DefaultCalibration's.
	Fusion *calibrate.Fusion
}

// ModelFusion returns the fusion weights fitted for the model with this
// manifest name on the reference catalog (`gen-index fit-fusion`,
// committed under models/fusion), laid over DefaultCalibration's for any
// weight the fit does not set. ok is false for a model with no committed
// fit: DefaultCalibration's weights are then used.
func ModelFusion(name string) (f calibrate.Fusion, ok bool, err error) {
	f = calibrate.DefaultCalibration().Fusion
	data, ok := models.FusionPrior(name)
	if !ok {
		return f, false, nil
	}
	var file struct {
		Fit struct {
			Fusion json.RawMessage `json:"fusion"`
		} `json:"fit"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return f, false, fmt.Errorf("indexbuild: fusion fit of %s: %w", name, err)
	}
	if err := json.Unmarshal(file.Fit.Fusion, &f); err != nil {
		return f, false, fmt.Errorf("indexbuild: fusion fit of %s: %w", name, err)
	}
	return f, true, nil
}

// FusionFile is what `gen-index fit-fusion --write` commits for a model
// (models/fusion/NAME.json): the fit and where it came from.
type FusionFile struct {
	Model string `json:"model"`
	// Fingerprint is the model and manifest fingerprint the fit was made
	// with; ReferenceSHA256 the reference catalog's sha256.
	Fingerprint     string        `json:"fingerprint"`
	ReferenceSHA256 string        `json:"reference_sha256"`
	Command         string        `json:"command"`
	Fit             fit.FusionFit `json:"fit"`
}

// FitFusion embeds the reference catalog (nil: the built-in default
// catalog) with the model and fits its fusion weights on it
// (fit.ReferenceFusion), starting from DefaultCalibration's.
func FitFusion(ctx context.Context, emb labels.Embedder, m labels.Model, ref *catalog.Catalog) (fit.FusionFit, error) {
	idx, err := embedReference(ctx, emb, m, ref)
	if err != nil {
		return fit.FusionFit{}, err
	}
	return fit.ReferenceFusion(ctx, idx, calibrate.DefaultCalibration().Fusion)
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
	fusion := opts.Fusion
	if fusion == nil {
		f, ok, err := ModelFusion(m.Name)
		if err != nil {
			return nil, err
		}
		if ok {
			fusion = &f
		}
	}
	cal, err := fit.Fit(ctx, idx, fit.FitOptions{Progress: opts.FitProgress, Fusion: fusion})
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
			r, err := referencePrior(ctx, emb, m, opts.Reference, fusion)
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
// catalog) with the same model and fits fit.ReferencePrior on it, with
// the model's fusion weights (ModelFusion): what Build uses for the maps
// a sparse catalog cannot fit.
func ReferencePrior(ctx context.Context, emb labels.Embedder, m labels.Model, ref *catalog.Catalog) (calibrate.Calibration, error) {
	f, ok, err := ModelFusion(m.Name)
	if err != nil {
		return calibrate.Calibration{}, err
	}
	var fusion *calibrate.Fusion
	if ok {
		fusion = &f
	}
	return referencePrior(ctx, emb, m, ref, fusion)
}

func referencePrior(ctx context.Context, emb labels.Embedder, m labels.Model, ref *catalog.Catalog, fusion *calibrate.Fusion) (calibrate.Calibration, error) {
	idx, err := embedReference(ctx, emb, m, ref)
	if err != nil {
		return calibrate.Calibration{}, err
	}
	return fit.ReferencePrior(ctx, idx, fusion)
}

// embedReference embeds the reference catalog (nil: the built-in one).
func embedReference(ctx context.Context, emb labels.Embedder, m labels.Model, ref *catalog.Catalog) (*index.Index, error) {
	if ref == nil {
		var err error
		if ref, err = catalog.Parse(catalogs.Default, ""); err != nil {
			return nil, fmt.Errorf("indexbuild: reference catalog: %w", err)
		}
	}
	idx, err := labels.Embed(ctx, ref, emb, m, labels.Options{Generator: "indexbuild reference"})
	if err != nil {
		return nil, fmt.Errorf("indexbuild: reference catalog: %w", err)
	}
	return idx, nil
}
