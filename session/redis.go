package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/internal/sweep"
)

// ErrUnavailable reports that shared session state (Redis) could not be
// reached or answered with an error; the call may succeed when retried.
var ErrUnavailable = errors.New("session: state store unavailable")

// DefaultRedisPrefix starts every key and channel name RedisStore uses.
const DefaultRedisPrefix = "classifierd:"

// RedisStore keeps sessions in Redis, so that every daemon pointed at the
// same Redis serves the same sessions: one replica creates a session, any
// other reads and changes it, and a Watch on any replica sees each change
// made anywhere exactly once, in order.
//
// Layout under the prefix P:
//
//	P s:<id>   hash: rec (JSON: owner, exposed, created), last (unix ns
//	           of the last activity), seq (changes so far)
//	P h:<id>   list: the history, one JSON change each, the newest
//	           HistoryLimit; both keys expire TTL after the last activity
//	           (PEXPIRE)
//	P live     sorted set: id -> expiry (unix ms), the global session count
//	P q:<quota> sorted set: id -> expiry, the sessions one Owner.Quota holds
//	           (the hash's quota field names it)
//	P owners   sorted set: P q:<quota> -> the sessions it holds, kept by
//	           every write and corrected (expired sessions taken out) where
//	           it is read, so that Create finds the busiest quota without a
//	           walk of every session
//	P events   pub/sub channel: one JSON message per change or deletion
//
// Each write is one Lua script, so it is atomic across daemons: Create
// checks the global MaxSessions and the id together, and at MaxSessions
// closes the busiest quota's least recently used session in the same step
// (Store.CreateFor says when); Update
// compares-and-sets on seq (retrying on a concurrent change) and publishes
// its event in the same step, so events leave Redis in seq order. A
// watcher that misses a seq (its daemon lost the subscription) is closed,
// never handed a gap: the client watches again.
//
// RedisStore is safe for concurrent use. It does not own the client.
type RedisStore struct {
	cfg    Config
	rdb    *redis.Client
	prefix string
	ps     *redis.PubSub

	mu         sync.Mutex
	watchers   map[string]map[*redisWatcher]bool // by session id
	subscribed bool                              // the events subscription is live
	closed     bool

	stop     context.CancelFunc
	received chan struct{} // closed when the receive loop has returned
}

type redisWatcher struct {
	ch   chan Event
	done chan struct{}
	seq  uint64 // last seq delivered (or read when the watch began)
}

// record is a session's JSON form in Redis. Owner is the identity that
// created the session ("" when the daemon does not authenticate).
type record struct {
	Owner   string    `json:"owner,omitempty"`
	Exposed []string  `json:"exposed"`
	Created time.Time `json:"created"`
	History []Change  `json:"-"` // in its own list (P h:<id>)
}

// message is one pub/sub message on the events channel.
type message struct {
	ID      string   `json:"id"`
	Seq     uint64   `json:"seq,omitempty"`
	Deleted bool     `json:"deleted,omitempty"`
	Change  Change   `json:"change"`
	Exposed []string `json:"exposed"`
}

// NewRedisStore returns a store on rdb, whose keys start with prefix
// (DefaultRedisPrefix when empty). It subscribes to the change feed before
// returning, so it fails fast when Redis cannot be reached. Close stops
// it; the caller closes rdb afterwards.
func NewRedisStore(ctx context.Context, rdb *redis.Client, prefix string, cfg Config) (*RedisStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	s := &RedisStore{cfg: cfg.withDefaults(), rdb: rdb, prefix: prefix, watchers: map[string]map[*redisWatcher]bool{},
		received: make(chan struct{})}
	s.ps = rdb.Subscribe(ctx)
	if err := s.ps.Subscribe(ctx, s.channel()); err != nil {
		return nil, errors.Join(unavailable(err), s.ps.Close())
	}
	// The first reply confirms the subscription: from here on no event is
	// published that this store does not receive.
	if _, err := s.ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		return nil, errors.Join(unavailable(err), s.ps.Close())
	}
	s.subscribed = true
	loopCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.receive(loopCtx)
	return s, nil
}

func (s *RedisStore) key(id string) string  { return s.prefix + "s:" + id }
func (s *RedisStore) hist(id string) string { return s.prefix + "h:" + id }

