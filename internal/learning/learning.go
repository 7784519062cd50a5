// Package learning opens what --learn asks for: the learner of the daemon
// and of classifierd proxy, its reports in Redis when --state names one,
// else in the SQLite file --learn-db, else in memory.
package learning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/learn"
)

// Config is the --learn flags: learning from what agents call
// (ReportUse, docs/learning.md).
type Config struct {
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

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	switch {
	case c.Mode != "on" && c.Mode != "off":
		return fmt.Errorf("--learn %q is not on or off", c.Mode)
	case c.HalfLife < 0 || c.MaxAge <= 0 || c.IdentityCap <= 0 || c.Rate <= 0:
		return errors.New("--learn-half-life must not be negative; --learn-retention, --learn-identity-cap and --learn-report-rate must be positive")
	}
	return nil
}

// config is the learner's configuration.
func (c Config) config() learn.Config {
	hl := c.HalfLife
	if hl == 0 {
		hl = -1 // learn.Config's "never fade"
	}
	return learn.Config{HalfLife: hl, MaxAge: c.MaxAge, Scope: c.Scope, IdentityCap: c.IdentityCap, Share: c.Share,
		Rate: c.Rate, Burst: int(10 * c.Rate)}
}

// Open opens the learner --learn asks for: nil when off; its
// reports in Redis when --state names one (rdb), else in --learn-db.
func Open(ctx context.Context, lc Config, rdb *redis.Client, log *slog.Logger) (*learn.Learner, error) {
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
