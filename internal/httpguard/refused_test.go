package httpguard

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/classifierd/classifierd/server"
)

// TestRefusedBodiesRate: a caller whose bodies are read and then refused
// 400 is held to RefusedBodies' rate: once past its burst, its next
// requests with a body are refused 429 from their heads (Retry-After,
// the body not read, the handler not called), while another caller's
// bad and good bodies, and the first caller's bodiless requests, go on
// as before (the twenty-fourth hostile pass: 70 KB Routes whose JSON
// never ends, 18,879 read and refused in 10 s, the daemon at 3.0-3.7
// times the client's CPU). Bodies that parse are never charged.
func TestRefusedBodiesRate(t *testing.T) {
	const size = 64 << 10
	g := Guard{MaxBody: 1 << 20, BadBodies: NewRefusedBodies(64<<10, 256<<10), Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
		http.Error(w, err.Error(), code)
	}}
	called := 0
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called++
		b := make([]byte, 1)
		if _, _ = r.Body.Read(b); b[0] == 'x' {
			http.Error(w, "request body: does not parse", http.StatusBadRequest)
		}
	}))
	do := func(who, body string) (*httptest.ResponseRecorder, *countingBody) {
		req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/Route", nil)
		cb := &countingBody{Reader: strings.NewReader(body)}
		req.Body, req.ContentLength = cb, int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(server.WithCaller(req.Context(), server.Caller{Name: who}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w, cb
	}
	good, bad := "{"+strings.Repeat(" ", size-2)+"}", strings.Repeat("x", size)
	for range 20 {
		if w, _ := do("alice", good); w.Code != http.StatusOK {
			t.Fatalf("a good body: %d, want 200", w.Code)
		}
	}
	n := 0
	for ; n < 20; n++ {
		w, cb := do("alice", bad)
		if w.Code == http.StatusTooManyRequests {
			if cb.n != 0 || w.Header().Get("Retry-After") == "" {
				t.Fatalf("past the rate: %d bytes of the body read, Retry-After %q; want none read, a delay", cb.n, w.Header().Get("Retry-After"))
			}
			break
		}
		if w.Code != http.StatusBadRequest {
			t.Fatalf("bad body %d: %d, want 400", n, w.Code)
		}
	}
	// The burst is 256 KiB: four bodies of 64 KiB (and their requests).
	if n < 3 || n > 5 {
		t.Fatalf("refused 429 after %d bad bodies of 64 KiB, want after 4 (a burst of 256 KiB)", n)
	}
	before := called
	if w, _ := do("alice", bad); w.Code != http.StatusTooManyRequests || called != before {
		t.Fatalf("past the rate again: %d, handler called %d times; want 429, not called", w.Code, called-before)
	}
	if w, _ := do("bob", bad); w.Code != http.StatusBadRequest {
		t.Fatalf("another caller's bad body: %d, want 400", w.Code)
	}
	if w, _ := do("bob", good); w.Code != http.StatusOK {
		t.Fatalf("another caller's good body: %d, want 200", w.Code)
	}
	req := httptest.NewRequest(http.MethodGet, "/tools", nil)
	req = req.WithContext(server.WithCaller(req.Context(), server.Caller{Name: "alice"}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("the caller's bodiless GET past the rate: %d, want 200", w.Code)
	}
	if wait := g.BadBodies.Past("id:alice"); wait <= 0 || wait > 5*time.Second {
		t.Fatalf("past the rate: wait %v, want a few seconds", wait)
	}
}

// TestBodyFault: the statuses that charge a read body to its caller's
// rate of refused bodies, gRPC's INVALID_ARGUMENT in an HTTP 200's
// headers (trailers-only) or trailers among them.
func TestBodyFault(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		code int
		h    http.Header
		want bool
	}{
		{400, nil, true}, {413, nil, true}, {415, nil, true}, {422, nil, true},
		{401, nil, false}, {404, nil, false}, {429, nil, false}, {500, nil, false}, {200, h(), false},
		{200, h("Grpc-Status", "3"), true}, {200, h(http.TrailerPrefix+"Grpc-Status", "3"), true},
		{200, h("Grpc-Status", "0"), false}, {200, h("Grpc-Status", "8"), false},
	} {
		if got := bodyFault(tc.code, tc.h); got != tc.want {
			t.Errorf("bodyFault(%d, %v) = %v, want %v", tc.code, tc.h, got, tc.want)
		}
	}
}

// TestBodyRate: every body a caller sends is charged to its rate of
// body bytes (NewBodyRate), answered or not; past it the caller's
// requests with a body are refused 429 from their heads, bodies unread,
// while another caller's go on (the twenty-fifth hostile pass: a call
// that runs no model, padded to 64 KiB, 19,618 times in 10 s at 6.5
// times the client's CPU).
func TestBodyRate(t *testing.T) {
	g := Guard{MaxBody: 1 << 20, BodyRate: NewBodyRate(64<<10, 256<<10, 0), Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
		http.Error(w, err.Error(), code)
	}}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	do := func(who string) (int, int) {
		body := strings.Repeat(" ", 64<<10)
		req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/GetIndexInfo", nil)
		cb := &countingBody{Reader: strings.NewReader(body)}
		req.Body, req.ContentLength = cb, int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(server.WithCaller(req.Context(), server.Caller{Name: who}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, cb.n
	}
	n := 0
	for ; n < 20; n++ {
		code, read := do("alice")
		if code == http.StatusTooManyRequests {
			if read != 0 {
				t.Fatalf("past the rate: %d bytes of the body read, want none", read)
			}
			break
		}
		if code != http.StatusOK {
			t.Fatalf("body %d: %d, want 200", n, code)
		}
	}
	if n < 3 || n > 5 {
		t.Fatalf("refused 429 after %d bodies of 64 KiB, want after 4 (a burst of 256 KiB)", n)
	}
	if code, _ := do("bob"); code != http.StatusOK {
		t.Fatalf("another caller: %d, want 200", code)
	}
}

// TestBodyRateWeighsValues: a body is charged its bytes and
// server.ValueCost for each value counted in it, whether counted as it is
// read (JSON) or once read (protobuf): 64 KiB of two-byte JSON values or
// protobuf fields reach the rate sixteen times sooner than 64 KiB of one
// value (the twenty-seventh hostile pass: many small fields cost the
// daemon 3.9 times the client's CPU within the rate of bytes, one field
// 1.9).
func TestBodyRateWeighsValues(t *testing.T) {
	var field, fields []byte // AnalyzePromptRequest: prompt (1), valid_categories (3)
	field = protowire.AppendTag(field, 1, protowire.BytesType)
	field = protowire.AppendBytes(field, make([]byte, 64<<10-4))
	for len(fields) < 64<<10 {
		fields = protowire.AppendTag(fields, 3, protowire.BytesType)
		fields = protowire.AppendBytes(fields, nil)
	}
	for _, tc := range []struct {
		name, ctype string
		one, many   []byte
		cost        int64 // Guard.ValueCost
		most        int   // bodies of many values before the 429
	}{
		{"JSON", "application/json", []byte(`"` + strings.Repeat("a", 64<<10-2) + `"`), []byte("[" + strings.Repeat("0,", 32<<10-1) + "0]"), 0, 5},
		{"protobuf", "application/proto", field, fields, 0, 5},
		// An MCP listener's: 64 KiB and 32 Ki values of 64 bytes weigh
		// 2.06 MiB, the whole burst (a charge is capped at it) at once.
		{"MCP", "application/json", []byte(`"` + strings.Repeat("a", 64<<10-2) + `"`), []byte("[" + strings.Repeat("0,", 32<<10-1) + "0]"), MCPValueCost, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Guard{MaxBody: 1 << 20, CountValues: true, ValueCost: tc.cost, BodyRate: NewBodyRate(1, 2<<20, 0), Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
				http.Error(w, err.Error(), code)
			}}
			h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			until := func(who string, body []byte) int {
				for n := range 64 {
					req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/AnalyzePrompt", bytes.NewReader(body))
					req.Header.Set("Content-Type", tc.ctype)
					req = req.WithContext(server.WithCaller(req.Context(), server.Caller{Name: who}))
					w := httptest.NewRecorder()
					if h.ServeHTTP(w, req); w.Code == http.StatusTooManyRequests {
						return n
					}
				}
				return 64
			}
			one, many := until("alice", tc.one), until("bob", tc.many)
			if one < 30 || many > tc.most {
				t.Fatalf("2 MiB of burst: %d bodies of 64 KiB in one value, %d of 64 KiB in two-byte values, want about 32 and at most %d", one, many, tc.most)
			}
		})
	}
}