// keys are the KEYS of every per-session script: record, live set, history.
func (s *RedisStore) keys(id string) []string { return []string{s.key(id), s.live(), s.hist(id)} }
func (s *RedisStore) live() string            { return s.prefix + "live" }
func (s *RedisStore) owners() string          { return s.prefix + "owners" }
func (s *RedisStore) channel() string         { return s.prefix + "events" }

// unavailable wraps a Redis or network error as ErrUnavailable; context
// errors stay what they are, so a cancelled call reads as cancelled.
func unavailable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (s *RedisStore) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// pruneLua defines prune(owners, q, now): it takes q's expired sessions
// out, files q in owners under the number left (or takes it out when
// none is) and returns that number.
const pruneLua = `
local function prune(owners, q, now)
  redis.call('ZREMRANGEBYSCORE', q, '-inf', now)
  local c = redis.call('ZCARD', q)
  if c == 0 then redis.call('ZREM', owners, q) else redis.call('ZADD', owners, c, q) end
  return c
end
`

// maxTiedOwners bounds how many quotas, tied as the busiest, a Create at
// MaxSessions compares for the oldest least recently used session, and
// maxOwnerRounds how often it looks again after finding counts that
// included expired sessions: the work of one Create stays bounded.
const (
	maxTiedOwners  = 64
	maxOwnerRounds = 16
)

// createScript: KEYS record, live, history, quota, owners; ARGV rec, last
// (ns), TTL (ms), now (ms), MaxSessions, id, history entry, MaxPerOwner,
// key prefix, events channel. It answers 0 (made), 1 (made in the place
// of the busiest quota's least recently used session, now closed), -1
// (the id exists), -2 (MaxSessions), -3 (MaxPerOwner).
var createScript = redis.NewScript(pruneLua + `
local now = ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local mine = prune(KEYS[5], KEYS[4], now)
local displaced = 0
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  local victim, vq, vscore, settled
  for round = 1, ` + strconv.Itoa(maxOwnerRounds) + ` do
    local top = redis.call('ZREVRANGE', KEYS[5], 0, 0, 'WITHSCORES')
    if #top == 0 then break end
    local most = tonumber(top[2])
    local stale = false
    victim = nil
    for _, q in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], most, most, 'LIMIT', 0, ` + strconv.Itoa(maxTiedOwners) + `)) do
      if prune(KEYS[5], q, now) ~= most then
        stale = true
      else
        local f = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
        if victim == nil or tonumber(f[2]) < vscore then victim, vq, vscore = f[1], q, tonumber(f[2]) end
      end
    end
    if not stale then
      if mine >= most then return -2 end
      settled = true
      break
    end
  end
  if not settled or victim == nil then return -2 end
  if mine >= tonumber(ARGV[8]) then return -3 end
  redis.call('ZREM', vq, victim)
  prune(KEYS[5], vq, now)
  redis.call('ZREM', KEYS[2], victim)
  local n = redis.call('DEL', ARGV[9] .. 's:' .. victim)
  redis.call('DEL', ARGV[9] .. 'h:' .. victim)
  if n == 1 then redis.call('PUBLISH', ARGV[10], cjson.encode({id = victim, deleted = true})) end
  displaced = 1
end
if mine >= tonumber(ARGV[8]) then return -3 end
redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'last', ARGV[2], 'seq', 0, 'quota', KEYS[4])
redis.call('ZADD', KEYS[4], tonumber(ARGV[4]) + tonumber(ARGV[3]), ARGV[6])
redis.call('PEXPIRE', KEYS[4], ARGV[3])
redis.call('ZADD', KEYS[5], mine + 1, KEYS[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('DEL', KEYS[3])
redis.call('RPUSH', KEYS[3], ARGV[7])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[3]), ARGV[6])
return displaced`)

// Create starts a session owned by nobody, like Store.Create;
// MaxSessions counts the sessions of every daemon sharing the Redis.
func (s *RedisStore) Create(ctx context.Context, id string, exposure Exposure) (Snapshot, error) {
	return s.CreateFor(ctx, Owner{}, id, exposure)
}

// quota is the key of the sorted set counting one Owner.Quota's sessions.
func (s *RedisStore) quota(q string) string { return s.prefix + "q:" + q }

