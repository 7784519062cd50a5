package terminal

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/classifierd/classifierd/internal/sweep"
)

// ErrUnavailable reports that the shared terminal store (Redis) could not
// be reached or answered with an error; the call may succeed when retried.
var ErrUnavailable = errors.New("terminal: store unavailable")

// DefaultRedisPrefix starts every key RedisStore uses.
const DefaultRedisPrefix = "classifierd:"

// RedisStore keeps answered prompts in Redis, so that every daemon pointed
// at one Redis records into and learns from the same events. It applies
// the same rules as Store (storeCore): secrets are redacted before they
// are stored (prepare), learned answers are counted from the retained events
// (so retention and deletion forget what a session taught), and the same
// retention bounds hold (per session, per owner and overall on every
// insert, the overall bound taking from the owner holding the most; age
// every pruneEvery inserts and on Run's ticks).
//
// Layout under the prefix P (standalone Redis: the scripts name keys
// they derive from event fields):
//
//	P t:e:<id>                 hash: one event (a secret answer: input [REDACTED], ilen, imac)
//	P t:s:<session>            sorted set: the session's event ids by time (µs)
//	P t:all                    sorted set: every event id by time (µs)
//	P t:o:<owner>              sorted set: the event ids of one owner's sessions by time (µs)
//	P t:o:                     sorted set: the event ids of the sessions of no owner by time (µs)
//	P t:oc                     sorted set: owner ("u<hex>", "" for no owner) -> how many events it holds
//	P t:layout                 string: "2" once every event is in its owner's set and counted (Index)
//	P t:lp:<sha1(pattern)>     hash: answer -> successes, every session of no owner
//	P t:lp:<sha1(pattern)>:<owner>  hash: answer -> successes, every session of one owner (u<hex>)
//	P t:ls:<sha1(pattern)>:<session>  hash: answer -> successes in one session
//	P t:rules                  string: the secret rules the events follow (Scrub)
//
// It does not own the client.
type RedisStore struct {
	*storeCore
	rdb    *redis.Client
	prefix string
}

// NewRedisStore returns a store on rdb whose keys start with prefix
// (DefaultRedisPrefix when empty). The key of the hashes kept of secret
// answers is read from (or made in) cfg.KeyFile, a local file: it never
// goes to Redis, so the hashes there cannot be tried against guesses.
func NewRedisStore(rdb *redis.Client, prefix string, cfg StoreConfig) (*RedisStore, error) {
	core, err := newStoreCore(cfg)
	if err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &RedisStore{storeCore: core, rdb: rdb, prefix: prefix}, nil
}

// Close does nothing: the caller closes the client.
func (s *RedisStore) Close() error { return nil }

// unavailable wraps a Redis or network error as ErrUnavailable; context
// errors stay what they are.
func unavailable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// luaUnlearn takes one event's answer out of the learned counts, given
// the event's fields session, pattern, input and learned (as HMGET reads
// them); an answer that never counted ('learned' not '1') is left alone.
const luaUnlearn = `
local function owner(sess)
  return string.match(sess, '^(u[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])%.')
end
local function lpkey(P, h, sess)
  local o = owner(sess)
  if o then return P .. 't:lp:' .. h .. ':' .. o end
  return P .. 't:lp:' .. h
end
local function unlearn(P, f)
  if f[4] ~= '1' then return end
  local h = redis.sha1hex(f[2])
  for _, lk in ipairs({lpkey(P, h, f[1]), P .. 't:ls:' .. h .. ':' .. f[1]}) do
    if redis.call('HINCRBY', lk, f[3], -1) <= 0 then redis.call('HDEL', lk, f[3]) end
  end
end
`

