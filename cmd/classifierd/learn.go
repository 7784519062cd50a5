package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/learn"
)

// LearnConfig is the --learn flags: learning from what agents call
// (ReportUse, docs/learning.md).
type LearnConfig struct {
	// Mode is "on" (the default) or "off".
	Mode string
	// DB is the SQLite file of the reports (without --state redis://).
	DB       string
	HalfLife time.Duration
	MaxAge   time.Duration
	Scope    string
	// IdentityCap and Share: learn.Config's.
	IdentityCap float64
	Share       bool
	Rate        float64
}

func (c *LearnConfig) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Mode, "learn", "on", "learn from what agents report calling (ReportUse; the proxy's own calls): on or off. Off, ReportUse answers FAILED_PRECONDITION and answers come from the descriptions alone")
	fs.StringVar(&c.DB, "learn-db", "", "SQLite file of the reports of use (vectors, ids, counts; never text; 0600, a missing directory is created 0700); empty keeps them in memory until exit; unused with --state redis://..., which keeps them in Redis")
	fs.DurationVar(&c.HalfLife, "learn-half-life", 30*24*time.Hour, "a report this old weighs half as much as a new one (0: reports never fade)")
	fs.DurationVar(&c.MaxAge, "learn-retention", 180*24*time.Hour, "delete reports older than this")
	fs.StringVar(&c.Scope, "learn-scope", "", "name that keeps this deployment's reports apart from others sharing the store")
	fs.Float64Var(&c.IdentityCap, "learn-identity-cap", 200, "one identity's reports weigh at most as this many reports")
	fs.BoolVar(&c.Share, "learn-share", false, "every identity's reports count alike in every caller's answers (off: another identity's weigh at most a quarter of a caller's own, or 10 reports)")
	fs.Float64Var(&c.Rate, "learn-report-rate", 20, "reports per second one identity may make (bursts of 10 seconds' worth)")
}

func (c LearnConfig) validate() error {
	switch {
	case c.Mode != "on" && c.Mode != "off":
		return fmt.Errorf("--learn %q is not on or off", c.Mode)
	case c.HalfLife < 0 || c.MaxAge <= 0 || c.IdentityCap <= 0 || c.Rate <= 0:
		return errors.New("--learn-half-life must not be negative; --learn-retention, --learn-identity-cap and --learn-report-rate must be positive")
	}
	return nil
}

// config is the learner's configuration.
func (c LearnConfig) config() learn.Config {
	hl := c.HalfLife
	if hl == 0 {
		hl = -1 // learn.Config's "never fade"
	}
	return learn.Config{HalfLife: hl, MaxAge: c.MaxAge, Scope: c.Scope, IdentityCap: c.IdentityCap, Share: c.Share,
		Rate: c.Rate, Burst: int(10 * c.Rate)}
}

// openLearner opens the learner --learn asks for: nil when off; its
// reports in Redis when --state names one (rdb), else in --learn-db.
func openLearner(ctx context.Context, lc LearnConfig, rdb *redis.Client, log *slog.Logger) (*learn.Learner, error) {
	if lc.Mode == "off" {
		return nil, nil
	}
	var store learn.Store = learn.Memory{}
	where := "memory"
	switch {
	case rdb != nil:
		store, where = learn.NewRedis(rdb, ""), "redis"
	case lc.DB != "":
		where = lc.DB
		s, err := learn.OpenSQLite(lc.DB)
		if err != nil {
			return nil, err
		}
		store = s
	}
	l, err := learn.New(ctx, lc.config(), store)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("learning store: %w", err), store.Close())
	}
	log.Info("learning from use", "store", where,
		"reports", len(l.Export("")), "half_life", lc.HalfLife)
	return l, nil
}
