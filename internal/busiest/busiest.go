// Package busiest keeps things (sessions) by owner, each owner's in order
// of last use, and finds the busiest owner's least recently used one in
// O(log owners): the bookkeeping of the rule "when the total is full, a
// caller holding fewer than the busiest takes the place of the busiest
// caller's least recently used", shared by the hub session store
// (session.Store) and the MCP session places (internal/mcpplaces). The
// Redis session store keeps the same rule in Lua.
package busiest

import (
	"container/heap"
	"container/list"
	"time"
)

// Owners holds items by owner. It is not safe for concurrent use: its
// users hold their own lock.
type Owners[V any] struct {
	owned map[string]*owner[V] // owners holding none are absent
	// byCount holds the owners by the number of items they hold, each
	// number's in a heap by their least recently used item, and most is
	// the highest number.
	byCount map[int]*ownerHeap[V]
	most    int
	n       int
}

// Item is one thing an owner holds.
type Item[V any] struct {
	// Value is the thing held.
	Value V
	last  time.Time
	o     *owner[V]
	e     *list.Element
}

// Owner is the key of the owner holding it.
func (it *Item[V]) Owner() string { return it.o.key }

// Last is when it was added or last touched.
func (it *Item[V]) Last() time.Time { return it.last }

type owner[V any] struct {
	key string
	lru *list.List // of *Item[V], least recently used first
	idx int        // in its byCount heap
}

// ownerHeap holds the owners of one count, the one whose least recently
// used item is the oldest first (of equal ones, the lower key).
type ownerHeap[V any] []*owner[V]

func (h ownerHeap[V]) Len() int { return len(h) }
func (h ownerHeap[V]) Less(i, j int) bool {
	a, b := h[i].lru.Front().Value.(*Item[V]).last, h[j].lru.Front().Value.(*Item[V]).last
	return a.Before(b) || (a.Equal(b) && h[i].key < h[j].key)
}
func (h ownerHeap[V]) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].idx, h[j].idx = i, j }
func (h *ownerHeap[V]) Push(x any)   { o := x.(*owner[V]); o.idx = len(*h); *h = append(*h, o) }
func (h *ownerHeap[V]) Pop() any {
	old := *h
	o := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return o
}

// New returns an empty Owners.
func New[V any]() *Owners[V] {
	return &Owners[V]{owned: map[string]*owner[V]{}, byCount: map[int]*ownerHeap[V]{}}
}

// Len is the number of items held.
func (s *Owners[V]) Len() int { return s.n }

// Held is the number of items key holds.
func (s *Owners[V]) Held(key string) int {
	if o := s.owned[key]; o != nil {
		return o.lru.Len()
	}
	return 0
}

// Add enters v, held by key, used at now (its most recently used).
func (s *Owners[V]) Add(key string, v V, now time.Time) *Item[V] {
	o := s.owned[key]
	if o == nil {
		o = &owner[V]{key: key, lru: list.New()}
		s.owned[key] = o
	} else {
		s.count(o, -1)
	}
	it := &Item[V]{Value: v, last: now, o: o}
	it.e = o.lru.PushBack(it)
	s.count(o, +1)
	s.n++
	return it
}

// Touch marks it used at now, its owner's most recently used.
func (s *Owners[V]) Touch(it *Item[V], now time.Time) {
	if it.e == nil {
		return // removed
	}
	o := it.o
	wasFront := o.lru.Front() == it.e
	it.last = now
	o.lru.MoveToBack(it.e)
	if wasFront {
		heap.Fix(s.byCount[o.lru.Len()], o.idx) // its least recently used changed
	}
}

// Remove takes it out; removing it again changes nothing.
func (s *Owners[V]) Remove(it *Item[V]) {
	if it.e == nil {
		return
	}
	o := it.o
	s.count(o, -1)
	o.lru.Remove(it.e)
	it.e = nil
	s.n--
	if o.lru.Len() == 0 {
		delete(s.owned, o.key)
	} else {
		s.count(o, +1)
	}
}

// Busiest is the least recently used item of the owner holding the most
// (of several as busy, the one whose least recently used is the oldest),
// or nil when none is held.
func (s *Owners[V]) Busiest() *Item[V] {
	h := s.byCount[s.most]
	if h == nil {
		return nil
	}
	return (*h)[0].lru.Front().Value.(*Item[V])
}

// Victim is the item that makes way for a new one of key when the total
// is full: the busiest owner's least recently used, if key holds fewer
// than that owner; nil if key is as busy as the busiest (or busier), or
// none is held.
func (s *Owners[V]) Victim(key string) *Item[V] {
	v := s.Busiest()
	if v == nil || s.Held(key) >= v.o.lru.Len() {
		return nil
	}
	return v
}

// count files o under its count (add +1) or takes it out (-1), in
// O(log owners).
func (s *Owners[V]) count(o *owner[V], add int) {
	n := o.lru.Len()
	h := s.byCount[n]
	if add > 0 {
		if h == nil {
			h = &ownerHeap[V]{}
			s.byCount[n] = h
		}
		heap.Push(h, o)
		s.most = max(s.most, n)
		return
	}
	heap.Remove(h, o.idx)
	if h.Len() == 0 {
		delete(s.byCount, n)
		for s.most > 0 && s.byCount[s.most] == nil {
			s.most--
		}
	}
}
