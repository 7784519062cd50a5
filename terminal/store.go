package terminal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver

	"github.com/classifierd/classifierd/internal/sweep"
)

// Redacted replaces a secret answer, in storage and everywhere else.
const Redacted = "[REDACTED]"

// Event is one recorded answer to a prompt.
type Event struct {
	ID             string
	SessionID      string
	PromptText     string
	Input          string
	Success        bool
	Source         string
	ResponseTimeMs int64
	Time           time.Time
	PromptType     string
	PatternKey     string
	// TTY is what the hub read from the pty; it is evidence, not stored.
	TTY TTYState
	// SecretLen and SecretMAC are what is kept of a secret answer (Input
	// is then Redacted): its length in characters and the hex of its
	// HMAC-SHA256 under the store's key (the first 16 bytes). They are
	// never returned by the API.
	SecretLen int
	SecretMAC string
	// Rules is the version of the secret rules whose verdict the stored
	// event carries (SecretRules when recorded; 0 for an event stored
	// before verdicts were kept, which a read judges again).
	Rules int
}

// MaxWALBytes bounds the write-ahead log: SQLite checkpoints it every
// 1000 pages (4 MiB) and truncates it back to journal_size_limit (4 MiB)
// afterwards, so with one transaction's worth of slack it stays under this.
const MaxWALBytes = 8 << 20

// Store keeps answered prompts in SQLite (WAL mode, so readers never block
// the writer and the data survives restarts). Learned answers are counted
// from the retained events, so retention and deletion also forget what a
// session taught.
type Store struct {
	*storeCore
	db *sql.DB
	// reads is History's and Learned's pool: WAL lets readers run beside
	// the writer, so a GetSessionHistory reading 1,000 events of 8 KB
	// does not hold the one connection every TrackInputEvent writes on
	// (the ninth hostile pass: four such readers took another caller's
	// TrackInputEvent p99 from 288 ms to 9.85 s).
	reads *sql.DB
	path  string
}

// readConns is how many connections History and Learned read on.
const readConns = 2

// schemaVersion 3 keeps a secret answer's length and keyed hash
// (input_len, input_mac) and redacts what the multilingual rules judge
// secret. Version 4 keeps each event's verdict (rules: the SecretRules it
// was judged under), so that reading it does not judge it again, and
// re-judges every stored answer by the inverted rules of the ninth
// hostile pass (kept in clear only on evidence it is not secret).
// Version 5 keeps each event's owner (owner: "u" and the 12 hex digits
// of OwnedSessionID's prefix, "" for a session of no owner) with an index,
// and each owner's count (owners, kept by triggers) and the total (total),
// so that a write finds the owner holding the most without a scan.
const schemaVersion = 5

const schema = `
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  prompt_text TEXT NOT NULL,
  input_text TEXT NOT NULL,
  success INTEGER NOT NULL,
  input_source TEXT NOT NULL,
  response_time_ms INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  prompt_type TEXT NOT NULL,
  pattern_key TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_session ON events(session_id, created_at);
CREATE INDEX IF NOT EXISTS events_created ON events(created_at);
CREATE INDEX IF NOT EXISTS events_pattern ON events(pattern_key, session_id);
`

// schemaOwners is what version 5 adds (migrate creates it once the owner
// column exists): the owner index, each owner's count and the total,
// kept by triggers on every insert and delete whoever deletes (the
// bounds, age, DeleteSession), so that they cannot drift from the rows.
const schemaOwners = `
CREATE INDEX IF NOT EXISTS events_owner ON events(owner, created_at);
CREATE TABLE IF NOT EXISTS owners (owner TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS owners_n ON owners(n, owner);
CREATE TABLE IF NOT EXISTS total (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);
DELETE FROM owners;
DELETE FROM total;
INSERT INTO owners(owner, n) SELECT owner, COUNT(*) FROM events GROUP BY owner;
INSERT INTO total(id, n) SELECT 0, COUNT(*) FROM events;
CREATE TRIGGER IF NOT EXISTS events_counted AFTER INSERT ON events BEGIN
  INSERT OR IGNORE INTO owners(owner, n) VALUES (NEW.owner, 0);
  UPDATE owners SET n = n + 1 WHERE owner = NEW.owner;
  UPDATE total SET n = n + 1 WHERE id = 0;
END;
CREATE TRIGGER IF NOT EXISTS events_uncounted AFTER DELETE ON events BEGIN
  UPDATE owners SET n = n - 1 WHERE owner = OLD.owner;
  DELETE FROM owners WHERE owner = OLD.owner AND n <= 0;
  UPDATE total SET n = n - 1 WHERE id = 0;
END;
`

// dbFiles are the database and the files SQLite keeps next to it.
func dbFiles(path string) []string {
	return []string{path, path + "-wal", path + "-shm", path + "-journal"}
}

// OpenStore opens (creating if needed) the database at path. A missing
// directory is created 0700; the database and its -wal and -shm files are
// 0600 whatever the umask (SQLite gives the side files the database's
// mode, and existing files are tightened), and so is the key file
// (cfg.KeyFile, by default path+".key").
func OpenStore(path string, cfg StoreConfig) (*Store, error) {
	if cfg.KeyFile == "" {
		cfg.KeyFile = path + ".key"
	}
	core, err := newStoreCore(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("terminal: store directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("terminal: create store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("terminal: create store: %w", err)
	}
	if err := tighten(path); err != nil {
		return nil, err
	}
	// secure_delete overwrites deleted rows, so a deleted or pruned secret
	// does not linger in free pages.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)&_pragma=secure_delete(ON)&_pragma=journal_size_limit(4194304)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("terminal: open store: %w", err)
	}
	// One writer connection serialises writes inside the process; WAL and
	// busy_timeout cover other processes.
	db.SetMaxOpenConns(1)
	s := &Store{storeCore: core, db: db, path: path}
	if err := s.migrate(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	// Opened after the migration, so that a reader never sees the old
	// schema.
	reads, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("terminal: open store: %w", err), db.Close())
	}
	reads.SetMaxOpenConns(readConns)
	s.reads = reads
	closeAll := func() error { return errors.Join(reads.Close(), db.Close()) }
	// The connection has created -wal and -shm by now.
	if err := tighten(path); err != nil {
		return nil, errors.Join(err, closeAll())
	}
	if err := s.Prune(context.Background()); err != nil {
		return nil, errors.Join(err, closeAll())
	}
	return s, nil
}

// tighten makes the database's files that exist 0600.
func tighten(path string) error {
	for _, f := range dbFiles(path) {
		if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("terminal: store permissions: %w", err)
		}
	}
	return nil
}

