package httpguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// TestBudgetRefusalClosesConnection: a request refused because its
// owner's share of the budget is full is marked past its rate, so that
// its connection is closed after the answer (GOAWAY on HTTP/2): the
// twenty-second hostile pass held its peer's share full with unread
// answers and then had 181,826 such 429s answered on 4 HTTP/2
// connections in 10 s, never closed.
func TestBudgetRefusalClosesConnection(t *testing.T) {
	hold, holding := make(chan struct{}), make(chan struct{}, 1)
	g := Guard{Budget: NewBudget(2*StreamCost, StreamCost), Refuse: func(w http.ResponseWriter, _ *http.Request, code int, _ error) { w.WriteHeader(code) }}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holding <- struct{}{}
		<-hold
	}))
	serve := func() (int, bool) {
		ctx, past := rapidreset.WithRequest(t.Context())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
		return rec.Code, past()
	}
	held := make(chan struct{})
	go func() { defer close(held); serve() }()
	<-holding // the owner's share is taken
	if code, past := serve(); code != http.StatusTooManyRequests || !past {
		t.Fatalf("a request past its owner's full share: %d, marked to close its connection %v; want 429, true", code, past)
	}
	close(hold)
	<-held
}

// TestShortenWriteWait: a handler under the guard's Wrap, behind another
// writer that unwraps, bounds its answer's writes to less than the
// guard's wait; a writer not the guard's is left as it is.
func TestShortenWriteWait(t *testing.T) {
	var found bool
	var wait time.Duration
	h := Guard{WriteWait: time.Minute}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		found = ShortenWriteWait(unwrapping{w}, RefusalWriteWait)
		for x := http.ResponseWriter(w); ; {
			if b, ok := x.(*boundWriter); ok {
				wait = b.wait
				break
			}
			x = x.(interface{ Unwrap() http.ResponseWriter }).Unwrap()
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if !found || wait != RefusalWriteWait {
		t.Fatalf("ShortenWriteWait found the guard's writer %v, its wait %v, want %v", found, wait, RefusalWriteWait)
	}
	if ShortenWriteWait(httptest.NewRecorder(), time.Second) {
		t.Fatal("ShortenWriteWait found a guard's writer in a plain recorder")
	}
}

type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }
