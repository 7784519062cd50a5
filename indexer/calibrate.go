package indexer

import (
	"context"

	"github.com/classifierd/classifierd/index"
)

// CalibrateOptions tunes Calibrate.
type CalibrateOptions struct {
	Progress func(done, total int)
}

// Calibrate fits score-to-probability maps on the index's own examples and
// stores them in the index header.
func Calibrate(ctx context.Context, idx *index.Index, emb Embedder, opts CalibrateOptions) error {
	return nil // WIP: replaced by the cross-validated fit
}