// luaRemove deletes one event and takes its answer out of the learned
// counts; it returns 1 (0 for an id already gone, which it still takes
// out of the overall set so that pruning always progresses). count sets
// an owner's count in t:oc to what its set holds, so that a count never
// drifts from the events, whoever adds or removes them.
const luaRemove = luaUnlearn + `
local function count(P, o)
  local n = redis.call('ZCARD', P .. 't:o:' .. o)
  if n > 0 then redis.call('ZADD', P .. 't:oc', n, o) else redis.call('ZREM', P .. 't:oc', o) end
end
local function remove(P, id)
  local k = P .. 't:e:' .. id
  local f = redis.call('HMGET', k, 'session', 'pattern', 'input', 'learned')
  redis.call('ZREM', P .. 't:all', id)
  if not f[1] then return 0 end
  redis.call('DEL', k)
  redis.call('ZREM', P .. 't:s:' .. f[1], id)
  local o = owner(f[1]) or ''
  redis.call('ZREM', P .. 't:o:' .. o, id)
  count(P, o)
  unlearn(P, f)
  return 1
end
-- trim removes up to limit events while the store holds more than max:
-- each time the oldest of the owner holding the most (of those holding as
-- many, the greatest key). An owner whose set is empty (counted before
-- Index finished) falls back to the oldest of all. It returns how many
-- it removed, and stale ids dropped (at most limit of each).
local function trim(P, max, limit)
  local n, stale = 0, 0
  local over = math.min(redis.call('ZCARD', P .. 't:all') - max, limit)
  while n < over and stale < limit do
    local id
    local top = redis.call('ZREVRANGE', P .. 't:oc', 0, 0)
    if top[1] then id = redis.call('ZRANGE', P .. 't:o:' .. top[1], 0, 0)[1] end
    if id then
      -- An id whose event is gone (removed by an older version, which
      -- kept no set for the sessions of no owner) leaves the set too.
      if remove(P, id) == 0 then
        redis.call('ZREM', P .. 't:o:' .. top[1], id)
        count(P, top[1])
        stale = stale + 1
      else
        n = n + 1
      end
    else
      if top[1] then count(P, top[1]) end
      id = redis.call('ZRANGE', P .. 't:all', 0, 0)[1]
      if not id then break end
      remove(P, id)
      n = n + 1
    end
  end
  return n + stale
end
`

var recordScript = redis.NewScript(luaRemove + `
local P, id, sess = ARGV[1], ARGV[2], ARGV[3]
redis.call('HSET', P .. 't:e:' .. id, 'session', sess, 'prompt', ARGV[4], 'input', ARGV[5], 'success', ARGV[6],
  'source', ARGV[7], 'rt', ARGV[8], 'created', ARGV[9], 'type', ARGV[10], 'pattern', ARGV[11], 'learned', ARGV[12],
  'ilen', ARGV[15], 'imac', ARGV[16], 'rules', ARGV[18] or '0')
redis.call('ZADD', P .. 't:s:' .. sess, ARGV[13], id)
redis.call('ZADD', P .. 't:all', ARGV[13], id)
if ARGV[12] == '1' then
  local h = redis.sha1hex(ARGV[11])
  redis.call('HINCRBY', lpkey(P, h, sess), ARGV[5], 1)
  redis.call('HINCRBY', P .. 't:ls:' .. h .. ':' .. sess, ARGV[5], 1)
end
local o = owner(sess) or ''
local ok = P .. 't:o:' .. o
redis.call('ZADD', ok, ARGV[13], id)
count(P, o)
local over = redis.call('ZCARD', P .. 't:s:' .. sess) - tonumber(ARGV[14])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', P .. 't:s:' .. sess, 0, over - 1)) do remove(P, old) end
end
if o ~= '' then
  over = redis.call('ZCARD', ok) - tonumber(ARGV[17])
  if over > 0 then
    for _, old in ipairs(redis.call('ZRANGE', ok, 0, over - 1)) do remove(P, old) end
  end
end
if ARGV[19] then trim(P, tonumber(ARGV[19]), tonumber(ARGV[20])) end
return 0`)

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Record stores an event like Store.Record: a secret answer is stored as
// Redacted and teaches nothing; the second result reports whether the
// answer now counts as learned for its prompt's pattern.
func (s *RedisStore) Record(ctx context.Context, e Event) (Event, bool, error) {
	e, learned, err := s.prepare(e)
	if err != nil {
		return Event{}, false, err
	}
	err = recordScript.Run(ctx, s.rdb, nil, s.prefix, e.ID, e.SessionID, e.PromptText, e.Input, boolArg(e.Success),
		e.Source, e.ResponseTimeMs, e.Time.UnixNano(), e.PromptType, e.PatternKey, boolArg(learned),
		e.Time.UnixMicro(), s.cfg.MaxPerSession, e.SecretLen, e.SecretMAC, s.cfg.MaxPerOwner, e.Rules, s.cfg.MaxEvents, recordTrim).Err()
	if err != nil {
		return Event{}, false, unavailable(err)
	}
	if s.pruneDue() {
		if err := s.Prune(ctx); err != nil {
			return Event{}, false, err
		}
	}
	return e, learned, nil
}