// migrate creates the schema and brings an older one up to date.
// Version 1 kept learned answers in a table shared by every client and
// stored secrets typed at prompts not worded "password": version 2 drops
// the table (answers are counted from events, per session). Version 2
// stored secrets typed at prompts not worded in English: version 3 adds
// input_len and input_mac; version 3 kept answers the secret words
// missed: version 4 re-judges them (plainAnswer) and adds rules (the
// verdict's version). Up to version 4 every migration redacts what the
// current rules judge secret, keeping its length and keyed hash, and
// truncates the WAL so the old values leave it too. A row judged under
// older rules than SecretRules (rules 0 after a migration: its prompt
// text not yet masked) is judged again when read, a bounded number a
// read, and its verdict written back (History). Version 4 pruned the
// oldest events whoever made them: version 5 adds each event's owner and
// the counts that let the bound take from the owner holding the most
// (schemaOwners), filled from the rows already there.
func (s *Store) migrate() error {
	if _, err := s.db.Exec(schema); err != nil {
		return fmt.Errorf("terminal: create schema: %w", err)
	}
	var v sql.NullInt64
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil {
		return fmt.Errorf("terminal: schema version: %w", err)
	}
	if v.Valid && v.Int64 >= schemaVersion {
		return nil
	}
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`DROP TABLE IF EXISTS patterns`); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	for _, col := range []string{`input_len INTEGER NOT NULL DEFAULT 0`, `input_mac TEXT NOT NULL DEFAULT ''`, `rules INTEGER NOT NULL DEFAULT 0`,
		`owner TEXT NOT NULL DEFAULT ''`} {
		if _, err := tx.Exec(`ALTER TABLE events ADD COLUMN ` + col); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return fmt.Errorf("terminal: migrate: %w", err)
		}
	}
	if !v.Valid || v.Int64 < 4 {
		if err := s.resealAll(tx); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`UPDATE events SET owner = substr(session_id, 1, ?) WHERE session_id GLOB ?`, ownerLen-1, ownerGlob); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	if _, err := tx.Exec(schemaOwners); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	if _, err := tx.Exec(`DELETE FROM schema_version`); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO schema_version(version) VALUES (?)`, schemaVersion); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	// The redacted rows' old pages are in the WAL: copy the new ones
	// back and empty it.
	if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	return nil
}

// resealAll judges every answer again in tx, so that what the rules now
// call secret leaves the file (and, after migrate, the WAL) at the
// upgrade, not when someone reads it.
func (s *Store) resealAll(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT id, prompt_text, input_text, prompt_type FROM events WHERE input_text != ?`, Redacted)
	if err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	type sealed struct {
		id  string
		n   int
		mac string
	}
	var secret []sealed
	for rows.Next() {
		var id, prompt, input, typ string
		if err := rows.Scan(&id, &prompt, &input, &typ); err != nil {
			rows.Close()
			return fmt.Errorf("terminal: migrate: %w", err)
		}
		if n, mac, ok := s.reseal(prompt, typ, input); ok {
			secret = append(secret, sealed{id, n, mac})
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("terminal: migrate: %w", err)
	}
	for _, e := range secret {
		if _, err := tx.Exec(`UPDATE events SET input_text = ?, input_len = ?, input_mac = ? WHERE id = ?`, Redacted, e.n, e.mac, e.id); err != nil {
			return fmt.Errorf("terminal: migrate: %w", err)
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return errors.Join(s.reads.Close(), s.db.Close()) }

// Record stores an event. A secret answer (IsSecret: the prompt asks for
// one, the pty had echo off, the value looks like a credential) is stored
// as Redacted and teaches nothing; the second result reports whether the
// answer now counts as learned for its prompt's pattern.
func (s *Store) Record(ctx context.Context, e Event) (Event, bool, error) {
	e, learned, err := s.prepare(e)
	if err != nil {
		return Event{}, false, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Event{}, false, fmt.Errorf("terminal: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO events(id, session_id, prompt_text, input_text, success, input_source, response_time_ms, created_at, prompt_type, pattern_key, input_len, input_mac, rules, owner)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, e.ID, e.SessionID, e.PromptText, e.Input, e.Success, e.Source, e.ResponseTimeMs, e.Time.UnixNano(), e.PromptType, e.PatternKey,
		e.SecretLen, e.SecretMAC, e.Rules, ownerKey(e.SessionID)); err != nil {
		return Event{}, false, fmt.Errorf("terminal: insert event: %w", err)
	}
	// The session's bound, on every insert: the index on (session_id,
	// created_at) makes this a walk over at most MaxPerSession entries.
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE session_id = ? ORDER BY created_at DESC LIMIT -1 OFFSET ?)`,
		e.SessionID, s.cfg.MaxPerSession); err != nil {
		return Event{}, false, fmt.Errorf("terminal: prune session: %w", err)
	}
	// The owner's bound and the overall one, on every insert too: each a
	// lookup of a count and, past it, the oldest events of one owner by
	// the index on (owner, created_at).
	if o := ownerKey(e.SessionID); o != "" {
		if err := trimOwner(ctx, tx, o, s.cfg.MaxPerOwner); err != nil {
			return Event{}, false, err
		}
	}
	if _, err := trimBusiest(ctx, tx, s.cfg.MaxEvents, recordTrim); err != nil {
		return Event{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return Event{}, false, fmt.Errorf("terminal: commit: %w", err)
	}
	if s.pruneDue() {
		if err := s.Prune(ctx); err != nil {
			return Event{}, false, err
		}
	}
	return e, learned, nil
}

// maxTrim bounds the events one of Prune's trimBusiest deletes, each
// batch in its own transaction so that the writer is not held for long
// (Record deletes at most recordTrim).
const maxTrim = 1000

// execer is what trimOwner and trimBusiest need of a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// trimOwner deletes owner's oldest events beyond bound.
func trimOwner(ctx context.Context, tx execer, owner string, bound int) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT n FROM owners WHERE owner = ?`, owner).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("terminal: prune by owner: %w", err)
	}
	if n <= bound {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE owner = ? ORDER BY created_at LIMIT ?)`, owner, n-bound); err != nil {
		return fmt.Errorf("terminal: prune by owner: %w", err)
	}
	return nil
}

// trimBusiest brings the store down to bound events, at most limit of
// them: each time the owner holding the most (of those holding as many,
// the greatest key, as RedisStore picks; the sessions of no owner are one
// owner, "") gives up its oldest. Before, the oldest went whoever made
// them, and identities each within its own bound together emptied a
// quiet one's history (the tenth hostile pass: twelve identities of 60
// events each emptied bob's 10 in a store of 500). It reports how many
// it deleted. Each round reads two counts by the index on owners(n) and
// deletes down to the next owner's count, so it costs a few lookups
// whatever the store holds.
func trimBusiest(ctx context.Context, tx execer, bound, limit int) (int, error) {
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT n FROM total WHERE id = 0`).Scan(&total); err != nil {
		return 0, fmt.Errorf("terminal: prune by count: %w", err)
	}
	done := 0
	for over := min(total-bound, limit); done < over; {
		var owner string
		var n, next int
		if err := tx.QueryRowContext(ctx, `SELECT owner, n FROM owners ORDER BY n DESC, owner DESC LIMIT 1`).Scan(&owner, &n); err != nil {
			return done, fmt.Errorf("terminal: prune by count: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT n FROM owners ORDER BY n DESC, owner DESC LIMIT 1 OFFSET 1`).Scan(&next); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return done, fmt.Errorf("terminal: prune by count: %w", err)
		}
		// Down to one below the next owner's count, which then is the
		// busiest (or to what is over, whichever is less).
		k := min(max(n-next, 1), over-done)
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE owner = ? ORDER BY created_at LIMIT ?)`, owner, k)
		if err != nil {
			return done, fmt.Errorf("terminal: prune by count: %w", err)
		}
		m, err := res.RowsAffected()
		if err != nil {
			return done, fmt.Errorf("terminal: prune by count: %w", err)
		}
		if m == 0 {
			return done, errors.New("terminal: prune by count: the owners' counts do not match the events")
		}
		done += int(m)
	}
	return done, nil
}

// Prune deletes events older than MaxAge, an owner's oldest beyond
// MaxPerOwner, and beyond MaxEvents the oldest of the owner holding the
// most (trimBusiest). Record applies the last two on every insert and
// calls Prune every pruneEvery inserts; the daemon also calls it
// periodically so that age applies to an idle store. It reads counts by
// index and never scans the events.
func (s *Store) Prune(ctx context.Context) error {
	cutoff := time.Now().Add(-s.cfg.MaxAge).UnixNano()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE created_at < ?`, cutoff); err != nil {
		return fmt.Errorf("terminal: prune by age: %w", err)
	}
	// Each owner's share first (a store written with a larger
	// MaxPerOwner): the owners over it by the index on owners(n).
	rows, err := s.db.QueryContext(ctx, `SELECT owner FROM owners WHERE n > ? AND owner != ''`, s.cfg.MaxPerOwner)
	if err != nil {
		return fmt.Errorf("terminal: prune by owner: %w", err)
	}
	var over []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return fmt.Errorf("terminal: prune by owner: %w", err)
		}
		over = append(over, o)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("terminal: prune by owner: %w", err)
	}
	for _, o := range over {
		if err := trimOwner(ctx, s.db, o, s.cfg.MaxPerOwner); err != nil {
			return err
		}
	}
	for {
		n, err := s.trimBatch(ctx)
		if err != nil {
			return err
		}
		if n < maxTrim {
			break
		}
	}
	// Hand freed pages back to the WAL checkpoint so the WAL does not grow
	// with the flood either.
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("terminal: checkpoint: %w", err)
	}
	return nil
}