// CreateFor is Create for an owner, who may hold at most
// Config.MaxPerOwner sessions across every daemon (ErrOwnerLimit past it).
// At MaxSessions an owner holding fewer sessions than the busiest takes
// the place of the busiest's least recently used session, as
// Store.CreateFor does, in the same atomic step; every daemon closes the
// closed session's watchers.
func (s *RedisStore) CreateFor(ctx context.Context, owner Owner, id string, exposure Exposure) (Snapshot, error) {
	id, cats, err := s.cfg.prepareCreate(id, exposure)
	if err != nil {
		return Snapshot{}, err
	}
	if err := s.checkOpen(); err != nil {
		return Snapshot{}, err
	}
	now := s.cfg.Now()
	ch, exposed := createChange(now, cats)
	rec := record{Owner: owner.ID, Exposed: exposed, History: []Change{ch}, Created: now}
	b, err := json.Marshal(rec)
	if err != nil {
		return Snapshot{}, fmt.Errorf("session: encode: %w", err)
	}
	hb, err := json.Marshal(ch)
	if err != nil {
		return Snapshot{}, fmt.Errorf("session: encode: %w", err)
	}
	n, err := createScript.Run(ctx, s.rdb, append(s.keys(id), s.quota(owner.Quota), s.owners()),
		b, now.UnixNano(), s.cfg.TTL.Milliseconds(), now.UnixMilli(), s.cfg.MaxSessions, id, hb, s.cfg.MaxPerOwner,
		s.prefix, s.channel()).Int()
	switch {
	case err != nil:
		return Snapshot{}, unavailable(err)
	case n == -1:
		return Snapshot{}, ErrExists
	case n == -2:
		return Snapshot{}, fmt.Errorf("%w (limit %d)", ErrLimit, s.cfg.MaxSessions)
	case n == -3:
		return Snapshot{}, fmt.Errorf("%w (limit %d)", ErrOwnerLimit, s.cfg.MaxPerOwner)
	case n == 1 && s.cfg.Displaced != nil:
		s.cfg.Displaced()
	}
	return rec.snapshot(id, now), nil
}

func (r record) snapshot(id string, last time.Time) Snapshot {
	return Snapshot{ID: id, Owner: r.Owner, Exposed: r.Exposed, History: r.History, Created: r.Created, LastActivity: last}
}

var touchScript = redis.NewScript(pruneLua + `
local v = redis.call('HMGET', KEYS[1], 'rec', 'seq')
if not v[1] then return false end
redis.call('HSET', KEYS[1], 'last', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[4])
local q = redis.call('HGET', KEYS[1], 'quota')
if q then
  redis.call('ZADD', q, tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[4])
  redis.call('PEXPIRE', q, ARGV[2])
  prune(KEYS[4], q, ARGV[3])
end
if ARGV[5] == '1' then
  for _, c in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do v[#v + 1] = c end
end
return v`)

// touch reads a live session and marks it active: its record (with its
// history when asked for), its seq and the activity time it now has.
func (s *RedisStore) touch(ctx context.Context, id string, withHistory bool) (record, uint64, time.Time, error) {
	if err := s.checkOpen(); err != nil {
		return record{}, 0, time.Time{}, err
	}
	return s.read(ctx, id, withHistory)
}

// read is touch without the closed check, for callers holding s.mu.
func (s *RedisStore) read(ctx context.Context, id string, withHistory bool) (record, uint64, time.Time, error) {
	if !idRE.MatchString(id) {
		return record{}, 0, time.Time{}, ErrNotFound // no such session can exist
	}
	now := s.cfg.Now()
	flag := "0"
	if withHistory {
		flag = "1"
	}
	v, err := touchScript.Run(ctx, s.rdb, append(s.keys(id), s.owners()),
		now.UnixNano(), s.cfg.TTL.Milliseconds(), now.UnixMilli(), id, flag).StringSlice()
	if errors.Is(err, redis.Nil) {
		return record{}, 0, time.Time{}, ErrNotFound
	}
	if err != nil {
		return record{}, 0, time.Time{}, unavailable(err)
	}
	if len(v) < 2 {
		return record{}, 0, time.Time{}, fmt.Errorf("session: redis record %q has %d fields", clipArg(id), len(v))
	}
	var rec record
	if err := json.Unmarshal([]byte(v[0]), &rec); err != nil {
		return record{}, 0, time.Time{}, fmt.Errorf("session: redis record %q: %w", clipArg(id), err)
	}
	seq, err := strconv.ParseUint(v[1], 10, 64)
	if err != nil {
		return record{}, 0, time.Time{}, fmt.Errorf("session: redis record %q: seq: %w", clipArg(id), err)
	}
	if rec.History, err = decodeHistory(v[2:]); err != nil {
		return record{}, 0, time.Time{}, fmt.Errorf("session: redis history %q: %w", clipArg(id), err)
	}
	return rec, seq, now, nil
}

