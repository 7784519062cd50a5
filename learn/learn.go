// Package learn learns from use: which servers and tools the agents of a
// deployment actually call for which requests. A hub (or classifierd's own
// proxy) reports, for a routed request, what was called; the learner keeps
// those reports — the request's embedding, quantised, and the ids of what
// was called, never its text — bounded, decayed and capped per identity,
// and turns them into evidence for the next request: how often each server
// is called (its base rate), which servers come with the ones chosen
// (co-use), and how often it was called in the tasks most like this one
// (its usage by meaning). Route weighs that evidence beside the
// descriptions (View.Servers); with no reports nothing changes.
//
// Reports are kept in a Store: memory, SQLite, or Redis shared by replicas.
// They are grouped by a key (Key): the embedding model's fingerprint, as
// request vectors compare only within one model, and a scope name. A
// report names servers and tools by id; what a catalog no longer has is
// ignored, and a tool whose definition changed (its content hash) starts
// again from nothing.
package learn

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Errors the learner returns; server/errors.go maps them to statuses.
var (
	// ErrBadReport is a report that cannot be used as given: no request
	// id and no query, too many names, a name too long.
	ErrBadReport = errors.New("learn: bad report")
	// ErrUnknownRequest is a request id the learner does not hold (never
	// issued, expired, evicted, or another caller's).
	ErrUnknownRequest = errors.New("learn: unknown request id")
	// ErrRateLimited is a caller reporting faster than its share.
	ErrRateLimited = errors.New("learn: too many reports from this caller; retry later")
	// ErrOff is a report to a daemon running with --learn=off.
	ErrOff = errors.New("learn: learning is off")
	// ErrUnavailable is a store that cannot be reached (Redis down).
	ErrUnavailable = errors.New("learn: learning store unavailable")
)

// Limits of one report.
const (
	// MaxDescribed bounds the servers whose description-based
	// probability a record keeps (the first by it).
	MaxDescribed = 16
	// MaxNames bounds the servers, tools and shown servers of one report.
	MaxNames = 64
	// MaxNameBytes bounds one server or tool name.
	MaxNameBytes = 256
	// MaxRequestIDBytes bounds a request id.
	MaxRequestIDBytes = 128
)

// Config bounds and tunes a Learner. Zero values take the defaults.
type Config struct {
	// HalfLife is how fast reports fade: a report HalfLife old weighs
	// half as much as a new one (default 30 days; negative: never fade).
	HalfLife time.Duration
	// MaxAge drops reports older than this (default 180 days).
	MaxAge time.Duration
	// MaxReports bounds the reports kept per key; past it the identity
	// holding the most gives up its oldest, so others at their own bound
	// cannot push out an identity's reports (default 20,000: 20,000 × (384
	// bytes of vector + ids) ≈ 10 MB).
	MaxReports int
	// MaxPerIdentity bounds the reports one identity keeps per key; its
	// oldest go first (default 5,000).
	MaxPerIdentity int
	// IdentityCap caps the weight of one identity's reports, in reports:
	// an identity with more weighs as IdentityCap reports in all, so one
	// caller flooding reports cannot outweigh the rest (default 200).
	IdentityCap float64
	// Share makes every identity's reports count alike in every caller's
	// answers (each up to IdentityCap): for deployments whose reporters
	// all trust each other. Off (the default), a caller's answers weigh
	// its own reports fully, and other identities' move them only as far
	// as the others' reports agree with any one identity (or group of
	// them) left out (Request), weighing at most max(ForeignFloor,
	// ForeignRatio × its own) reports (defaults 10 and 0.25): one
	// identity alone moves no other caller's answers.
	Share        bool
	ForeignFloor float64
	ForeignRatio float64
	// Rate and Burst bound the reports per second of one identity
	// (defaults 20 and 200).
	Rate  float64
	Burst int
	// PendingTTL is how long a routed request's id can be reported on
	// (default 1 hour); MaxPending bounds the requests held (default
	// 50,000, about 45 MB: a vector and 16 probabilities each) and
	// MaxPendingPerIdentity one identity's share (default 10,000); when
	// all are held, the identity holding the most makes way.
	PendingTTL            time.Duration
	MaxPending            int
	MaxPendingPerIdentity int
	// Combine, when set, turns a candidate's learned evidence into its
	// probability of being needed in place of the Bayesian update
	// (Evidence.Bayes, docs/learning.md): a map fitted across catalogs
	// takes Evidence's fields as its features.
	Combine func(Evidence) float64
	// Scope keeps deployments that share one store apart (Key).
	Scope string
}

