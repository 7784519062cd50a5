package session

import (
	"errors"
	"fmt"
	"sync"
)

// Places counts live MCP sessions, in all and per owner (a quota key such
// as server.Caller.Quota), so that one caller cannot take every session:
// a session takes a place before it is made and gives it back once, when
// it ends or when none ever started. classifierd proxy counts its agent
// sessions with it and the daemon's --mcp-listen its MCP sessions. A
// Store counts its exposures too, but it forgets an idle exposure on its
// own clock (only reads and changes of the exposure touch it, not the
// session's other requests); Places follows the MCP sessions themselves,
// so the count is exact. It is safe for concurrent use.
type Places struct {
	max, perOwner int

	mu    sync.Mutex
	total int
	held  map[string]int // live sessions per owner; owners with none are absent
}

// NewPlaces returns a count of sessions that allows max in all and
// perOwner to one owner.
func NewPlaces(max, perOwner int) *Places {
	return &Places{max: max, perOwner: perOwner, held: map[string]int{}}
}

// Take takes a place for owner: ErrLimit when every place is taken,
// ErrOwnerLimit when owner holds perOwner already.
func (q *Places) Take(owner string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[owner] >= q.perOwner {
		return fmt.Errorf("%w (limit %d)", ErrOwnerLimit, q.perOwner)
	}
	if q.total >= q.max {
		return fmt.Errorf("%w (limit %d)", ErrLimit, q.max)
	}
	q.held[owner]++
	q.total++
	return nil
}

// Give gives back a place owner took. Give each Take back once; a Give
// without a Take changes nothing.
func (q *Places) Give(owner string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, ok := q.held[owner]
	if !ok {
		return
	}
	if n <= 1 {
		delete(q.held, owner)
	} else {
		q.held[owner] = n - 1
	}
	q.total--
}

// Count returns the places taken, in all and by owner.
func (q *Places) Count(owner string) (total, held int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total, q.held[owner]
}

// LimitReached names the limit a refused Take reached, as the
// sessions_refused_total metrics label it: "per_client" (ErrOwnerLimit),
// "total" (ErrLimit), or "" for any other error.
func LimitReached(err error) string {
	switch {
	case errors.Is(err, ErrOwnerLimit):
		return "per_client"
	case errors.Is(err, ErrLimit):
		return "total"
	}
	return ""
}
