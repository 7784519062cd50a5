package session

import (
	"errors"
	"fmt"
	"sync"
)

// Errors of Watches.Take: each is a refusal of one more watch
// (RESOURCE_EXHAUSTED at the gRPC edge).
var (
	// ErrWatchLimit: every watch place of this process is taken.
	ErrWatchLimit = errors.New("session: too many watches")
	// ErrOwnerWatchLimit: the caller (Owner.Quota) holds its share.
	ErrOwnerWatchLimit = errors.New("session: too many watches for this client")
	// ErrSessionWatchLimit: the session is watched as often as allowed.
	ErrSessionWatchLimit = errors.New("session: too many watches of this session")
)

// Watches counts the live watches (WatchExposure streams) this process
// serves: per session, per owner (a quota key such as server.Caller.Quota)
// and in all, so that one client cannot hold a goroutine, a buffer and a
// place in every change's fan-out for each of thousands of streams. A
// watch costs a stream goroutine and its buffers in the process that
// serves it whichever store keeps the sessions, so Store and RedisStore
// share this count: it bounds what one daemon spends, while RedisStore's
// change feed reaches every daemon's own watches. It is safe for
// concurrent use.
type Watches struct {
	max, perOwner, perSession int

	mu        sync.Mutex
	total     int
	byOwner   map[string]int // owners and sessions with none are absent
	bySession map[string]int
}

// NewWatches returns a count that allows max watches in all, perOwner to
// one owner and perSession of one session.
func NewWatches(max, perOwner, perSession int) *Watches {
	return &Watches{max: max, perOwner: perOwner, perSession: perSession, byOwner: map[string]int{}, bySession: map[string]int{}}
}

// Take takes a place for a watch of session id by owner, or says which
// limit is reached. Give each Take back once, when the watch ends.
func (w *Watches) Take(owner, id string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.bySession[id] >= w.perSession:
		return fmt.Errorf("%w (limit %d): end one before watching again", ErrSessionWatchLimit, w.perSession)
	case w.byOwner[owner] >= w.perOwner:
		return fmt.Errorf("%w (limit %d)", ErrOwnerWatchLimit, w.perOwner)
	case w.total >= w.max:
		return fmt.Errorf("%w (limit %d): retry later", ErrWatchLimit, w.max)
	}
	w.bySession[id]++
	w.byOwner[owner]++
	w.total++
	return nil
}

// Give gives back the place a Take of (owner, id) took. A Give without a
// Take changes nothing.
func (w *Watches) Give(owner, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bySession[id] == 0 || w.byOwner[owner] == 0 {
		return
	}
	dec(w.bySession, id)
	dec(w.byOwner, owner)
	w.total--
}

// Count returns the watches held, in all, by owner and of session id.
func (w *Watches) Count(owner, id string) (total, ofOwner, ofSession int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, w.byOwner[owner], w.bySession[id]
}

func dec(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}
