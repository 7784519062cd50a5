package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadBodiesHeldToRate: a token holder's Routes whose JSON never ends
// are read and refused 400, and past its rate of refused body bytes
// (httpguard.RefusedBodies: 8 MiB, then 1 MiB a second) refused 429 from
// their heads, with Retry-After and counted in
// classifierd_refused_bodies_past_rate_total, while another identity's
// Routes, and bad bodies of its own, are answered as before. The
// twenty-fourth hostile pass read and refused 18,879 such bodies of 70 KB
// in 10 s, never 429, the daemon at 3.0-3.7 times the client's CPU.
func TestBadBodiesHeldToRate(t *testing.T) {
	post, maddr := bodiesDaemon(t)
	route := func(token, body string) (int, string) { return post("Route", token, body) }
	bad := `{"query":"` + strings.Repeat("a", 70000)
	n, refused := 0, false
	for ; n < 200 && !refused; n++ {
		code, after := route(carolToken, bad)
		switch code {
		case http.StatusBadRequest:
		case http.StatusTooManyRequests:
			refused = true
			if after == "" {
				t.Errorf("429 past the rate without Retry-After")
			}
		default:
			t.Fatalf("bad body %d: %d, want 400 or 429", n, code)
		}
	}
	// 8 MiB of bodies of 70 KB: 117, and those refilled meanwhile.
	if !refused || n < 100 {
		t.Fatalf("after %d bad bodies of 70 KB: refused 429 %v; want 429 after about 117", n, refused)
	}
	if code, _ := route(bobToken, `{"query":"check my github notifications"}`); code != http.StatusOK {
		t.Fatalf("another identity's Route: %d, want 200", code)
	}
	if code, _ := route(bobToken, bad); code != http.StatusBadRequest {
		t.Fatalf("another identity's bad body: %d, want 400", code)
	}
	if v := scrape(t, maddr)["classifierd_refused_bodies_past_rate_total"]; v < 1 {
		t.Fatalf("classifierd_refused_bodies_past_rate_total %v, want at least 1", v)
	}
}

// TestBodyBytesHeldToRate: every request body an identity sends counts
// toward its --body-bytes-per-second, answered or not: GetIndexInfo
// calls padded to 64 KiB of whitespace (the twenty-fifth hostile pass:
// 19,618 of them in 10 s at 6.5 times the client's CPU) are answered
// until the burst is spent, then refused 429 from their heads and
// counted in classifierd_body_bytes_past_rate_total, while another
// identity's calls are answered.
func TestBodyBytesHeldToRate(t *testing.T) {
	post, maddr := bodiesDaemon(t, "--body-bytes-per-second", "65536", "--body-burst", "262144")
	call := func(token string) int {
		code, _ := post("GetIndexInfo", token, "{"+strings.Repeat(" ", 64<<10)+"}")
		return code
	}
	n := 0
	for ; n < 20; n++ {
		code := call(carolToken)
		if code == http.StatusTooManyRequests {
			break
		}
		if code != http.StatusOK {
			t.Fatalf("padded call %d: %d, want 200", n, code)
		}
	}
	// A burst of 256 KiB: four bodies of 64 KiB (and what refilled).
	if n < 3 || n > 6 {
		t.Fatalf("refused 429 after %d bodies of 64 KiB, want after about 4", n)
	}
	if code := call(bobToken); code != http.StatusOK {
		t.Fatalf("another identity: %d, want 200", code)
	}
	if v := scrape(t, maddr)["classifierd_body_bytes_past_rate_total"]; v < 1 {
		t.Fatalf("classifierd_body_bytes_past_rate_total %v, want at least 1", v)
	}
}

// TestBodyBytesSharedByFairShare: eight identities each within their own
// --body-bytes-per-second, together past --all-body-bytes-per-second,
// are refused 429 past their fair share of it (counted in
// classifierd_body_bytes_past_share_total), while another identity's
// Routes are answered: the twenty-seventh hostile pass's eight tokens
// sending padded calls took the daemon's two cores, and another
// identity's 2,000 small Routes took 6.2 s instead of 0.5.
func TestBodyBytesSharedByFairShare(t *testing.T) {
	post, maddr := bodiesDaemon(t, "--all-body-bytes-per-second", "262144", "--body-burst", "262144")
	padded := "{" + strings.Repeat(" ", 64<<10) + "}"
	refused := 0
	for i := range 48 { // 3 MiB from eight identities: past the shared 512 KiB burst, none past its own
		code, _ := post("GetIndexInfo", manyToken(i%8), padded)
		switch code {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("padded call %d: %d, want 200 or 429", i, code)
		}
		if i%4 != 3 {
			continue
		}
		// A Route of bob's for every four padded calls: a 32nd of the
		// bytes (and requests, each weighing at least 1 KiB) of each of
		// the eight, well under the fair share however fast they go.
		if code, _ := post("Route", bobToken, `{"query":"check my github notifications"}`); code != http.StatusOK {
			t.Fatalf("another identity's Route beside the eight (after call %d): %d, want 200", i, code)
		}
	}
	if refused < 8 {
		t.Fatalf("%d of 48 padded calls refused, want most of those past the shared burst", refused)
	}
	if v := scrape(t, maddr)["classifierd_body_bytes_past_share_total"]; v < float64(refused) {
		t.Fatalf("classifierd_body_bytes_past_share_total %v, want %d", v, refused)
	}
}

// manyToken is the token of identity m<i> of bodiesDaemon.
func manyToken(i int) string { return fmt.Sprintf("m%d-0123456789abcdef00", i) }

// bodiesDaemon starts a daemon with --http-listen and the identities
// carol, bob and m0..m7 (route scope; manyToken), and extra flags; post sends a JSON body to
// a method of the classifier service with a token, and returns the
// answer's status and Retry-After. maddr is the metrics address.
func bodiesDaemon(t *testing.T, extra ...string) (post func(method, token, body string) (int, string), maddr string) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	lines := "carol route " + carolToken + "\nbob route " + bobToken + "\n"
	for i := range 8 {
		lines += fmt.Sprintf("m%d route %s\n", i, manyToken(i))
	}
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	startDaemon(t, genIndex(t, "testdata/mini.json"), append([]string{"--auth-token-file", tokens, "--http-listen", addr, "--metrics-listen", maddr}, extra...)...)
	c := &http.Client{Timeout: 30 * time.Second}
	return func(method, token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/classifier.v1.ClassifierService/"+method, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}, maddr
}
