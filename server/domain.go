package server

import (
	"github.com/classifierd/classifierd/analyze"
	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/learn"
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
	// Learned is the router's learned evidence (nil: learning off).
	Learned *learn.View
}

// DomainConfig tunes NewDomainConfig.
type DomainConfig struct {
	Limits request.Limits
	// ShortlistFrom is the number of server and tool vectors from which
	// requests are scored against a shortlist of labels (rank.Options);
	// 0 takes rank.DefaultShortlistFrom, a negative value never shortlists.
	ShortlistFrom int
	// Learned is what has been learned from use for this index (nil:
	// learning off; learn.Learner.View makes it).
	Learned *learn.View
}

// VectorCacheEntries is how many recent vectors the embedder of a served
// domain keeps (rank.VectorCache): earlier conversation turns and the
// capabilities of cues. At 384 dimensions, 4,096 vectors are 6 MiB.
const VectorCacheEntries = 4096

// CachedEmbedder is emb behind a vector cache of VectorCacheEntries; the
// daemon makes one and serves every domain (each reload) with it.
func CachedEmbedder(emb rank.Embedder) *rank.VectorCache {
	if c, ok := emb.(*rank.VectorCache); ok {
		return c
	}
	return rank.NewVectorCache(emb, VectorCacheEntries)
}

// NewDomain is NewDomainConfig with limits lim and the default shortlist.
func NewDomain(idx *index.Index, emb rank.Embedder, lim request.Limits) (Domain, error) {
	return NewDomainConfig(idx, emb, DomainConfig{Limits: lim})
}

// NewDomainConfig builds the classifier, router and analyzer over idx
// with the index's calibration; emb embeds requests. It fails if the
// index's calibration section or patterns cannot be used.
func NewDomainConfig(idx *index.Index, emb rank.Embedder, cfg DomainConfig) (Domain, error) {
	cal := calibrate.OrDefault(idx.Calibration)
	from := cfg.ShortlistFrom
	if from == 0 {
		from = rank.DefaultShortlistFrom
	}
	lim := cfg.Limits
	rk, err := rank.New(idx, emb, rank.Options{Fusion: cal.Fusion, ShortlistFrom: max(0, from)})
	if err != nil {
		return Domain{}, err
	}
	lim = lim.WithDefaults()
	return Domain{Index: idx, Limits: lim, Calibration: cal,
		Classifier: classify.New(rk, cal, classify.Config{Limits: lim}),
		Router:     route.New(rk, cal, route.Config{Limits: lim, Learned: cfg.Learned}),
		Analyzer:   analyze.New(rk, cal, analyze.Config{Limits: lim}), Learned: cfg.Learned}, nil
}
