package terminal

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"

	"fmt"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver
)

// Redacted replaces what was typed at a password prompt, in storage and
// everywhere else.
const Redacted = "[REDACTED]"

// Input sources.
var inputSources = map[string]bool{"user_typed": true, "ai_suggested": true, "auto_injected": true}

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
}

// Store keeps events and learned patterns in SQLite (WAL mode, so readers
// never block the writer and the data survives restarts).
type Store struct {
	db *sql.DB
}

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
CREATE TABLE IF NOT EXISTS patterns (
  pattern_key TEXT NOT NULL,
  input_text TEXT NOT NULL,
  successes INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (pattern_key, input_text)
);
`

// OpenStore opens (creating if needed) the database at path.
func OpenStore(path string) (*Store, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("terminal: open store: %w", err)
	}
	// One writer connection serialises writes inside the process; WAL and
	// busy_timeout cover other processes.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("terminal: create schema: %w", err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n); err != nil {
		db.Close()
		return nil, fmt.Errorf("terminal: schema version: %w", err)
	}
	if n == 0 {
		if _, err := db.Exec(`INSERT INTO schema_version(version) VALUES (1)`); err != nil {
			db.Close()
			return nil, fmt.Errorf("terminal: schema version: %w", err)
		}
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Record stores an event; a successful answer also reinforces its pattern.
// The input to a password prompt is stored as Redacted and never
// reinforces anything.
func (s *Store) Record(ctx context.Context, e Event) (Event, bool, error) {
	if err := CheckSessionID(e.SessionID); err != nil {
		return Event{}, false, err
	}
	if !inputSources[e.Source] {
		return Event{}, false, fmt.Errorf("%w: input_source %q is not user_typed, ai_suggested or auto_injected", ErrBadArgument, clipText(e.Source, 32))
	}
	if e.ResponseTimeMs < 0 {
		return Event{}, false, fmt.Errorf("%w: response_time_ms is negative", ErrBadArgument)
	}
	if e.PromptText == "" {
		return Event{}, false, fmt.Errorf("%w: prompt_text is empty", ErrBadArgument)
	}
	if len(e.PromptText) > 4096 || len(e.Input) > 4096 {
		return Event{}, false, fmt.Errorf("%w: prompt_text and input_text are limited to 4096 bytes", ErrBadArgument)
	}
	if e.PromptType == TypePassword {
		e.Input = Redacted
	}
	id, err := newID()
	if err != nil {
		return Event{}, false, fmt.Errorf("terminal: event id: %w", err)
	}
	e.ID, e.PatternKey = id, PatternKey(e.PromptText)
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Event{}, false, fmt.Errorf("terminal: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO events(id, session_id, prompt_text, input_text, success, input_source, response_time_ms, created_at, prompt_type, pattern_key)
		VALUES (?,?,?,?,?,?,?,?,?,?)`, e.ID, e.SessionID, e.PromptText, e.Input, e.Success, e.Source, e.ResponseTimeMs, e.Time.UnixNano(), e.PromptType, e.PatternKey); err != nil {
		return Event{}, false, fmt.Errorf("terminal: insert event: %w", err)
	}
	updated := false
	if e.Success && e.PromptType != TypePassword {
		if _, err := tx.ExecContext(ctx, `INSERT INTO patterns(pattern_key, input_text, successes, updated_at) VALUES (?,?,1,?)
			ON CONFLICT(pattern_key, input_text) DO UPDATE SET successes = successes + 1, updated_at = excluded.updated_at`,
			e.PatternKey, e.Input, e.Time.UnixNano()); err != nil {
			return Event{}, false, fmt.Errorf("terminal: update pattern: %w", err)
		}
		updated = true
	}
	if err := tx.Commit(); err != nil {
		return Event{}, false, fmt.Errorf("terminal: commit: %w", err)
	}
	return e, updated, nil
}

// Learned returns what was successfully answered to a prompt's pattern.
func (s *Store) Learned(ctx context.Context, prompt string) ([]Learned, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT input_text, successes FROM patterns WHERE pattern_key = ? ORDER BY successes DESC, input_text`, PatternKey(prompt))
	if err != nil {
		return nil, fmt.Errorf("terminal: learned: %w", err)
	}
	defer rows.Close()
	var out []Learned
	total := 0
	for rows.Next() {
		var l Learned
		if err := rows.Scan(&l.Input, &l.Successes); err != nil {
			return nil, fmt.Errorf("terminal: learned: %w", err)
		}
		total += l.Successes
		out = append(out, l)
	}
	for i := range out {
		out[i].Total = total
	}
	return out, rows.Err()
}

// History returns a session's events, oldest first, at most limit.
func (s *Store) History(ctx context.Context, session string, limit int) ([]Event, error) {
	if err := CheckSessionID(session); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, session_id, prompt_text, input_text, success, input_source, response_time_ms, created_at, prompt_type, pattern_key
		FROM (SELECT * FROM events WHERE session_id = ? ORDER BY created_at DESC LIMIT ?) ORDER BY created_at`, session, limit)
	if err != nil {
		return nil, fmt.Errorf("terminal: history: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var ns int64
		if err := rows.Scan(&e.ID, &e.SessionID, &e.PromptText, &e.Input, &e.Success, &e.Source, &e.ResponseTimeMs, &ns, &e.PromptType, &e.PatternKey); err != nil {
			return nil, fmt.Errorf("terminal: history: %w", err)
		}
		e.Time = time.Unix(0, ns)
		out = append(out, e)
	}
	return out, rows.Err()
}