// TestBodyRateSharedByFairShare: past the shared rate of every caller's
// bodies (NewBodyRate's allPerSecond), a caller that sent more than its
// max-min fair share of it lately is refused 429, naming the shared
// rate, while a caller of small bodies goes on; with no shared rate each
// caller is held to its own alone (the twenty-seventh hostile pass:
// eight tokens each under their own 16 MiB a second took both cores,
// and another identity's small Routes slowed twelvefold).
func TestBodyRateSharedByFairShare(t *testing.T) {
	for _, shared := range []bool{true, false} {
		all := int64(0)
		if shared {
			all = 1 << 20
		}
		g := Guard{MaxBody: 1 << 20, BodyRate: NewBodyRate(1<<30, 1<<20, all), Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
			http.Error(w, err.Error(), code)
		}}
		h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		do := func(who string, size int) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/GetIndexInfo", strings.NewReader(strings.Repeat(" ", size)))
			req.Header.Set("Content-Type", "application/json")
			req = req.WithContext(server.WithCaller(req.Context(), server.Caller{Name: who}))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		if w := do("victim", 512); w.Code != http.StatusOK {
			t.Fatalf("a small body first: %d, want 200", w.Code)
		}
		refused := 0
		for i := range 48 { // 3 MiB from eight callers, past the shared burst of 2 MiB
			if do(fmt.Sprintf("m%d", i%8), 64<<10).Code == http.StatusTooManyRequests {
				refused++
			}
		}
		w := do("m0", 64<<10)
		switch {
		case shared && (w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "--all-body-bytes-per-second") || refused == 0):
			t.Fatalf("eight callers past the shared rate: %d refused, then %d %q, want 429 naming --all-body-bytes-per-second", refused, w.Code, w.Body.String())
		case !shared && (w.Code != http.StatusOK || refused != 0):
			t.Fatalf("no shared rate: %d refused, then %d, want none", refused, w.Code)
		}
		if w := do("victim", 512); w.Code != http.StatusOK {
			t.Fatalf("shared %v: the caller of small bodies got %d %q, want 200", shared, w.Code, w.Body.String())
		}
	}
	if g := NewBodyRate(1<<30, 1<<20, 1<<20); g.RefusedByShare() != 0 {
		t.Fatal("a new rate counts refusals")
	}
	// The share counts bytes, not requests: a caller of many small
	// requests (250 Routes of 200 bytes, 50 KB) stays under its share
	// beside eight bulk callers that keep the shared rate past (the
	// twenty-ninth hostile pass: counted at 1 KiB a request, 6,000 small
	// Routes a second were refused).
	q := NewBodyRate(1<<30, 1<<20, 1<<20)
	for i := range 48 {
		q.Charge(fmt.Sprintf("m%d", i%8), 64<<10)
	}
	for range 250 {
		q.Charge("routes", 200)
	}
	if wait := q.Past("m0"); wait == 0 {
		t.Fatal("a bulk caller past its share of the shared rate was not refused")
	}
	if wait := q.Past("routes"); wait != 0 {
		t.Fatalf("a caller of 250 small requests refused for %v beside the bulk callers, want none", wait)
	}
	// Shares are weighed (Weigh, from --admission-weights): a caller of
	// weight 8 sending what each of eight bulk callers of weight 1 sends
	// stays under its share when theirs are past.
	for _, weighed := range []bool{false, true} {
		q := NewBodyRate(1<<30, 1<<20, 1<<20)
		if weighed {
			q.Weigh(func(who string) float64 {
				if who == "hub" {
					return 8
				}
				return 1
			})
		}
		for i := range 54 {
			who := fmt.Sprintf("m%d", i%9)
			if i%9 == 8 {
				who = "hub"
			}
			q.Charge(who, 64<<10)
		}
		if q.Past("m0") == 0 {
			t.Fatalf("weighed %v: a bulk caller of weight 1 past its share was not refused", weighed)
		}
		if refused := q.Past("hub") > 0; refused != !weighed {
			t.Fatalf("weighed %v: the hub sending what each bulk caller sends refused %v, want %v", weighed, refused, !weighed)
		}
	}
	// Bodies of SmallBody bytes or fewer are never refused for the
	// rate, only charged.
	g := Guard{MaxBody: 1 << 20, BodyRate: NewBodyRate(1<<10, 1<<10, 0), Refuse: func(w http.ResponseWriter, r *http.Request, code int, err error) {
		http.Error(w, err.Error(), code)
	}}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 20 {
		req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/Route", strings.NewReader(strings.Repeat(" ", SmallBody)))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(server.WithCaller(req.Context(), server.Caller{Name: "small"}))
		w := httptest.NewRecorder()
		if h.ServeHTTP(w, req); w.Code != http.StatusOK {
			t.Fatalf("small body %d, far past the rate: %d, want 200", i, w.Code)
		}
	}
}

// TestSharedRateChargesSmallBodies: bodies under a KiB add up in the
// shared rate (the thirtieth hostile pass: each was rounded down to 0).
func TestSharedRateChargesSmallBodies(t *testing.T) {
	q := NewBodyRate(1<<30, 1<<20, 1<<20)
	before := q.shared.Tokens()
	for range 2048 {
		q.Charge("m0", 512)
	}
	// 1 MiB of 512-byte bodies: 1,024 KiB taken (the rate gives back a
	// few meanwhile).
	if taken := before - q.shared.Tokens(); taken < 1000 || taken > 1025 {
		t.Fatalf("2,048 bodies of 512 bytes took %.1f KiB of the shared rate, want 1,024", taken)
	}
}