var pruneScript = redis.NewScript(luaRemove + `
local P, batch = ARGV[1], tonumber(ARGV[4])
local n = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 't:all', '-inf', '(' .. ARGV[2], 'LIMIT', 0, batch)) do
  remove(P, id)
  n = n + 1
end
return n + trim(P, tonumber(ARGV[3]), batch - n)`)

// pruneBatch bounds the events one prune script removes, so Redis never
// runs one long script; Prune repeats it until nothing is left to remove.
const pruneBatch = 1000

// Prune deletes events older than MaxAge and, beyond MaxEvents, the
// oldest of the owner holding the most (as Store.Prune).
func (s *RedisStore) Prune(ctx context.Context) error {
	cutoff := time.Now().Add(-s.cfg.MaxAge).UnixMicro()
	for {
		n, err := pruneScript.Run(ctx, s.rdb, nil, s.prefix, cutoff, s.cfg.MaxEvents, pruneBatch).Int()
		if err != nil {
			return unavailable(err)
		}
		if n < pruneBatch {
			return nil
		}
	}
}

// layoutVersion says what Index has done: "2", every event is in its
// owner's set (t:o:<owner>, t:o: for no owner) and counted in t:oc.
const layoutVersion = "2"

// indexScript puts events written by an older version in their owner's
// set and counts the owners it touched; an event removed meanwhile is
// left out. Adding an event twice changes nothing.
var indexScript = redis.NewScript(luaRemove + `
local P = ARGV[1]
local seen = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local sess = redis.call('HGET', P .. 't:e:' .. id, 'session')
  if sess then
    local o = owner(sess) or ''
    redis.call('ZADD', P .. 't:o:' .. o, ARGV[i + 1], id)
    seen[o] = true
  end
end
for o in pairs(seen) do count(P, o) end
return 0`)

// Index puts the events an older version wrote (the sessions of no
// owner's, and the counts, were not kept) in their owner's set and counts
// them, so that the overall bound can take from the owner holding the
// most; until then it takes from the owners counted so far. It reads
// t:all about scrubBatch at a time and indexes each batch with one short
// script, once (t:layout says it is done; replicas indexing at once do
// no harm).
func (s *RedisStore) Index(ctx context.Context) error {
	return s.onceOverEvents(ctx, "t:layout", layoutVersion, func(kv []string) error {
		args := make([]any, 0, len(kv)+1)
		args = append(args, s.prefix)
		for _, x := range kv { // member, score
			args = append(args, x)
		}
		return indexScript.Run(ctx, s.rdb, nil, args...).Err()
	})
}

