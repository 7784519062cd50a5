package httpguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestAdmitRefusesBeforeTheHandler: a request Admit refuses (admission's
// precheck on --http-listen) is answered 429 with Retry-After from the
// refusal's retry delay, and never reaches the handler (vanguard's
// transcoding, the gRPC handler); its HTTP/1.1 connection is kept (the
// body was read), so the next request on it is served. Before the
// eighteenth pass every such refusal was made after transcoding.
func TestAdmitRefusesBeforeTheHandler(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "server overloaded").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Bool
	var handled atomic.Int64
	g := Guard{MaxBody: 1 << 10, CountValues: true, Refuse: WriteRPCError,
		Admit: func(*http.Request) error {
			if refuse.Load() {
				return st.Err()
			}
			return nil
		}}
	ts := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.WriteString(w, "{}")
	})))
	defer ts.Close()
	c := ts.Client()
	post := func() *http.Response {
		t.Helper()
		resp, err := c.Post(ts.URL+"/classifier.v1.ClassifierService/GetIndexInfo", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	refuse.Store(true)
	resp := post()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" || resp.Close {
		t.Fatalf("refused: %s, Retry-After %q, closing %v; want 429, 2 (1.5 s rounded up), the connection kept", resp.Status, resp.Header.Get("Retry-After"), resp.Close)
	}
	if handled.Load() != 0 {
		t.Fatal("a refused request reached the handler")
	}
	refuse.Store(false)
	if resp := post(); resp.StatusCode != http.StatusOK || handled.Load() != 1 {
		t.Fatalf("admitted: %s, %d handled; want 200, 1", resp.Status, handled.Load())
	}
}

// TestRequestTimeout reads a request's own deadline as vanguard does.
func TestRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        time.Duration
		ok          bool
	}{
		{"", "", 0, true},
		{"Connect-Timeout-Ms", "250", 250 * time.Millisecond, true},
		{"Connect-Timeout-Ms", "abc", 0, false},
		{"X-Server-Timeout", "0.05", 50 * time.Millisecond, true},
		{"X-Server-Timeout", "-1", 0, false},
		{"Grpc-Timeout", "100m", 100 * time.Millisecond, true},
		{"Grpc-Timeout", "3S", 3 * time.Second, true},
		{"Grpc-Timeout", "10x", 0, false},
		{"Grpc-Timeout", "1234567890S", 0, false},
	} {
		h := http.Header{}
		if tc.name != "" {
			h.Set(tc.name, tc.value)
		}
		got, ok := RequestTimeout(h)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("%s: %q: %v, %v; want %v, %v", tc.name, tc.value, got, ok, tc.want, tc.ok)
		}
	}
}
