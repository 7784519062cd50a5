package terminal

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"
)

// This file holds the rules every terminal store applies, so that Store
// (SQLite) and RedisStore differ only in how they read and write:
// retention (StoreConfig, pruneEvery), what is checked and redacted before
// an event is stored (prepare), what the current secret rules make of an
// answer an older version stored in clear (reseal, redact), and whose
// answers Learned counts (learnedFor).

// Default retention (StoreConfig's zero values).
const (
	DefaultMaxAge        = 30 * 24 * time.Hour
	DefaultMaxPerSession = 1000
	DefaultMaxEvents     = 100_000
)

// StoreConfig bounds what the store keeps and says who learns from whom.
// Zero values take the defaults above.
type StoreConfig struct {
	// MaxAge: events older than this are deleted.
	MaxAge time.Duration
	// MaxPerSession: a session keeps its newest MaxPerSession events.
	MaxPerSession int
	// MaxEvents: the store keeps at most MaxEvents events overall, on
	// every insert. Past it the owner holding the most (an identity's
	// sessions, OwnedSessionID; the sessions of no owner count as one
	// owner) gives up its oldest, so that a quiet identity keeps its
	// events while busy ones displace each other (ties: the greatest
	// owner key, the same in every store).
	MaxEvents int
	// MaxPerOwner: the sessions of one owner (an identity's,
	// OwnedSessionID) keep their newest MaxPerOwner events together,
	// on every insert, so that one identity recording in many sessions
	// fills at most this much of the store. The sessions of no owner
	// (an anonymous daemon's, where every client is one identity) are
	// bounded by MaxEvents alone. Zero: a tenth of MaxEvents.
	MaxPerOwner int
	// ShareLearned makes answers learned in one session suggestions for
	// every session. Off, a session is suggested only what it taught, so
	// one client cannot teach another to answer "y" to a dangerous prompt.
	ShareLearned bool
	// KeyFile holds the key of the hashes kept of secret answers (32
	// random bytes, made 0600 on first use). Empty: Store uses its
	// database's path with ".key" appended; RedisStore makes a key that
	// lives in this process only (its hashes cannot be compared after a
	// restart). The key never goes to Redis or into the database.
	KeyFile string
}

