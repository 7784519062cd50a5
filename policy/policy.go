// Package policy holds what the three decision policies (classify, route
// and analyze) share: the ranker they score with, its index, and the
// calibration that turns scores into confidences, the input limits, and
// the accessors the server reads them through. Each policy embeds a Base.
package policy

import (
	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
)

// Base is the part of a policy that is the same in all three: Rk scores
// requests against Idx (Rk's index), Cal decides from the scores, and
// Lim bounds the requests. It is immutable after New.
type Base struct {
	Rk  *rank.Ranker
	Idx *index.Index
	Cal calibrate.Calibration
	Lim request.Limits
}

// New returns the Base over rk deciding with cal (the index's calibration)
// within lim (with its defaults).
func New(rk *rank.Ranker, cal calibrate.Calibration, lim request.Limits) Base {
	return Base{Rk: rk, Idx: rk.Index(), Cal: cal, Lim: lim.WithDefaults()}
}

// Limits returns the enforced input limits.
func (b Base) Limits() request.Limits { return b.Lim }

// Index returns the index the policy serves.
func (b Base) Index() *index.Index { return b.Idx }

// Calibration returns the calibration in use.
func (b Base) Calibration() calibrate.Calibration { return b.Cal }