// decodeHistory decodes the JSON changes of a history list.
func decodeHistory(entries []string) ([]Change, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]Change, len(entries))
	for i, e := range entries {
		if err := json.Unmarshal([]byte(e), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Owner returns the ID of the session's owner without marking it active.
func (s *RedisStore) Owner(ctx context.Context, id string) (string, error) {
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	if !idRE.MatchString(id) {
		return "", ErrNotFound
	}
	v, err := s.rdb.HGet(ctx, s.key(id), "rec").Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", unavailable(err)
	}
	var rec record
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return "", fmt.Errorf("session: redis record %q: %w", clipArg(id), err)
	}
	return rec.Owner, nil
}

// Get returns a session's state and marks it active.
func (s *RedisStore) Get(ctx context.Context, id string) (Snapshot, error) {
	rec, _, now, err := s.touch(ctx, id, true)
	if err != nil {
		return Snapshot{}, err
	}
	return rec.snapshot(id, now), nil
}

// Exposed returns a session's exposed categories, sorted.
func (s *RedisStore) Exposed(ctx context.Context, id string) ([]string, error) {
	rec, _, _, err := s.touch(ctx, id, false)
	if err != nil {
		return nil, err
	}
	return rec.Exposed, nil
}

var deleteScript = redis.NewScript(pruneLua + `
local q = redis.call('HGET', KEYS[1], 'quota')
if q then
  redis.call('ZREM', q, ARGV[1])
  prune(KEYS[4], q, ARGV[4])
end
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[2], ARGV[1])
if n == 1 then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return n`)

