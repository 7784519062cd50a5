package learn

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Redis keeps records in Redis, shared by every replica pointed at it:
// a hash of the records (by key and id, as JSON: ids, counts and the
// quantised vector, never text), a sorted set logging each put by a
// sequence number, and an epoch bumped by every reset. Each replica's
// learner follows the log (Changes) and reloads everything when the epoch
// moves.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string

	mu    sync.Mutex
	epoch int64
}

// NewRedis returns a store on rdb whose keys start with prefix (default
// "classifierd:").
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = "classifierd:"
	}
	return &Redis{rdb: rdb, prefix: prefix + "learn:"}
}

func (s *Redis) k(name string) string { return s.prefix + name }

func field(key, id string) string { return key + "|" + id }

func unavailable(err error) error { return fmt.Errorf("%w: %v", ErrUnavailable, err) }

// Put implements Store.
func (s *Redis) Put(ctx context.Context, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	seq, err := s.rdb.Incr(ctx, s.k("seq")).Result()
	if err != nil {
		return unavailable(err)
	}
	f := field(r.Key, r.ID)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.k("records"), f, b)
		p.ZAdd(ctx, s.k("log"), redis.Z{Score: float64(seq), Member: f})
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Delete implements Store.
func (s *Redis) Delete(ctx context.Context, key string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	fs := make([]string, len(ids))
	ms := make([]any, len(ids))
	for i, id := range ids {
		fs[i] = field(key, id)
		ms[i] = fs[i]
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, s.k("records"), fs...)
		p.ZRem(ctx, s.k("log"), ms...)
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Reset implements Store.
func (s *Redis) Reset(ctx context.Context, identity string) error {
	if identity == "" {
		if err := s.rdb.Del(ctx, s.k("records"), s.k("log")).Err(); err != nil {
			return unavailable(err)
		}
	} else {
		recs, err := s.Load(ctx)
		if err != nil {
			return err
		}
		byKey := map[string][]string{}
		for _, r := range recs {
			if r.Identity == identity {
				byKey[r.Key] = append(byKey[r.Key], r.ID)
			}
		}
		for k, ids := range byKey {
			if err := s.Delete(ctx, k, ids); err != nil {
				return err
			}
		}
	}
	if err := s.rdb.Incr(ctx, s.k("epoch")).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// Load implements Store.
func (s *Redis) Load(ctx context.Context) ([]Record, error) {
	all, err := s.rdb.HGetAll(ctx, s.k("records")).Result()
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]Record, 0, len(all))
	for _, v := range all {
		var r Record
		if json.Unmarshal([]byte(v), &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Changes implements Follower.
func (s *Redis) Changes(ctx context.Context, cursor int64) ([]Record, int64, bool, error) {
	ep, err := s.rdb.Get(ctx, s.k("epoch")).Int64()
	if err != nil && err != redis.Nil {
		return nil, cursor, false, unavailable(err)
	}
	s.mu.Lock()
	moved := ep != s.epoch
	s.epoch = ep
	s.mu.Unlock()
	if moved {
		seq, err := s.rdb.Get(ctx, s.k("seq")).Int64()
		if err != nil && err != redis.Nil {
			return nil, cursor, false, unavailable(err)
		}
		recs, err := s.Load(ctx)
		return recs, seq, true, err
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.k("log"), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(cursor, 10), Max: "+inf", Count: 10000}).Result()
	if err != nil {
		return nil, cursor, false, unavailable(err)
	}
	if len(zs) == 0 {
		return nil, cursor, false, nil
	}
	fs := make([]string, len(zs))
	for i, z := range zs {
		fs[i] = z.Member.(string)
		cursor = max(cursor, int64(z.Score))
	}
	vals, err := s.rdb.HMGet(ctx, s.k("records"), fs...).Result()
	if err != nil {
		return nil, cursor, false, unavailable(err)
	}
	var out []Record
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		var r Record
		if json.Unmarshal([]byte(str), &r) == nil {
			out = append(out, r)
		}
	}
	return out, cursor, false, nil
}

// Close implements Store; the client belongs to the caller.
func (s *Redis) Close() error { return nil }
