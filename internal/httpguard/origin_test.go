package httpguard

import (
	"net/http"
	"strings"
	"testing"
)

func TestCrossSite(t *testing.T) {
	for _, tc := range []struct {
		name, method, host string
		header             map[string]string
		refused            bool
	}{
		{"no Origin, no Sec-Fetch-Site (curl, SDKs)", "POST", "127.0.0.1:8080", nil, false},
		{"own origin", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}, false},
		{"own origin, default port", "POST", "localhost", map[string]string{"Origin": "http://LOCALHOST"}, false},
		{"own origin over https, default port", "POST", "example.com:443", map[string]string{"Origin": "https://example.com"}, false},
		{"own origin behind a TLS proxy", "POST", "daemon.example", map[string]string{"Origin": "https://daemon.example:443"}, false},
		{"IPv6 own origin", "POST", "[::1]:9", map[string]string{"Origin": "http://[::1]:9"}, false},
		{"Sec-Fetch-Site none (typed by the user)", "POST", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"another site", "POST", "127.0.0.1:8080", map[string]string{"Origin": "https://evil.example"}, true},
		{"another port", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8081"}, true},
		{"another loopback name", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://localhost:8080"}, true},
		{"http origin, default port differs", "POST", "example.com:443", map[string]string{"Origin": "http://example.com"}, true},
		{"null", "POST", "127.0.0.1:8080", map[string]string{"Origin": "null"}, true},
		{"an origin with a path", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080/x"}, true},
		{"cross-site without Origin", "POST", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"same-site without Origin", "DELETE", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "Same-Site"}, true},
		{"own Origin but cross-site", "POST", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "cross-site"}, true},
		{"a GET from a link on another site", "GET", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"an OPTIONS preflight", "OPTIONS", "127.0.0.1:8080", map[string]string{"Origin": "https://evil.example"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(tc.method, "http://"+tc.host+"/x", nil)
			r.Host = tc.host
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			if err := crossSite(r); (err != nil) != tc.refused {
				t.Errorf("crossSite = %v, want refused %v", err, tc.refused)
			}
		})
	}
}

func TestAPIContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "Application/JSON": true,
		"application/proto": true, "application/connect+json": true, "application/grpc-web+proto": true,
		"application/grpc": true, "application/grpc-web-text": true,
		"": false, "text/plain": false, "text/plain; charset=utf-8": false, "application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x": false, "application/jsonx": false, "json": false, "application/json;;": false,
	} {
		if got := apiContentType(ct); got != want {
			t.Errorf("apiContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}

// TestBudgetReserve: the last quarter of the budget is kept, while others
// hold bytes, for callers that hold at most a sixteenth of it.
func TestBudgetReserve(t *testing.T) {
	b := NewBudget(1600, 800) // reserve 400, small max(100, budgetChunk)
	b.small = 100             // as a budget of 32 MiB's 2 MiB is to a 32 KiB chunk
	steps := []struct {
		who  string
		n    int64
		want bool
	}{
		{"alice", 800, true}, // her share
		{"alice", 1, false},  // past her share
		{"carol", 400, true}, // 1200: three quarters
		{"carol", 1, false},  // into the reserve, holding more than small
		{"bob", 100, true},   // into the reserve, holding at most small
		{"bob", 1, false},    // more than small
		{"dave", 100, true},  // 1400
		{"erin", 100, true},  // 1500
		{"frank", 100, true}, // 1600: full
		{"grace", 1, false},  // the reserve is full too
	}
	for i, s := range steps {
		if got := b.take(s.who, s.n); got != s.want {
			t.Fatalf("step %d: %s takes %d = %v, want %v (used %d)", i, s.who, s.n, got, s.want, b.used)
		}
	}
	// Alone, a caller may use the reserve: no one is kept out.
	solo := NewBudget(1600, 1600)
	solo.small = 100
	if !solo.take("alice", 1500) {
		t.Fatal("a caller alone was kept out of the reserve")
	}
	b.give("bob", 100)
	if !b.take("grace", 100) {
		t.Fatal("bytes given back were not taken again")
	}
}

// TestClipHeader: a refusal echoes a long header value cut with "…", so
// a cut Content-Type does not read as another type (the eighth hostile
// pass saw `got "multipart/form-data; boundary=-"`, no sign it was cut).
func TestClipHeader(t *testing.T) {
	long := "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW----WebKitFormBoundary"
	for _, tc := range []struct{ in, want string }{
		{"text/plain", "text/plain"},
		{long, long[:maxEcho] + "…"},
		{"text/\xff", "text/?"},
		{strings.Repeat("é", 41), strings.Repeat("é", 40) + "…"},
	} {
		if got := clipHeader(tc.in); got != tc.want {
			t.Errorf("clipHeader(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if msg := errContentType(long).Error(); !strings.Contains(msg, "…") {
		t.Errorf("415 message %q does not say the type was cut", msg)
	}
}
