// Package state is --state: whether the daemon's hub sessions (and, with
// --terminal, its terminal events and learned answers) live in this
// process (memory, and SQLite for the terminal store) or in a Redis shared
// by every replica; the --state URL parsed without I/O, its password never
// logged.
package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
	"github.com/classifierd/classifierd/terminal"
)

// PasswordEnv names the environment variable holding the Redis
// password when the --state URL carries none, so that it stays out of
// process listings and shell history.
const PasswordEnv = "CLASSIFIERD_STATE_PASSWORD"

// Usage is the --state flag's help.
const Usage = "where hub sessions (and, with --terminal, input events and learned answers) live: empty for this " +
	"process's memory (and --terminal-db), or redis://[user:password@]host:port/db (rediss:// for TLS, " +
	"unix:///path.sock?db=N) to share them with every replica using the same Redis; " +
	"the password may come from $" + PasswordEnv + " instead"

// Sessions is the session store run uses: what the server needs, plus
// the janitor and Close.
type Sessions interface {
	server.Sessions
	Run(ctx context.Context)
	Close() error
}

// Options parses a --state URL (no I/O) into client options, with a
// password from $CLASSIFIERD_STATE_PASSWORD when the URL has none and
// bounded timeouts where the URL sets none. Its errors never repeat the
// password.
func Options(raw string) (*redis.Options, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL, password included
		}
		return nil, fmt.Errorf("--state %s: not a usable Redis URL (redis://[user:password@]host:port/db, rediss://..., unix:///path?db=N): %w",
			Redact(raw), err)
	}
	if opt.Password == "" {
		opt.Password = os.Getenv(PasswordEnv)
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = 2 * time.Second
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = 2 * time.Second
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = 2 * time.Second
	}
	if opt.PoolTimeout == 0 {
		opt.PoolTimeout = 3 * time.Second
	}
	if opt.MaxRetries == 0 {
		// One retry of a failed command, no more: while Redis is away a
		// call should answer UNAVAILABLE soon, not hang in retries.
		opt.MaxRetries = 1
	}
	return opt, nil
}

// Redact is a --state URL fit for logs and errors: no password.
func Redact(raw string) string {
	if raw == "" {
		return "memory"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// State is what --state opened: the session store and, with Redis, the
// client it shares with the terminal store. Close closes the client: call
// it after the stores are closed (run defers it first).
type State struct {
	Sessions Sessions
	rdb      *redis.Client // nil: in memory
}

// Redis is the client of a --state redis://... (nil: in memory), for the
// stores that share it.
func (s State) Redis() *redis.Client { return s.rdb }

// Close closes the Redis client, if any.
func (s State) Close() error {
	if s.rdb == nil {
		return nil
	}
	return s.rdb.Close()
}

// Open opens the session store --state names. With Redis it checks
// the server answers before returning, so a daemon pointed at an
// unreachable Redis refuses to start with a clear message.
func Open(ctx context.Context, url string, scfg session.Config, log *slog.Logger) (State, error) {
	if url == "" {
		st, err := session.NewStore(scfg)
		if err != nil {
			return State{}, err
		}
		return State{Sessions: st}, nil
	}
	opt, err := Options(url)
	if err != nil {
		return State{}, err
	}
	redis.SetLogger(redisLogger{log.With("component", "redis")})
	rdb := redis.NewClient(opt)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		return State{}, errors.Join(fmt.Errorf("--state %s: Redis unreachable: %w", Redact(url), err), rdb.Close())
	}
	st, err := session.NewRedisStore(pingCtx, rdb, "", scfg)
	if err != nil {
		return State{}, errors.Join(fmt.Errorf("--state %s: %w", Redact(url), err), rdb.Close())
	}
	log.Info("session state in Redis", "state", Redact(url), "db", opt.DB, "tls", opt.TLSConfig != nil)
	return State{Sessions: st, rdb: rdb}, nil
}

// TerminalStore is the terminal store run uses: what TerminalService
// needs, plus retention by age and Close.
type TerminalStore interface {
	server.TerminalStore
	Run(ctx context.Context, every time.Duration, report func(error))
	Close() error
}

// OpenTerminalStore opens the terminal store: in Redis, on the sessions'
// client, when --state names one (shared by the replicas); else the
// SQLite file --terminal-db. The key of secret answers' hashes is a local
// file either way (--terminal-key, by default next to --terminal-db).
func OpenTerminalStore(db string, cfg terminal.StoreConfig, st State) (TerminalStore, error) {
	if cfg.KeyFile == "" {
		cfg.KeyFile = db + ".key"
	}
	if st.rdb != nil {
		return terminal.NewRedisStore(st.rdb, "", cfg)
	}
	return terminal.OpenStore(db, cfg)
}

// redisLogger sends go-redis's own messages (failed dials, reconnects) to
// the daemon's logger at warn level; they carry addresses, never passwords.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}