// Delete ends a session; every daemon closes its watchers.
func (s *RedisStore) Delete(ctx context.Context, id string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if !idRE.MatchString(id) {
		return ErrNotFound
	}
	b, err := json.Marshal(message{ID: id, Deleted: true})
	if err != nil {
		return fmt.Errorf("session: encode: %w", err)
	}
	n, err := deleteScript.Run(ctx, s.rdb, append(s.keys(id), s.owners()), id, s.channel(), b, s.cfg.Now().UnixMilli()).Int()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

var updateScript = redis.NewScript(`
local seq = redis.call('HGET', KEYS[1], 'seq')
if not seq then return -1 end
if seq ~= ARGV[1] then return -2 end
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'last', ARGV[3], 'seq', tonumber(ARGV[1]) + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('RPUSH', KEYS[3], ARGV[9])
redis.call('LTRIM', KEYS[3], -tonumber(ARGV[10]), -1)
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[2], tonumber(ARGV[5]) + tonumber(ARGV[4]), ARGV[6])
redis.call('PUBLISH', ARGV[7], ARGV[8])
return redis.call('LRANGE', KEYS[3], 0, -1)`)

// maxUpdateTries bounds the compare-and-set retries of one Update when
// other daemons change the same session at the same time.
const maxUpdateTries = 32

// Update changes a session's exposure like Store.Update. The change is
// written and published in one atomic step, so every watcher on every
// daemon sees it once, in the order the changes were made.
func (s *RedisStore) Update(ctx context.Context, id string, categories []string, mode string) (Change, Snapshot, bool, error) {
	op, err := s.cfg.prepareUpdate(categories, mode)
	if err != nil {
		return Change{}, Snapshot{}, false, err
	}
	for range maxUpdateTries {
		rec, seq, now, err := s.touch(ctx, id, false)
		if err != nil {
			return Change{}, Snapshot{}, false, err
		}
		ch, after, changed := applyUpdate(now, rec.Exposed, categories, op)
		if !changed {
			// The snapshot carries the history, which only this path
			// still has to read.
			if rec, _, now, err = s.touch(ctx, id, true); err != nil {
				return Change{}, Snapshot{}, false, err
			}
			return ch, rec.snapshot(id, now), false, nil
		}
		rec.Exposed = after
		b, err := json.Marshal(rec)
		if err != nil {
			return Change{}, Snapshot{}, false, fmt.Errorf("session: encode: %w", err)
		}
		hb, err := json.Marshal(ch)
		if err != nil {
			return Change{}, Snapshot{}, false, fmt.Errorf("session: encode: %w", err)
		}
		ev, err := json.Marshal(message{ID: id, Seq: seq + 1, Change: ch, Exposed: after})
		if err != nil {
			return Change{}, Snapshot{}, false, fmt.Errorf("session: encode: %w", err)
		}
		res, err := updateScript.Run(ctx, s.rdb, s.keys(id), seq, b, now.UnixNano(),
			s.cfg.TTL.Milliseconds(), now.UnixMilli(), id, s.channel(), ev, hb, s.cfg.HistoryLimit).Result()
		if err != nil {
			return Change{}, Snapshot{}, false, unavailable(err)
		}
		switch res := res.(type) {
		case int64:
			if res == -1 {
				return Change{}, Snapshot{}, false, ErrNotFound
			}
			continue // -2: another daemon changed the session first; start over
		case []any:
			entries := make([]string, len(res))
			for i, e := range res {
				entries[i], _ = e.(string)
			}
			if rec.History, err = decodeHistory(entries); err != nil {
				return Change{}, Snapshot{}, false, fmt.Errorf("session: redis history %q: %w", clipArg(id), err)
			}
			return ch, rec.snapshot(id, now), true, nil
		}
		return Change{}, Snapshot{}, false, fmt.Errorf("session: update script answered %T", res)
	}
	return Change{}, Snapshot{}, false, fmt.Errorf("%w: session %q changed concurrently %d times", ErrUnavailable, clipArg(id), maxUpdateTries)
}

// Watch returns a channel with one event per change of the session's
// exposure made by any daemon sharing the Redis. It is closed when ctx
// ends, the session is deleted (anywhere) or found expired, the store
// closes, the watcher falls WatchBuffer events behind, or this daemon's
// subscription to Redis broke (events may have been missed): the client
// then watches again.
func (s *RedisStore) Watch(ctx context.Context, id string) (<-chan Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if !s.subscribed {
		return nil, fmt.Errorf("%w: not subscribed to session changes", ErrUnavailable)
	}
	// s.mu stays held while reading seq, so the receive loop cannot deliver
	// an event of this session before the watcher knows where it starts.
	_, seq, _, err := s.read(ctx, id, false)
	if err != nil {
		return nil, err
	}
	w := &redisWatcher{ch: make(chan Event, s.cfg.WatchBuffer), done: make(chan struct{}), seq: seq}
	if s.watchers[id] == nil {
		s.watchers[id] = map[*redisWatcher]bool{}
	}
	s.watchers[id][w] = true
	// No goroutine waits for ctx: a watch costs its caller's goroutine
	// only.
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.dropLocked(id, w)
		s.mu.Unlock()
	})
	return w.ch, nil
}

// dropLocked closes one watcher and forgets it; callers hold s.mu.
func (s *RedisStore) dropLocked(id string, w *redisWatcher) {
	select {
	case <-w.done:
	default:
		close(w.done)
		close(w.ch)
	}
	if ws := s.watchers[id]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(s.watchers, id)
		}
	}
}

// dropAllLocked closes every watcher (of one session when id is set).
func (s *RedisStore) dropAllLocked(id string) {
	for wid, ws := range s.watchers {
		if id != "" && wid != id {
			continue
		}
		for w := range ws {
			s.dropLocked(wid, w)
		}
	}
}

// pingEvery is how long the receive loop waits for a message before it
// pings; a subscription whose ping goes unanswered for as long again is
// taken for dead, so a silent failure is noticed within about 2*pingEvery.
const pingEvery = 2 * time.Second

