package terminal

import (
	"errors"
	"testing"
)

// TestLearnedFor pins whose answers Learned counts, the rule Store and
// RedisStore take from storeCore: one session's own, every session's
// with ShareLearned, none without a session.
func TestLearnedFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		share   bool
		session string
		ok      bool
		want    string // the session counted; "" for every session
		err     error
	}{
		{"own session", false, "a", true, "a", nil},
		{"no session, not shared", false, "", false, "", nil},
		{"bad session", false, "bad id\n", false, "", ErrBadSessionID},
		{"shared", true, "a", true, "", nil},
		{"shared, no session", true, "", true, "", nil},
		{"an owner's session", false, OwnedSessionID("alice", "a"), true, OwnedSessionID("alice", "a"), nil},
		{"an owner, no session, not shared", false, OwnedSessionID("alice", ""), false, "", nil},
		{"shared, an owner's session", true, OwnedSessionID("alice", "a"), true, "", nil},
		{"shared, an owner, no session", true, OwnedSessionID("alice", ""), true, "", nil},
		{"shared, bad session", true, "bad id\n", false, "", ErrBadSessionID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newStoreCore(StoreConfig{ShareLearned: tc.share})
			if err != nil {
				t.Fatal(err)
			}
			scope, ok, err := c.learnedFor("Environment  NAME:", tc.session)
			if ok != tc.ok || !errors.Is(err, tc.err) {
				t.Fatalf("learnedFor: ok=%v err=%v, want ok=%v err=%v", ok, err, tc.ok, tc.err)
			}
			if !ok {
				return
			}
			if scope.session != tc.want {
				t.Errorf("session %q, want %q", scope.session, tc.want)
			}
			if want := sessionOwner(tc.session); tc.share && scope.owner != want {
				t.Errorf("owner %q, want %q", scope.owner, want)
			}
			if want := PatternKey("Environment name:"); scope.pattern != want {
				t.Errorf("pattern %q, want %q", scope.pattern, want)
			}
		})
	}
}

// TestNewStoreCore: bad limits are refused, zero ones take the defaults.
func TestNewStoreCore(t *testing.T) {
	if _, err := newStoreCore(StoreConfig{MaxEvents: -1}); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("negative MaxEvents: got %v, want ErrBadArgument", err)
	}
	c, err := newStoreCore(StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.MaxAge != DefaultMaxAge || c.cfg.MaxPerSession != DefaultMaxPerSession || c.cfg.MaxEvents != DefaultMaxEvents {
		t.Errorf("defaults: got %+v", c.cfg)
	}
}