// WithDefaults is c with its zero values set to the defaults.
func (c Config) WithDefaults() Config {
	if c.HalfLife == 0 {
		c.HalfLife = 30 * 24 * time.Hour
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 180 * 24 * time.Hour
	}
	if c.MaxReports <= 0 {
		c.MaxReports = 20000
	}
	if c.MaxPerIdentity <= 0 {
		c.MaxPerIdentity = 5000
	}
	if c.IdentityCap <= 0 {
		c.IdentityCap = 200
	}
	if c.ForeignFloor <= 0 {
		c.ForeignFloor = 10
	}
	if c.ForeignRatio <= 0 {
		c.ForeignRatio = 0.25
	}
	if c.Rate <= 0 {
		c.Rate = 20
	}
	if c.Burst <= 0 {
		c.Burst = 200
	}
	if c.PendingTTL <= 0 {
		c.PendingTTL = time.Hour
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 50000
	}
	if c.MaxPendingPerIdentity <= 0 {
		c.MaxPendingPerIdentity = 10000
	}
	return c
}

// Key is the key reports are kept under for a model fingerprint and a
// scope: request vectors compare only within one embedding model, and a
// scope lets deployments sharing one store keep apart.
func Key(modelFingerprint, scope string) string {
	sum := sha256.Sum256([]byte(modelFingerprint + "\x00" + scope))
	return hex.EncodeToString(sum[:12])
}

// ToolRef names a tool of a server.
type ToolRef struct {
	Server, Name string
}

// ToolUse is a tool that was called, with the content hash of its
// definition when it was: uses under another hash do not count for it.
type ToolUse struct {
	Server string `json:"s"`
	Name   string `json:"n"`
	Hash   string `json:"h"`
}

// Record is one stored report: what a request (its vector) used. It holds
// ids, counts and a vector, never text.
type Record struct {
	// ID is the request id (a routed request's, or one made for a report
	// by query); a second report with the same id replaces the first.
	ID string `json:"id"`
	// Key is the key the record is kept under (Key).
	Key string `json:"key"`
	// Identity is who reported it: the caller's quota key ("token:hub",
	// "cert:cn", "peer:host").
	Identity string    `json:"identity"`
	At       time.Time `json:"at"`
	// Vec is the request's unit embedding, quantised to int8 (×127).
	Vec []int8 `json:"vec"`
	// Servers were called; Tools were called (their servers are in
	// Servers too); Shown, when not empty, are the servers the agent was
	// shown (a server not shown could not have been called).
	Servers []string  `json:"servers"`
	Tools   []ToolUse `json:"tools,omitempty"`
	Shown   []string  `json:"shown,omitempty"`
	// Described are the servers the descriptions ranked first for the
	// request (at most MaxDescribed) with their description-based
	// probabilities: what is learned is what the reports add to them.
	Described []Prob `json:"described,omitempty"`
}

// Prob is a server's description-based probability of being needed.
type Prob struct {
	Server string  `json:"s"`
	P      float64 `json:"p"`
}

// Quantize turns a unit vector into the int8 form records keep.
func Quantize(v []float32) []int8 {
	out := make([]int8, len(v))
	for i, x := range v {
		q := x * 127
		switch {
		case q > 127:
			q = 127
		case q < -127:
			q = -127
		}
		if q >= 0 {
			out[i] = int8(q + 0.5)
		} else {
			out[i] = int8(q - 0.5)
		}
	}
	return out
}

// Dequantize is a record's vector as a unit float vector.
func Dequantize(q []int8) []float32 {
	out := make([]float32, len(q))
	inv := invNorm(q)
	for i, x := range q {
		out[i] = float32(x) * inv
	}
	return out
}

// invNorm is the inverse of q's norm as Dequantize scales by (0 for a
// zero vector): q's cosine with a unit vector u is Σ u·q times it.
func invNorm(q []int8) float32 {
	var n float64
	for _, x := range q {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return 0
	}
	return float32(1 / sqrt(n))
}

func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrBadReport, what)
	}
	if len(s) > MaxNameBytes {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrBadReport, what, len(s), MaxNameBytes)
	}
	return nil
}