func (c *StoreConfig) validate() error {
	if c.MaxAge < 0 || c.MaxPerSession < 0 || c.MaxEvents < 0 || c.MaxPerOwner < 0 {
		return fmt.Errorf("%w: retention limits must not be negative", ErrBadArgument)
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxPerSession == 0 {
		c.MaxPerSession = DefaultMaxPerSession
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.MaxPerOwner == 0 {
		c.MaxPerOwner = max(c.MaxEvents/10, 1)
	}
	return nil
}

// recordTrim bounds the events one Record removes for the overall bound:
// an insert leaves the store at most one over it, and a store over by
// more (MaxEvents lowered since it was written) is brought down by Prune,
// in batches, at open (SQLite), every pruneEvery inserts and on Run's
// ticks.
const recordTrim = 8

// pruneEvery is how many inserts pass between prunes (age, and the
// bounds again for a store written under larger ones); the per-session,
// per-owner and overall bounds are enforced on every insert.
const pruneEvery = 64

// storeCore is what Store and RedisStore share: their limits, the key of
// the hashes kept of secret answers, and the count of inserts that says
// when the overall prune is due. Each store embeds one (by pointer: the
// count must not be copied).
type storeCore struct {
	cfg     StoreConfig
	key     *secretKey
	inserts atomic.Int64
}

// newStoreCore validates cfg, filling in the defaults, and loads the key
// from cfg.KeyFile, or makes one that lives in this process only when
// cfg.KeyFile is empty.
func newStoreCore(cfg StoreConfig) (*storeCore, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var key *secretKey
	var err error
	if cfg.KeyFile == "" {
		key, err = newSecretKey()
	} else {
		key, err = loadSecretKey(cfg.KeyFile)
	}
	if err != nil {
		return nil, err
	}
	return &storeCore{cfg: cfg, key: key}, nil
}

// Input sources.
var inputSources = map[string]bool{"user_typed": true, "ai_suggested": true, "auto_injected": true}

// CheckEvent validates an event's fields, sizes first: callers run it
// before any detection or matching on the event's text.
func CheckEvent(e Event) error {
	if len(e.PromptText) > MaxPromptBytes || len(e.Input) > MaxInputBytes {
		return fmt.Errorf("%w: prompt_text and input_text are limited to %d bytes", ErrTooLarge, MaxPromptBytes)
	}
	if err := CheckSessionID(e.SessionID); err != nil {
		return err
	}
	if !inputSources[e.Source] {
		return fmt.Errorf("%w: input_source %q is not user_typed, ai_suggested or auto_injected", ErrBadArgument, clipText(e.Source, 32))
	}
	if e.ResponseTimeMs < 0 {
		return fmt.Errorf("%w: response_time_ms is negative", ErrBadArgument)
	}
	if e.PromptText == "" {
		return fmt.Errorf("%w: prompt_text is empty", ErrBadArgument)
	}
	return nil
}

// prepare is what every store does to an event before it stores it:
// check it, redact a secret answer (IsSecret) keeping only its length and
// keyed hash, mask the secrets inside its prompt's text (MaskSecrets),
// give it an id, its pattern key and a time. learned reports
// whether the answer now counts as learned for its pattern: a success
// that is not secret (a redacted answer teaches nothing).
func (c *storeCore) prepare(e Event) (_ Event, learned bool, _ error) {
	if err := CheckEvent(e); err != nil {
		return Event{}, false, err
	}
	e.SecretLen, e.SecretMAC = 0, ""
	secret := IsSecret(e.PromptText, e.PromptType, e.Input, e.TTY)
	if secret {
		e.SecretLen, e.SecretMAC = c.key.seal(e.Input)
		e.Input = Redacted
		if e.PromptType != TypePassword && SecretPrompt(e.PromptText) {
			e.PromptType = TypePassword
		}
	}
	id, err := newID()
	if err != nil {
		return Event{}, false, fmt.Errorf("terminal: event id: %w", err)
	}
	// The prompt is masked once (the masking is most of an event's
	// cost) and keyed from the masked text, as PatternKey does.
	e.PromptText = MaskSecrets(e.PromptText)
	e.ID, e.PatternKey, e.Rules = id, maskedPatternKey(e.PromptText), SecretRules
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	return e, e.Success && !secret, nil
}

func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// pruneDue counts one insert and reports whether the prune (Prune) is
// due: every pruneEvery inserts.
func (c *storeCore) pruneDue() bool {
	return c.inserts.Add(1)%pruneEvery == 0
}

// reseal applies the current secret rules to an answer a store holds in
// clear, stored by an older version (the stored prompt type counts; the
// pty state was never stored): when they judge it secret, ok is true and
// n and mac are what to keep of it instead, its length and keyed hash.
func (c *storeCore) reseal(prompt, typ, input string) (n int, mac string, ok bool) {
	if input == Redacted || !IsSecret(prompt, typ, input, TTYState{}) {
		return 0, "", false
	}
	n, mac = c.key.seal(input)
	return n, mac, true
}

// redact applies the current rules to an event read from a store: an
// answer an older version stored in clear that they judge secret is
// returned as Redacted, with its length and keyed hash, and the secrets
// inside its prompt's text are masked. The event then carries the
// current rules' verdict (Rules).
func (c *storeCore) redact(e Event) Event {
	if n, mac, ok := c.reseal(e.PromptText, e.PromptType, e.Input); ok {
		e.Input, e.SecretLen, e.SecretMAC = Redacted, n, mac
	}
	e.PromptText = MaskSecrets(e.PromptText)
	e.Rules = SecretRules
	return e
}

// SecretRules is the version of the secret rules (IsSecret, MaskSecrets)
// whose verdict a store keeps with each event it records (Event.Rules):
// an event stored with it is returned as stored, never judged again. An
// event stored before verdicts were kept (Rules 0), or under older rules,
// is judged again when it is read (judgeRead), and the store writes the
// verdict back. Raise it when a change of the rules should reach what is
// already stored. Version 2 (the tenth hostile pass) masks a secret
// prompt's shown defaults and offered answers ("Password [Sunflower42]:")
// and useradd/usermod/rclone passwords, which version 1 kept. Version 3
// (the sixteenth hostile pass) redacts what was typed at a '>' prompt
// whose name holds a secret word ("MASTERKEY> ", "mypass> ") and fish's
// set -x, setx, setenv, "aws configure set", $env:, net use, cmdkey,
// httpie, iwconfig and wpa_cli secrets, which version 2 kept.
const SecretRules = 3

// MaxRejudge bounds the stored events one read (History) judges again:
// judging costs milliseconds of CPU an event (most of it MaskSecrets on a
// 4 KB prompt), and GetSessionHistory of 1,000 events judged on every read
// took 10 s (the ninth hostile pass). Beyond it, an unjudged event's
// answer is returned Redacted and its prompt as SecretMask, never in
// clear; its verdict is written back by a later read.
const MaxRejudge = 50

// judgeRead makes the events of one read safe to return, in place: an
// event with the current rules' verdict is left as stored; one without
// is judged again (redact), at most MaxRejudge of them, the rest returned
// Redacted with their prompt masked whole. It returns the indexes of the
// events judged again, whose verdict the store writes back so that the
// next read does not judge them.
func (c *storeCore) judgeRead(evs []Event) (judged []int) {
	for i := range evs {
		if evs[i].Rules >= SecretRules {
			continue
		}
		if len(judged) < MaxRejudge {
			evs[i] = c.redact(evs[i])
			judged = append(judged, i)
			continue
		}
		if evs[i].Input != Redacted {
			evs[i].Input, evs[i].SecretLen, evs[i].SecretMAC = Redacted, 0, ""
		}
		evs[i].PromptText = SecretMask
	}
	return judged
}

// learnedScope is whose answers Learned counts for a prompt.
type learnedScope struct {
	// pattern is the prompt's PatternKey.
	pattern string
	// session is the one session whose answers count; empty with
	// ShareLearned, where every session's do: every session of owner
	// when it is set (an identity's, OwnedSessionID), so that no identity
	// is suggested, or can teach, another's answers.
	session string
	owner   string
}

// learnedFor says whose answers Learned counts for prompt asked in
// session: session's own, or with ShareLearned every session's of the
// session's owner (every session's of no owner when it has none). ok is
// false when none do (no sharing and no session); a malformed session is
// an error.
func (c *storeCore) learnedFor(prompt, session string) (_ learnedScope, ok bool, _ error) {
	scope := learnedScope{pattern: PatternKey(clipEnd(prompt, MaxPromptBytes))}
	switch {
	case c.cfg.ShareLearned:
		if session != "" {
			if err := CheckSessionID(session); err != nil {
				return learnedScope{}, false, err
			}
		}
		scope.owner = sessionOwner(session)
	case session == "" || session == sessionOwner(session):
		// No session (an owner's prefix alone names none).
		return learnedScope{}, false, nil
	default:
		if err := CheckSessionID(session); err != nil {
			return learnedScope{}, false, err
		}
		scope.session = session
	}
	return scope, true, nil
}
