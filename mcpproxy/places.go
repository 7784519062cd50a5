package mcpproxy

import (
	"fmt"
	"sync"

	"github.com/classifierd/classifierd/session"
)

// places counts the agent sessions that are live, in all and per owner
// (server.Caller.Quota), so that one caller cannot take every session: a
// session takes a place when its server is made and gives it back once,
// when its MCP session ends or when none ever started. The session store
// counts its exposures too, but it forgets an idle exposure on its own
// clock (only reads and changes of the exposure touch it, not the
// session's other requests); places follows the MCP sessions themselves,
// so the count is exact. It is safe for concurrent use.
type places struct {
	max, perOwner int

	mu    sync.Mutex
	total int
	held  map[string]int // live sessions per owner; owners with none are absent
}

func newPlaces(max, perOwner int) *places {
	return &places{max: max, perOwner: perOwner, held: map[string]int{}}
}

// take takes a place for owner: session.ErrLimit when every place is
// taken, session.ErrOwnerLimit when owner holds perOwner already.
func (q *places) take(owner string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[owner] >= q.perOwner {
		return fmt.Errorf("%w (limit %d)", session.ErrOwnerLimit, q.perOwner)
	}
	if q.total >= q.max {
		return fmt.Errorf("%w (limit %d)", session.ErrLimit, q.max)
	}
	q.held[owner]++
	q.total++
	return nil
}

// give gives back a place owner took. Each take is given back once
// (client.end); a give without a take changes nothing.
func (q *places) give(owner string) {
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

// count returns the places taken, in all and by owner.
func (q *places) count(owner string) (total, held int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total, q.held[owner]
}
