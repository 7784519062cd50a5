package mcpplaces

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

type countRefusals struct{ perClient, total atomic.Int32 }

func (c *countRefusals) MCPSessionRefused(limit string) {
	if limit == "per_client" {
		c.perClient.Add(1)
	} else {
		c.total.Add(1)
	}
}

// ownerHeader names the caller of a request to serve's listener, as the
// gate would find it; without it the caller's quota is "q".
const ownerHeader = "X-Test-Owner"

// serve is one SDK server over streamable HTTP behind Limit.
func serve(t *testing.T, places *Places, max, perClient int, refused Refusals) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	h := places.Limit(srv, max, perClient, refused, log)(sdk)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.Header.Get(ownerHeader)
		if q == "" {
			q = "q"
		}
		h.ServeHTTP(w, r.WithContext(server.WithCaller(r.Context(), server.Caller{Name: q, Quota: q})))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func connect(url string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
}

// TestLimitHoldsUntilDelete: a session holds its place while it lives; a
// session past the limit is refused (and counted) without reaching the
// SDK; a served DELETE frees the place before the client's next request.
func TestLimitHoldsUntilDelete(t *testing.T) {
	places := New(1, 1, nil)
	var refused countRefusals
	url := serve(t, places, 1, 1, &refused)
	a, err := connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() }) // before the server's Close, which waits for its stream
	if total, held := places.Count("q"); total != 1 || held != 1 || places.Named() != 1 {
		t.Fatalf("one session: %d in all, %d held, %d named; want 1, 1, 1", total, held, places.Named())
	}
	if _, err := connect(url); err == nil {
		t.Fatal("a second session past the per-client limit of 1 was started")
	}
	if refused.perClient.Load() < 1 || refused.total.Load() != 0 {
		t.Fatalf("refusals counted: %d per client, %d total; want some per client only", refused.perClient.Load(), refused.total.Load())
	}
	if err := a.Close(); err != nil { // a DELETE
		t.Fatal(err)
	}
	if total, _ := places.Count("q"); total != 0 || places.Named() != 0 {
		t.Fatalf("after the DELETE was answered: %d places, %d named; want none", total, places.Named())
	}
	b, err := connect(url)
	if err != nil {
		t.Fatalf("the freed place was not free: %v", err)
	}
	b.Close()
}

// TestPlaceGivenBackOnce: a place without a session is given back at
// once, its OnEnd run once however often it is given back.
func TestPlaceGivenBackOnce(t *testing.T) {
	places := New(2, 2, nil)
	p, err := places.Take("q")
	if err != nil {
		t.Fatal(err)
	}
	var ends atomic.Int32
	p.OnEnd(func() { ends.Add(1) })
	p.Hold(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil), "no-such-session")
	p.Give()
	p.Name("")
	if total, _ := places.Count("q"); total != 0 || ends.Load() != 1 {
		t.Fatalf("%d places, OnEnd ran %d times; want 0, 1", total, ends.Load())
	}
	if _, err := places.Take("q"); err != nil {
		t.Fatal(err)
	}
	if _, err := places.Take("r"); err != nil {
		t.Fatal(err)
	}
	// q holds as many as the busiest: no place is taken from r.
	if _, err := places.Take("q"); !errors.Is(err, session.ErrLimit) {
		t.Fatalf("third place of 2: %v, want session.ErrLimit", err)
	}
}
