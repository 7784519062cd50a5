package learn

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver
)

// SQLite keeps records in a SQLite file (WAL mode): the database and its
// side files are 0600, deleted rows are overwritten (secure_delete).
type SQLite struct {
	db   *sql.DB
	path string
}

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS reports (
  key TEXT NOT NULL,
  id TEXT NOT NULL,
  identity TEXT NOT NULL,
  at INTEGER NOT NULL,
  vec BLOB NOT NULL,
  uses TEXT NOT NULL,
  PRIMARY KEY (key, id)
);
CREATE INDEX IF NOT EXISTS reports_identity ON reports(identity);
`

// uses is the JSON of a record's ids: what was called and shown, and the
// description-based probabilities of the servers ranked first.
type uses struct {
	Servers   []string  `json:"servers"`
	Tools     []ToolUse `json:"tools,omitempty"`
	Shown     []string  `json:"shown,omitempty"`
	Described []Prob    `json:"described,omitempty"`
}

// OpenSQLite opens (creating) the database at path; a missing directory
// is created 0700.
func OpenSQLite(path string) (*SQLite, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("learn: store directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("learn: create store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("learn: create store: %w", err)
	}
	if err := tighten(path); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=secure_delete(ON)&_pragma=journal_size_limit(4194304)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("learn: open store: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(sqliteSchema); err != nil {
		return nil, errors.Join(fmt.Errorf("learn: create schema: %w", err), db.Close())
	}
	if err := tighten(path); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &SQLite{db: db, path: path}, nil
}

// tighten makes the database's files that exist 0600.
func tighten(path string) error {
	for _, f := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("learn: store permissions: %w", err)
		}
	}
	return nil
}

// Put implements Store.
func (s *SQLite) Put(ctx context.Context, r Record) error {
	u, err := json.Marshal(uses{Servers: r.Servers, Tools: r.Tools, Shown: r.Shown, Described: r.Described})
	if err != nil {
		return err
	}
	vec := make([]byte, len(r.Vec))
	for i, x := range r.Vec {
		vec[i] = byte(x)
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO reports(key, id, identity, at, vec, uses) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Key, r.ID, r.Identity, r.At.UnixMilli(), vec, string(u))
	if err != nil {
		return fmt.Errorf("learn: store report: %w", err)
	}
	return nil
}

// Delete implements Store.
func (s *SQLite) Delete(ctx context.Context, key string, ids []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("learn: delete reports: %w", err)
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `DELETE FROM reports WHERE key = ? AND id = ?`, key, id); err != nil {
			return errors.Join(fmt.Errorf("learn: delete reports: %w", err), tx.Rollback())
		}
	}
	return tx.Commit()
}

// Reset implements Store.
func (s *SQLite) Reset(ctx context.Context, identity string) error {
	var err error
	if identity == "" {
		_, err = s.db.ExecContext(ctx, `DELETE FROM reports`)
	} else {
		_, err = s.db.ExecContext(ctx, `DELETE FROM reports WHERE identity = ?`, identity)
	}
	if err != nil {
		return fmt.Errorf("learn: reset: %w", err)
	}
	// Checkpoint, so the deleted reports leave the write-ahead log too.
	_, _ = s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return nil
}

// Load implements Store.
func (s *SQLite) Load(ctx context.Context) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, id, identity, at, vec, uses FROM reports ORDER BY at`)
	if err != nil {
		return nil, fmt.Errorf("learn: load: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var at int64
		var vec []byte
		var u string
		if err := rows.Scan(&r.Key, &r.ID, &r.Identity, &at, &vec, &u); err != nil {
			return nil, fmt.Errorf("learn: load: %w", err)
		}
		var us uses
		if err := json.Unmarshal([]byte(u), &us); err != nil {
			continue // a row this version cannot read is skipped, not fatal
		}
		r.At = time.UnixMilli(at).UTC()
		r.Vec = make([]int8, len(vec))
		for i, b := range vec {
			r.Vec[i] = int8(b)
		}
		r.Servers, r.Tools, r.Shown, r.Described = us.Servers, us.Tools, us.Shown, us.Described
		out = append(out, r)
	}
	return out, rows.Err()
}

// Close implements Store.
func (s *SQLite) Close() error { return s.db.Close() }
