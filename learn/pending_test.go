package learn

import (
	"fmt"
	"testing"
	"time"
)

// TestPendingFairEviction: when the store of routed requests is full, the
// identities holding the most make way, so busy identities cannot push
// out a quiet one's request ids, and each keeps its newest.
func TestPendingFairEviction(t *testing.T) {
	cfg := Config{PendingTTL: time.Hour, MaxPending: 50, MaxPendingPerIdentity: 20}
	for _, tc := range []struct {
		name   string
		busy   int // identities putting requests round-robin after the quiet one
		rounds int
	}{
		{"five busy identities overfill the store", 5, 20},
		{"ten busy identities overfill it fivefold", 10, 25},
		{"one busy identity at its own cap", 1, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPending(cfg)
			quiet := p.put(pendingReq{identity: "quiet"})
			last := map[string]string{}
			ids := map[string][]string{"quiet": {quiet}}
			for i := 0; i < tc.rounds; i++ {
				for b := 0; b < tc.busy; b++ {
					who := fmt.Sprintf("busy%d", b)
					last[who] = p.put(pendingReq{identity: who})
					ids[who] = append(ids[who], last[who])
				}
			}
			held := map[string]int{}
			for who, all := range ids {
				for _, id := range all {
					if _, ok := p.get(id, who); ok {
						held[who]++
					}
				}
			}
			if _, ok := p.get(quiet, "quiet"); !ok {
				t.Errorf("the quiet identity's request was pushed out by %d busy identities", tc.busy)
			}
			for who, id := range last {
				if _, ok := p.get(id, who); !ok {
					t.Errorf("%s lost its newest request", who)
				}
			}
			if n := p.len(); n > cfg.MaxPending {
				t.Errorf("held %d requests, bound %d", n, cfg.MaxPending)
			}
			// Every identity holds at least its share of the store, and
			// none more than its own bound.
			share := cfg.MaxPending / len(ids)
			for who, n := range held {
				if n > cfg.MaxPendingPerIdentity {
					t.Errorf("%s holds %d, bound %d", who, n, cfg.MaxPendingPerIdentity)
				}
				if want := min(share, tc.rounds, cfg.MaxPendingPerIdentity); who != "quiet" && n < want {
					t.Errorf("%s holds %d, its share is %d", who, n, want)
				}
			}
		})
	}
}

func TestPendingResetAndOwnership(t *testing.T) {
	p := newPending(Config{PendingTTL: time.Hour, MaxPending: 10, MaxPendingPerIdentity: 10})
	a1, a2 := p.put(pendingReq{identity: "alice"}), p.put(pendingReq{identity: "alice"})
	b1 := p.put(pendingReq{identity: "bob"})
	if _, ok := p.get(a1, "bob"); ok {
		t.Error("bob read alice's request")
	}
	p.reset("alice")
	if _, ok := p.get(a2, "alice"); ok {
		t.Error("alice's request survived her reset")
	}
	if _, ok := p.get(b1, "bob"); !ok || p.len() != 1 {
		t.Errorf("resetting alice touched bob's request (held %d)", p.len())
	}
	p.reset("")
	if p.len() != 0 {
		t.Errorf("reset all left %d requests", p.len())
	}
}

func TestPendingExpires(t *testing.T) {
	p := newPending(Config{PendingTTL: time.Millisecond, MaxPending: 10, MaxPendingPerIdentity: 10})
	id := p.put(pendingReq{identity: "alice"})
	time.Sleep(5 * time.Millisecond)
	if _, ok := p.get(id, "alice"); ok || p.len() != 0 {
		t.Error("a request outlived its TTL")
	}
}