// receive reads the change feed until ctx ends and hands each event to
// this daemon's watchers of its session. When the subscription breaks it
// closes every watcher (events may be lost while it is down); go-redis
// resubscribes on the next receive, and Watch answers ErrUnavailable until
// a message (the subscription's confirmation, at least) shows it is back.
func (s *RedisStore) receive(ctx context.Context) {
	defer close(s.received)
	pinged := false // a ping is out and nothing came back since
	for ctx.Err() == nil {
		m, err := s.ps.ReceiveTimeout(ctx, pingEvery)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// Quiet for pingEvery: ping, and if the next pingEvery is
			// quiet too (no pong), the connection is dead.
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() && !pinged {
				if err = s.ps.Ping(ctx); err == nil {
					pinged = true
					continue
				}
			}
			pinged = false
			s.mu.Lock()
			s.subscribed = false
			s.dropAllLocked("")
			s.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(pingEvery / 4):
			}
			continue
		}
		// Anything received shows the subscription is live again. The
		// watchers from before a failure were closed when it was seen;
		// a change lost in a failure this loop did not see shows up as a
		// seq gap, which closes the watchers it concerns.
		pinged = false
		s.mu.Lock()
		s.subscribed = !s.closed
		s.mu.Unlock()
		if m, ok := m.(*redis.Message); ok {
			s.deliver(m.Payload)
		}
	}
}

// deliver hands one feed message to the watchers of its session.
func (s *RedisStore) deliver(payload string) {
	var m message
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		return // not ours to understand; nothing a watcher can use
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Deleted {
		s.dropAllLocked(m.ID)
		return
	}
	ev := Event{SessionID: m.ID, Change: m.Change, Exposed: m.Exposed}
	for w := range s.watchers[m.ID] {
		switch {
		case m.Seq <= w.seq:
			// Already part of the state the watch began from.
		case m.Seq != w.seq+1:
			s.dropLocked(m.ID, w) // a change went missing: never a gap
		default:
			select {
			case w.ch <- ev:
				w.seq = m.Seq
			default:
				// Too slow: dropped rather than allowed to block the feed.
				s.dropLocked(m.ID, w)
			}
		}
	}
}

// Len is the number of live sessions across every daemon sharing the Redis.
func (s *RedisStore) Len(ctx context.Context) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	n, err := s.rdb.ZCount(ctx, s.live(), "("+strconv.FormatInt(s.cfg.Now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, unavailable(err)
	}
	return int(n), nil
}

// sweepOwnersScript corrects every quota's count in P owners (KEYS[1]) at
// now (ARGV[1]): the writes keep the counts of the quotas they touch, and
// this forgets the quotas whose sessions all expired unseen.
var sweepOwnersScript = redis.NewScript(pruneLua + `
for _, q in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do prune(KEYS[1], q, ARGV[1]) end
return 0`)

// Sweep forgets expired sessions in the global count (Redis itself
// expires their records) and closes this daemon's watchers of sessions
// that expired. It returns how many watched sessions ended.
func (s *RedisStore) Sweep(ctx context.Context) (int, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	now := strconv.FormatInt(s.cfg.Now().UnixMilli(), 10)
	if err := s.rdb.ZRemRangeByScore(ctx, s.live(), "-inf", now).Err(); err != nil {
		return 0, unavailable(err)
	}
	if err := sweepOwnersScript.Run(ctx, s.rdb, []string{s.owners()}, now).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return 0, unavailable(err)
	}
	s.mu.Lock()
	ids := make([]string, 0, len(s.watchers))
	for id := range s.watchers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return 0, nil
	}
	// One round trip for every watched session.
	exists := make([]*redis.IntCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			exists[i] = p.Exists(ctx, s.key(id))
		}
		return nil
	}); err != nil {
		return 0, unavailable(err)
	}
	ended := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, id := range ids {
		if exists[i].Val() == 0 {
			s.dropAllLocked(id)
			ended++
		}
	}
	return ended, nil
}

// Run sweeps every TTL/4 (clamped to 1s..1m) until ctx ends; a sweep that
// cannot reach Redis is tried again at the next tick.
func (s *RedisStore) Run(ctx context.Context) {
	sweep.Every(ctx, sweep.Interval(s.cfg.TTL), func(ctx context.Context) error {
		_, err := s.Sweep(ctx)
		return err
	}, nil)
}

// Close stops the change feed and closes this daemon's watchers; the
// sessions stay in Redis for the other daemons. It does not close the
// Redis client.
func (s *RedisStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.subscribed = false
	s.dropAllLocked("")
	s.mu.Unlock()
	s.stop()
	err := s.ps.Close()
	<-s.received
	return err
}