// onceOverEvents runs batch over every event of t:all, about scrubBatch
// at a time (their ids and scores, alternately), unless the key P name
// already holds version, and sets it to version once batch has seen them
// all. ZSCAN returns every event present from the first call to the
// last, whatever is added or pruned meanwhile.
func (s *RedisStore) onceOverEvents(ctx context.Context, name, version string, batch func(kv []string) error) error {
	key := s.prefix + name
	v, err := s.rdb.Get(ctx, key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable(err)
	}
	if v == version {
		return nil
	}
	var cursor uint64
	for {
		kv, next, err := s.rdb.ZScan(ctx, s.prefix+"t:all", cursor, "", scrubBatch).Result()
		if err != nil {
			return unavailable(err)
		}
		if len(kv) > 0 {
			if err := batch(kv); err != nil {
				return unavailable(err)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return unavailable(s.rdb.Set(ctx, key, version, 0).Err())
}

// Run prunes every interval until ctx is done, like Store.Run. First,
// and on every tick until each has succeeded, it indexes the events older
// versions wrote by owner (Index) and redacts what they stored in clear
// (Scrub).
func (s *RedisStore) Run(ctx context.Context, every time.Duration, report func(error)) {
	indexed, scrubbed := false, false
	upgrade := func(ctx context.Context) {
		if !indexed {
			err := s.Index(ctx)
			indexed = err == nil
			sweep.Report(ctx, err, report)
		}
		if !scrubbed {
			err := s.Scrub(ctx)
			scrubbed = err == nil
			sweep.Report(ctx, err, report)
		}
	}
	upgrade(ctx)
	sweep.Every(ctx, every, func(ctx context.Context) error {
		sweep.Report(ctx, s.Prune(ctx), report)
		upgrade(ctx)
		return nil
	}, nil)
}

// secretRulesVersion names the secret rules (IsSecret) whose verdicts the
// events in Redis follow; Scrub brings older events up to them once.
// Version 2: the multilingual rules of issue 27. Version 3: an answer is
// kept in clear only on evidence it is not secret (plainAnswer).
const secretRulesVersion = "3"

// scrubScript redacts one event whose answer is still what the caller
// read (ARGV[3]), keeping its length and keyed hash, and takes the answer
// out of the learned counts.
var scrubScript = redis.NewScript(luaUnlearn + `
local P, id = ARGV[1], ARGV[2]
local k = P .. 't:e:' .. id
local f = redis.call('HMGET', k, 'session', 'pattern', 'input', 'learned')
if not f[1] or f[3] ~= ARGV[3] then return 0 end
unlearn(P, f)
redis.call('HSET', k, 'input', ARGV[4], 'learned', '0', 'ilen', ARGV[5], 'imac', ARGV[6])
return 1`)

// scrubBatch is how many events Scrub reads at a time.
const scrubBatch = 500

// Scrub redacts the answers events written by an older version kept in
// clear and the current rules judge secret, and takes them out of the
// learned counts, unless the events already follow these rules (a key
// P t:rules says so; replicas scrubbing at once do no harm). It reads the
// events about scrubBatch at a time and redacts each with its own short
// script, so Redis never runs a long one.
func (s *RedisStore) Scrub(ctx context.Context) error {
	return s.onceOverEvents(ctx, "t:rules", secretRulesVersion, func(kv []string) error {
		var ids []string
		for i := 0; i < len(kv); i += 2 { // member, score
			ids = append(ids, kv[i])
		}
		cmds := make([]*redis.SliceCmd, len(ids))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HMGet(ctx, s.prefix+"t:e:"+id, "prompt", "type", "input")
			}
			return nil
		}); err != nil {
			return err
		}
		for i, c := range cmds {
			f := c.Val()
			prompt, _ := f[0].(string)
			typ, _ := f[1].(string)
			input, ok := f[2].(string)
			if !ok {
				continue // removed between the two reads
			}
			n, mac, secret := s.reseal(prompt, typ, input)
			if !secret {
				continue
			}
			if err := scrubScript.Run(ctx, s.rdb, nil, s.prefix, ids[i], input, Redacted, n, mac).Err(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Count returns how many events the store holds, overall or for session
// when it is not empty.
func (s *RedisStore) Count(ctx context.Context, session string) (int, error) {
	key := s.prefix + "t:all"
	if session != "" {
		key = s.prefix + "t:s:" + session
	}
	n, err := s.rdb.ZCard(ctx, key).Result()
	if err != nil {
		return 0, unavailable(err)
	}
	return int(n), nil
}

var deleteSessionScript = redis.NewScript(luaRemove + `
local n = 0
for _, id in ipairs(redis.call('ZRANGE', ARGV[1] .. 't:s:' .. ARGV[2], 0, -1)) do n = n + remove(ARGV[1], id) end
redis.call('DEL', ARGV[1] .. 't:s:' .. ARGV[2])
return n`)

// DeleteSession deletes every event of a session, and so everything it
// taught; it returns how many events it deleted.
func (s *RedisStore) DeleteSession(ctx context.Context, session string) (int64, error) {
	if err := CheckSessionID(session); err != nil {
		return 0, err
	}
	n, err := deleteSessionScript.Run(ctx, s.rdb, nil, s.prefix, session).Int64()
	if err != nil {
		return 0, unavailable(err)
	}
	return n, nil
}

// Learned returns what was successfully answered to a prompt's pattern,
// like Store.Learned: in session, or with ShareLearned in every session
// of the session's owner (of no owner when it has none);
// never a secret.
func (s *RedisStore) Learned(ctx context.Context, prompt, session string) ([]Learned, error) {
	scope, ok, err := s.learnedFor(prompt, session)
	if !ok {
		return nil, err
	}
	h := sha1hex(scope.pattern)
	key := s.prefix + "t:lp:" + h
	switch {
	case scope.session != "":
		key = s.prefix + "t:ls:" + h + ":" + scope.session
	case scope.owner != "":
		key += ":" + strings.TrimSuffix(scope.owner, ".")
	}
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	all := make([]Learned, 0, len(m))
	for input, v := range m {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || input == Redacted {
			continue
		}
		all = append(all, Learned{Input: input, Successes: n})
	}
	return suggestable(prompt, all), nil
}

// History returns a session's events, oldest first, at most limit, with
// Store.History's redaction: events recorded with the current rules'
// verdict as stored, older ones judged again (judgeRead) and their
// verdicts written back.
func (s *RedisStore) History(ctx context.Context, session string, limit int) ([]Event, error) {
	if err := CheckSessionID(session); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.prefix + "t:s:" + session, Start: 0, Stop: limit - 1, Rev: true}).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.prefix+"t:e:"+id)
		}
		return nil
	})
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]Event, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		f := cmds[i].Val()
		if len(f) == 0 {
			continue // removed between the two reads
		}
		ns, _ := strconv.ParseInt(f["created"], 10, 64)
		rt, _ := strconv.ParseInt(f["rt"], 10, 64)
		n, _ := strconv.Atoi(f["ilen"])
		rules, _ := strconv.Atoi(f["rules"])
		out = append(out, Event{ID: ids[i], SessionID: f["session"], PromptText: f["prompt"], Input: f["input"], Success: f["success"] == "1",
			Source: f["source"], ResponseTimeMs: rt, Time: time.Unix(0, ns), PromptType: f["type"], PatternKey: f["pattern"],
			SecretLen: n, SecretMAC: f["imac"], Rules: rules})
	}
	judged := s.judgeRead(out)
	if len(judged) == 0 {
		return out, nil
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range judged {
			e := out[i]
			verdictScript.Eval(ctx, p, nil, s.prefix, e.ID, e.PromptText, e.Input, e.SecretLen, e.SecretMAC, e.Rules)
		}
		return nil
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// verdictScript writes back what judgeRead made of an event (its masked
// prompt, its answer, redacted or not, and the verdict) if the event
// still exists and has no newer verdict; an answer it redacts leaves the
// learned counts, as Scrub's do.
var verdictScript = redis.NewScript(luaUnlearn + `
local P, id = ARGV[1], ARGV[2]
local k = P .. 't:e:' .. id
local f = redis.call('HMGET', k, 'session', 'pattern', 'input', 'learned', 'rules')
if not f[1] or tonumber(f[5] or '0') >= tonumber(ARGV[7]) then return 0 end
if f[3] ~= ARGV[4] then
  unlearn(P, f)
  redis.call('HSET', k, 'learned', '0')
end
redis.call('HSET', k, 'prompt', ARGV[3], 'input', ARGV[4], 'ilen', ARGV[5], 'imac', ARGV[6], 'rules', ARGV[7])
return 1`)

// sha1hex is Lua's redis.sha1hex: the learned-count keys name a pattern
// by it, so that any pattern text makes a well-formed key.
func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
