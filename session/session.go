// Package session keeps per-client tool-exposure sessions for hubs: which
// tool categories each client currently sees, the history of changes, and
// a change feed so a hub can relay MCP notifications/tools/list_changed.
// Sessions expire when idle and are bounded in number. Store keeps them in
// this process's memory (the default); RedisStore keeps them in Redis, so
// that replicas behind one load balancer share them and their change feed.
// Both check their arguments the same way and return the same errors.
package session

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/classifierd/classifierd/internal/busiest"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/internal/sweep"
)

// Errors returned by the store.
var (
	ErrNotFound = errors.New("session: not found")
	ErrExists   = errors.New("session: already exists")
	ErrLimit    = errors.New("session: too many sessions")
	// ErrOwnerLimit reports that one client (Owner.Quota) holds
	// Config.MaxPerOwner sessions already.
	ErrOwnerLimit  = errors.New("session: too many sessions for this client")
	ErrBadMode     = errors.New("session: mode must be additive or replacement")
	ErrBadExposure = errors.New("session: exposure must be zero, meta-only, minimal or all")
	ErrBadID       = errors.New("session: id must be 1-128 characters of letters, digits and ._:-")
	// ErrUnknownCategory reports a category the catalog (Config.AllCategories) does not have.
	ErrUnknownCategory = errors.New("session: unknown category")
	ErrClosed          = errors.New("session: store closed")
)

// Exposure is what a new session sees.
type Exposure string

// Default exposures.
const (
	ExposeZero     Exposure = "zero"
	ExposeMetaOnly Exposure = "meta-only"
	ExposeMinimal  Exposure = "minimal"
	ExposeAll      Exposure = "all"
)

// Modes of Update.
const (
	ModeAdditive    = "additive"
	ModeReplacement = "replacement"
)

