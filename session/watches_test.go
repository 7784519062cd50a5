package session

import (
	"errors"
	"testing"
)

func TestWatchesLimits(t *testing.T) {
	type step struct {
		give       bool
		owner, id  string
		want       error // of Take; nil for a place
		wantTotal  int   // after the step
		wantOwner  int
		wantOfSess int
	}
	for _, tc := range []struct {
		name  string
		max   int
		owner int
		sess  int
		steps []step
	}{
		{"per session", 10, 10, 2, []step{
			{owner: "a", id: "s", wantTotal: 1, wantOwner: 1, wantOfSess: 1},
			{owner: "a", id: "s", wantTotal: 2, wantOwner: 2, wantOfSess: 2},
			{owner: "a", id: "s", want: ErrSessionWatchLimit, wantTotal: 2, wantOwner: 2, wantOfSess: 2},
			{owner: "a", id: "t", wantTotal: 3, wantOwner: 3, wantOfSess: 1},
			{give: true, owner: "a", id: "s", wantTotal: 2, wantOwner: 2, wantOfSess: 1},
			{owner: "a", id: "s", wantTotal: 3, wantOwner: 3, wantOfSess: 2},
		}},
		{"per owner", 10, 2, 5, []step{
			{owner: "a", id: "s", wantTotal: 1, wantOwner: 1, wantOfSess: 1},
			{owner: "a", id: "t", wantTotal: 2, wantOwner: 2, wantOfSess: 1},
			{owner: "a", id: "u", want: ErrOwnerWatchLimit, wantTotal: 2, wantOwner: 2},
			{owner: "b", id: "v", wantTotal: 3, wantOwner: 1, wantOfSess: 1},
		}},
		{"in all", 2, 5, 5, []step{
			{owner: "a", id: "s", wantTotal: 1, wantOwner: 1, wantOfSess: 1},
			{owner: "b", id: "t", wantTotal: 2, wantOwner: 1, wantOfSess: 1},
			{owner: "c", id: "u", want: ErrWatchLimit, wantTotal: 2},
			{give: true, owner: "b", id: "t", wantTotal: 1},
			{owner: "c", id: "u", wantTotal: 2, wantOwner: 1, wantOfSess: 1},
		}},
		{"a give without a take changes nothing", 2, 2, 2, []step{
			{owner: "a", id: "s", wantTotal: 1, wantOwner: 1, wantOfSess: 1},
			{give: true, owner: "b", id: "s", wantTotal: 1, wantOwner: 0, wantOfSess: 1},
			{give: true, owner: "a", id: "t", wantTotal: 1, wantOwner: 1, wantOfSess: 0},
			{give: true, owner: "a", id: "s", wantTotal: 0},
			{give: true, owner: "a", id: "s", wantTotal: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWatches(tc.max, tc.owner, tc.sess)
			for i, s := range tc.steps {
				if s.give {
					w.Give(s.owner, s.id)
				} else if err := w.Take(s.owner, s.id); !errors.Is(err, s.want) || (err == nil) != (s.want == nil) {
					t.Fatalf("step %d: Take(%s, %s) = %v, want %v", i, s.owner, s.id, err, s.want)
				}
				total, owner, sess := w.Count(s.owner, s.id)
				if total != s.wantTotal || owner != s.wantOwner || sess != s.wantOfSess {
					t.Fatalf("step %d: count %d/%d/%d, want %d/%d/%d", i, total, owner, sess, s.wantTotal, s.wantOwner, s.wantOfSess)
				}
			}
		})
	}
}