// trimBatch runs one trimBusiest of at most maxTrim events in a
// transaction of its own.
func (s *Store) trimBatch(ctx context.Context) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("terminal: prune by count: %w", err)
	}
	defer tx.Rollback()
	n, err := trimBusiest(ctx, tx, s.cfg.MaxEvents, maxTrim)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("terminal: prune by count: %w", err)
	}
	return n, nil
}

// Run prunes every interval until ctx is done, so that MaxAge applies
// to a store nobody writes to; report receives the errors (the next
// insert or tick tries again).
func (s *Store) Run(ctx context.Context, every time.Duration, report func(error)) {
	sweep.Every(ctx, every, s.Prune, report)
}

// Count returns how many events the store holds, overall or for session
// when it is not empty.
func (s *Store) Count(ctx context.Context, session string) (int, error) {
	q, args := `SELECT COUNT(*) FROM events`, []any{}
	if session != "" {
		q, args = q+` WHERE session_id = ?`, []any{session}
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("terminal: count: %w", err)
	}
	return n, nil
}

// DeleteSession deletes every event of a session, and so everything it
// taught; it returns how many events it deleted.
func (s *Store) DeleteSession(ctx context.Context, session string) (int64, error) {
	if err := CheckSessionID(session); err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM events WHERE session_id = ?`, session)
	if err != nil {
		return 0, fmt.Errorf("terminal: delete session: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("terminal: delete session: %w", err)
	}
	return n, nil
}

// maxLearned bounds the distinct answers returned for one pattern.
const maxLearned = 20

// Learned returns what was successfully answered to a prompt's pattern in
// session (with ShareLearned, every session's answers of the session's
// owner, or of every session of no owner when it has none). Without sharing and
// without a session it returns nothing. Secret answers are never among
// them.
func (s *Store) Learned(ctx context.Context, prompt, session string) ([]Learned, error) {
	scope, ok, err := s.learnedFor(prompt, session)
	if !ok {
		return nil, err
	}
	q := `SELECT input_text, COUNT(*) AS n FROM events WHERE pattern_key = ? AND success = 1 AND input_text != ?`
	args := []any{scope.pattern, Redacted}
	switch {
	case scope.session != "":
		q += ` AND session_id = ?`
		args = append(args, scope.session)
	case scope.owner != "":
		q += ` AND substr(session_id, 1, ?) = ?`
		args = append(args, ownerLen, scope.owner)
	default:
		// Sessions of no owner share among themselves, never an owner's
		// (as RedisStore keeps them apart).
		q += ` AND session_id NOT GLOB ?`
		args = append(args, ownerGlob)
	}
	q += ` GROUP BY input_text ORDER BY n DESC, input_text LIMIT ?`
	args = append(args, maxLearned)
	rows, err := s.reads.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("terminal: learned: %w", err)
	}
	defer rows.Close()
	var all []Learned
	for rows.Next() {
		var l Learned
		if err := rows.Scan(&l.Input, &l.Successes); err != nil {
			return nil, fmt.Errorf("terminal: learned: %w", err)
		}
		all = append(all, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("terminal: learned: %w", err)
	}
	return suggestable(prompt, all), nil
}

// History returns a session's events, oldest first, at most limit. An
// event recorded with the current rules' verdict is returned as stored;
// one stored before verdicts were kept is judged again (at most
// MaxRejudge a call, the rest returned redacted: judgeRead), after the
// rows are read so that the store's connection is not held meanwhile,
// and its verdict written back.
func (s *Store) History(ctx context.Context, session string, limit int) ([]Event, error) {
	if err := CheckSessionID(session); err != nil {
		return nil, err
	}
	out, err := s.history(ctx, session, limit)
	if err != nil {
		return nil, err
	}
	if judged := s.judgeRead(out); len(judged) > 0 {
		if err := s.writeVerdicts(ctx, out, judged); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// history reads a session's newest limit events, oldest first, as stored.
func (s *Store) history(ctx context.Context, session string, limit int) ([]Event, error) {
	rows, err := s.reads.QueryContext(ctx, `SELECT id, session_id, prompt_text, input_text, success, input_source, response_time_ms, created_at, prompt_type, pattern_key, input_len, input_mac, rules
		FROM (SELECT * FROM events WHERE session_id = ? ORDER BY created_at DESC LIMIT ?) ORDER BY created_at`, session, limit)
	if err != nil {
		return nil, fmt.Errorf("terminal: history: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var ns int64
		if err := rows.Scan(&e.ID, &e.SessionID, &e.PromptText, &e.Input, &e.Success, &e.Source, &e.ResponseTimeMs, &ns, &e.PromptType, &e.PatternKey,
			&e.SecretLen, &e.SecretMAC, &e.Rules); err != nil {
			return nil, fmt.Errorf("terminal: history: %w", err)
		}
		e.Time = time.Unix(0, ns)
		out = append(out, e)
	}
	return out, rows.Err()
}

// writeVerdicts stores what judgeRead made of the events at idx (their
// masked prompt, redacted answer and verdict), so that they are judged
// once; an event deleted meanwhile stays deleted.
func (s *Store) writeVerdicts(ctx context.Context, evs []Event, idx []int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("terminal: history verdicts: %w", err)
	}
	defer tx.Rollback()
	for _, i := range idx {
		e := evs[i]
		if _, err := tx.ExecContext(ctx, `UPDATE events SET prompt_text = ?, input_text = ?, input_len = ?, input_mac = ?, rules = ? WHERE id = ? AND rules < ?`,
			e.PromptText, e.Input, e.SecretLen, e.SecretMAC, e.Rules, e.ID, SecretRules); err != nil {
			return fmt.Errorf("terminal: history verdicts: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("terminal: history verdicts: %w", err)
	}
	return nil
}
