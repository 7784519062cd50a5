package server

import (
	"github.com/classifierd/classifierd/analyze"
	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/route"
)

// Domain is what the server translates to: one value per concern, all
// over the same index and ranker.
type Domain struct {
	Index       *index.Index
	Limits      request.Limits
	Calibration calibrate.Calibration
	Classifier  *classify.Classifier
	Router      *route.Router
	Analyzer    *analyze.Analyzer
}

// NewDomain builds the classifier, router and analyzer over idx with the
// index's calibration; emb embeds requests. It fails if the index's
// calibration section or patterns cannot be used.
func NewDomain(idx *index.Index, emb rank.Embedder, lim request.Limits) (Domain, error) {
	cal := calibrate.OrDefault(idx.Calibration)
	rk, err := rank.New(idx, emb, rank.Options{Fusion: cal.Fusion})
	if err != nil {
		return Domain{}, err
	}
	lim = lim.WithDefaults()
	return Domain{Index: idx, Limits: lim, Calibration: cal,
		Classifier: classify.New(rk, cal, classify.Config{Limits: lim}),
		Router:     route.New(rk, cal, route.Config{Limits: lim}),
		Analyzer:   analyze.New(rk, cal, analyze.Config{Limits: lim})}, nil
}