// Config configures a Store.
type Config struct {
	TTL               time.Duration // idle expiry (default 30m)
	MaxSessions       int           // default 10000
	MaxPerOwner       int           // most sessions one Owner.Quota may hold (0: MaxSessions)
	DefaultExposure   Exposure      // default meta-only
	AllCategories     []string      // every catalog category
	MetaCategory      string        // default "meta"
	MinimalCategories []string      // for "minimal" (default: the meta category)
	HistoryLimit      int           // history entries kept per session (default 100)
	WatchBuffer       int           // events buffered per watcher (default 16)
	Now               func() time.Time
	// Displaced, when set, is called once for each session closed to make
	// room for a caller holding fewer sessions than the busiest (see
	// CreateFor); the daemon counts them in its metrics.
	Displaced func()
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.TTL <= 0 {
		out.TTL = 30 * time.Minute
	}
	if out.MaxSessions <= 0 {
		out.MaxSessions = 10000
	}
	if out.MaxPerOwner <= 0 || out.MaxPerOwner > out.MaxSessions {
		out.MaxPerOwner = out.MaxSessions
	}
	if out.DefaultExposure == "" {
		out.DefaultExposure = ExposeMetaOnly
	}
	if out.MetaCategory == "" {
		out.MetaCategory = "meta"
	}
	if len(out.MinimalCategories) == 0 {
		out.MinimalCategories = []string{out.MetaCategory}
	}
	if out.HistoryLimit <= 0 {
		out.HistoryLimit = 100
	}
	if out.WatchBuffer <= 0 {
		out.WatchBuffer = 16
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

// Limits are the most sessions a store with c holds, in all and per
// Owner.Quota, defaults applied.
func (c Config) Limits() (sessions, perOwner int) {
	d := c.withDefaults()
	return d.MaxSessions, d.MaxPerOwner
}

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	d := c.withDefaults()
	if _, err := d.exposure(d.DefaultExposure); err != nil {
		return err
	}
	return nil
}

func (c Config) exposure(e Exposure) ([]string, error) {
	switch e {
	case ExposeZero:
		return nil, nil
	case ExposeMetaOnly:
		return []string{c.MetaCategory}, nil
	case ExposeMinimal:
		return c.MinimalCategories, nil
	case ExposeAll:
		return c.AllCategories, nil
	}
	return nil, fmt.Errorf("%w (got %q)", ErrBadExposure, clipArg(string(e)))
}

// CheckMode reports ErrBadMode unless mode is "" (additive), additive or
// replacement: the modes Update accepts. Callers that do work before
// Update (AnalyzePrompt) check first.
func CheckMode(mode string) error {
	switch mode {
	case "", ModeAdditive, ModeReplacement:
		return nil
	}
	return fmt.Errorf("%w (got %q)", ErrBadMode, clipArg(mode))
}

// Change is one change of a session's exposure.
type Change struct {
	Time      time.Time
	Operation string // "create", "additive" or "replacement"
	Added     []string
	Removed   []string
	Total     int
}

// Snapshot is a copy of a session's state.
type Snapshot struct {
	ID           string
	Owner        string   // the identity that created the session ("" for none)
	Exposed      []string // sorted
	History      []Change
	Created      time.Time
	LastActivity time.Time
}

// Event is one change delivered to watchers.
type Event struct {
	SessionID string
	Change    Change
	Exposed   []string
}

type watcher struct {
	ch   chan Event
	done chan struct{}
}

type sess struct {
	id       string
	owner    Owner
	exposed  map[string]bool
	history  []Change
	created  time.Time
	last     time.Time
	watchers map[*watcher]bool
	all      *list.Element        // in Store.lru
	own      *busiest.Item[*sess] // in Store.owners
}

// Store holds sessions. It is safe for concurrent use.
type Store struct {
	cfg Config
	mu  sync.Mutex
	m   map[string]*sess
	lru *list.List // every session, least recently used first
	// owners holds the sessions by Owner.Quota, each quota's in order of
	// use: the busiest quota's least recently used session is found
	// without a walk of the sessions or the quotas.
	owners *busiest.Owners[*sess]
	closed bool
}

// Owner is who creates a session: ID may use it later, and Quota is the
// key its share of sessions is counted under (the identity itself, or the
// peer address when every client shares one anonymous identity).
type Owner struct {
	ID    string
	Quota string
}

// NewStore returns an empty store.
func NewStore(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg.withDefaults(), m: map[string]*sess{}, lru: list.New(),
		owners: busiest.New[*sess]()}, nil
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// NewID is a random session id (128 bits, in hex).
func NewID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session: random id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// CheckID reports whether id is a usable session id (ErrBadID if not).
func CheckID(id string) error {
	if !idRE.MatchString(id) {
		return ErrBadID
	}
	return nil
}

// ScopedID is the id under which a store keeps the session an owner
// (Owner.ID) calls id: session ids are per owner, so an id says nothing
// about another owner's sessions. The hub API keys its sessions so: a
// caller who creates a session with an id another caller uses gets a
// session of its own, and one who asks for another's session by its id
// finds none (NOT_FOUND), exactly as for an id no one uses; it can
// neither probe which ids exist nor take an id from their owner. It is a
// hash (a valid id of fixed length), so the owner's name and the id
// reach the store only as such.
func ScopedID(owner, id string) string {
	h := sha256.Sum256([]byte(owner + "\x00" + id))
	return "o" + hex.EncodeToString(h[:16])
}

// maxEchoBytes bounds how much of a bad argument an error message repeats.
const maxEchoBytes = 64

func clipArg(s string) string { return clip.String(s, maxEchoBytes) }

// prepareCreate checks a Create's arguments the same way for every store:
// an empty id gets a random one, an empty exposure the configured default.
// It returns the id and the categories the session starts with.
func (c Config) prepareCreate(id string, exposure Exposure) (string, []string, error) {
	if id == "" {
		var err error
		if id, err = NewID(); err != nil {
			return "", nil, err
		}
	}
	if err := CheckID(id); err != nil {
		return "", nil, err
	}
	if exposure == "" {
		exposure = c.DefaultExposure
	}
	cats, err := c.exposure(exposure)
	if err != nil {
		return "", nil, err
	}
	return id, cats, nil
}

// createChange is the first history entry of a session starting with cats.
func createChange(now time.Time, cats []string) (Change, []string) {
	exposed := sortedKeys(setOf(cats))
	return Change{Time: now, Operation: "create", Added: exposed, Total: len(exposed)}, exposed
}

// prepareUpdate checks an Update's arguments the same way for every
// store and returns the operation ("additive" for an empty mode).
func (c Config) prepareUpdate(categories []string, mode string) (string, error) {
	if err := CheckMode(mode); err != nil {
		return "", err
	}
	op := mode
	if op == "" {
		op = ModeAdditive
	}
	for _, cat := range categories {
		if !slices.Contains(c.AllCategories, cat) {
			return "", fmt.Errorf("%w %q", ErrUnknownCategory, clipArg(cat))
		}
	}
	return op, nil
}

// applyUpdate computes what op with categories does to a session exposing
// exposed: the change (Time and Total set, Added and Removed sorted) and
// the new exposed set, sorted. changed is false for a no-op.
func applyUpdate(now time.Time, exposed, categories []string, op string) (ch Change, after []string, changed bool) {
	have := setOf(exposed)
	want := map[string]bool{}
	if op == ModeAdditive {
		maps.Copy(want, have)
	}
	for _, c := range categories {
		want[c] = true
	}
	for k := range want {
		if !have[k] {
			ch.Added = append(ch.Added, k)
		}
	}
	for k := range have {
		if !want[k] {
			ch.Removed = append(ch.Removed, k)
		}
	}
	sort.Strings(ch.Added)
	sort.Strings(ch.Removed)
	if len(ch.Added) == 0 && len(ch.Removed) == 0 {
		return Change{Time: now, Operation: op, Total: len(have)}, sortedKeys(have), false
	}
	ch.Time, ch.Operation, ch.Total = now, op, len(want)
	return ch, sortedKeys(want), true
}

// appendHistory appends ch and keeps the newest limit entries.
func appendHistory(h []Change, ch Change, limit int) []Change {
	h = append(h, ch)
	if over := len(h) - limit; over > 0 {
		h = slices.Delete(h, 0, over)
	}
	return h
}

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Create starts a session owned by nobody. An empty id gets a random one;
// an empty exposure gets the configured default.
func (s *Store) Create(ctx context.Context, id string, exposure Exposure) (Snapshot, error) {
	return s.CreateFor(ctx, Owner{}, id, exposure)
}

// CreateFor is Create for an owner, who may hold at most
// Config.MaxPerOwner sessions (ErrOwnerLimit past it).
//
// When Config.MaxSessions are held, an owner holding fewer sessions than
// the busiest owner (the Owner.Quota holding the most; of several as busy,
// the one whose least recently used session is the oldest) takes the place
// of that owner's least recently used session, which is closed as if it
// had expired: its watchers are closed and its next use is ErrNotFound.
// The busiest owner itself, or one as busy, gets ErrLimit. So owners that
// filled the store between them cannot refuse a quiet owner a session
// until their sessions expire, and the total stays bounded. A create
// costs O(log owners) whatever the number of sessions held.
func (s *Store) CreateFor(_ context.Context, owner Owner, id string, exposure Exposure) (Snapshot, error) {
	id, cats, err := s.cfg.prepareCreate(id, exposure)
	if err != nil {
		return Snapshot{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Snapshot{}, ErrClosed
	}
	if _, ok := s.m[id]; ok {
		return Snapshot{}, ErrExists
	}
	if len(s.m) >= s.cfg.MaxSessions || s.heldLocked(owner.Quota) >= s.cfg.MaxPerOwner {
		s.sweepLocked()
	}
	if len(s.m) >= s.cfg.MaxSessions {
		// The busiest holds at most MaxPerOwner, so a caller holding fewer
		// is below its own limit too.
		victim := s.owners.Victim(owner.Quota)
		if victim == nil {
			return Snapshot{}, fmt.Errorf("%w (limit %d)", ErrLimit, s.cfg.MaxSessions)
		}
		s.removeLocked(victim.Value)
		if s.cfg.Displaced != nil {
			s.cfg.Displaced()
		}
	}
	if s.heldLocked(owner.Quota) >= s.cfg.MaxPerOwner {
		return Snapshot{}, fmt.Errorf("%w (limit %d)", ErrOwnerLimit, s.cfg.MaxPerOwner)
	}
	now := s.cfg.Now()
	ch, exposed := createChange(now, cats)
	ss := &sess{id: id, owner: owner, exposed: setOf(exposed), created: now, last: now, watchers: map[*watcher]bool{}}
	ss.history = append(ss.history, ch)
	s.m[id] = ss
	s.addLocked(ss)
	return ss.snapshot(), nil
}

// heldLocked is the number of sessions quota q holds; callers hold mu.
func (s *Store) heldLocked(q string) int { return s.owners.Held(q) }

// addLocked enters a new session in the recency list and its quota's.
func (s *Store) addLocked(ss *sess) {
	ss.all = s.lru.PushBack(ss)
	ss.own = s.owners.Add(ss.owner.Quota, ss, ss.last)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (ss *sess) snapshot() Snapshot {
	return Snapshot{ID: ss.id, Owner: ss.owner.ID, Exposed: sortedKeys(ss.exposed), History: slices.Clone(ss.history), Created: ss.created, LastActivity: ss.last}
}

// get returns a live session and touches it; callers hold mu.
func (s *Store) get(id string) (*sess, error) {
	if s.closed {
		return nil, ErrClosed
	}
	ss, ok := s.m[id]
	if !ok {
		return nil, ErrNotFound
	}
	now := s.cfg.Now()
	if now.Sub(ss.last) > s.cfg.TTL {
		s.removeLocked(ss)
		return nil, ErrNotFound
	}
	ss.last = now
	s.lru.MoveToBack(ss.all)
	s.owners.Touch(ss.own, now)
	return ss, nil
}

// Get returns a session's state and marks it active.
func (s *Store) Get(_ context.Context, id string) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.get(id)
	if err != nil {
		return Snapshot{}, err
	}
	return ss.snapshot(), nil
}

// Owner returns the ID of the session's owner without marking it active.
func (s *Store) Owner(_ context.Context, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	ss, ok := s.m[id]
	if !ok || s.cfg.Now().Sub(ss.last) > s.cfg.TTL {
		return "", ErrNotFound
	}
	return ss.owner.ID, nil
}

// Exposed returns a session's exposed categories, sorted.
func (s *Store) Exposed(_ context.Context, id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.get(id)
	if err != nil {
		return nil, err
	}
	return sortedKeys(ss.exposed), nil
}

// Delete ends a session and closes its watchers.
func (s *Store) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.get(id)
	if err != nil {
		return err
	}
	s.removeLocked(ss)
	return nil
}

func (s *Store) removeLocked(ss *sess) {
	for w := range ss.watchers {
		closeWatcher(w)
	}
	ss.watchers = nil
	delete(s.m, ss.id)
	s.lru.Remove(ss.all)
	s.owners.Remove(ss.own)
}

func closeWatcher(w *watcher) {
	select {
	case <-w.done:
	default:
		close(w.done)
		close(w.ch)
	}
}

// Update adds categories (mode "" or additive; Added lists only the new
// ones) or replaces the set (replacement). changed is false for a no-op,
// which records no history and notifies no watcher.
func (s *Store) Update(_ context.Context, id string, categories []string, mode string) (Change, Snapshot, bool, error) {
	op, err := s.cfg.prepareUpdate(categories, mode)
	if err != nil {
		return Change{}, Snapshot{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.get(id)
	if err != nil {
		return Change{}, Snapshot{}, false, err
	}
	ch, after, changed := applyUpdate(s.cfg.Now(), sortedKeys(ss.exposed), categories, op)
	if !changed {
		return ch, ss.snapshot(), false, nil
	}
	ss.exposed = setOf(after)
	ss.history = appendHistory(ss.history, ch, s.cfg.HistoryLimit)
	ev := Event{SessionID: ss.id, Change: ch, Exposed: sortedKeys(ss.exposed)}
	for w := range ss.watchers {
		select {
		case w.ch <- ev:
		default:
			// A watcher that cannot keep up is dropped rather than
			// allowed to block updates; it sees its channel close.
			closeWatcher(w)
			delete(ss.watchers, w)
		}
	}
	return ch, ss.snapshot(), true, nil
}

// Watch returns a channel with one event per actual change of the
// session's exposure. It is closed when ctx ends, the session is deleted or
// expires, the store closes, or the watcher falls WatchBuffer events behind.
func (s *Store) Watch(ctx context.Context, id string) (<-chan Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.get(id)
	if err != nil {
		return nil, err
	}
	w := &watcher{ch: make(chan Event, s.cfg.WatchBuffer), done: make(chan struct{})}
	ss.watchers[w] = true
	// No goroutine waits for ctx: a watch costs its caller's goroutine
	// only.
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		if ss.watchers != nil {
			delete(ss.watchers, w)
		}
		closeWatcher(w)
		s.mu.Unlock()
	})
	return w.ch, nil
}

// Len is the number of sessions held (including idle ones not yet swept).
func (s *Store) Len(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m), nil
}

// Sweep removes sessions idle longer than the TTL and returns how many.
func (s *Store) Sweep() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sweepLocked()
}

// sweepLocked removes the expired sessions, which are the least recently
// used: it walks only them.
func (s *Store) sweepLocked() int {
	now := s.cfg.Now()
	n := 0
	for e := s.lru.Front(); e != nil; e = s.lru.Front() {
		ss := e.Value.(*sess)
		if now.Sub(ss.last) <= s.cfg.TTL {
			break
		}
		s.removeLocked(ss)
		n++
	}
	return n
}

// Run sweeps idle sessions every TTL/4 (clamped to 1s..1m) until ctx ends.
func (s *Store) Run(ctx context.Context) {
	sweep.Every(ctx, sweep.Interval(s.cfg.TTL), func(context.Context) error {
		s.Sweep()
		return nil
	}, nil)
}

// Close ends every session and closes all watchers.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.m {
		s.removeLocked(ss)
	}
	s.closed = true
	return nil
}
