package main

import (
	"flag"
	"time"

	"github.com/classifierd/classifierd/internal/learning"
)

// LearnConfig is the --learn flags: learning from what agents call
// (ReportUse, docs/learning.md; package learning).
type LearnConfig = learning.Config

// addLearnFlags registers --learn... into c.
func addLearnFlags(fs *flag.FlagSet, c *LearnConfig) {
	fs.StringVar(&c.Mode, "learn", "on", "learn from what agents report calling (ReportUse; the proxy's own calls): on or off. Off, ReportUse answers FAILED_PRECONDITION and answers come from the descriptions alone")
	fs.StringVar(&c.DB, "learn-db", "", "SQLite file of the reports of use (vectors, ids, counts; never text; 0600, a missing directory is created 0700); empty keeps them in memory until exit; unused with --state redis://..., which keeps them in Redis")
	fs.DurationVar(&c.HalfLife, "learn-half-life", 30*24*time.Hour, "a report this old weighs half as much as a new one (0: reports never fade)")
	fs.DurationVar(&c.MaxAge, "learn-retention", 180*24*time.Hour, "delete reports older than this")
	fs.StringVar(&c.Scope, "learn-scope", "", "name that keeps this deployment's reports apart from others sharing the store")
	fs.Float64Var(&c.IdentityCap, "learn-identity-cap", 200, "one identity's reports weigh at most as this many reports")
	fs.BoolVar(&c.Share, "learn-share", false, "every identity's reports count alike in every caller's answers: for reporters that all trust each other (off: a caller's own reports count fully; other identities' move its answers only as far as they agree with any one of them left out, so one identity alone moves nothing, and weigh at most a quarter of the caller's own, or 10 reports; docs/learning.md)")
	fs.Float64Var(&c.Rate, "learn-report-rate", 20, "reports per second one identity may make (bursts of 10 seconds' worth)")
}
