package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/httpguard"
)

// TestHTTPBodyBudget: a body held half-sent on the real --http-listen
// counts against its caller's share of --max-body-bytes-in-flight, so the
// same caller's next body is refused 429 RESOURCE_EXHAUSTED before it is
// read whole; once the first request is gone the next is served. Without
// the budget each body was bounded but their sum was not (32 Routes of
// 3.8 MB at once peaked at 1.3 GB).
func TestHTTPBodyBudget(t *testing.T) {
	addr := freeAddr(t)
	// --timeout 60s: the listener's read timeout (--timeout + 10s) ends
	// the hog's half-sent body and gives its bytes back; at the default
	// 20s a busy machine's first few posts could outlast it (CI saw the
	// loop below find no 429 at a load average of 20). The share is
	// 600,000 bytes of bodies and the two requests' own charge
	// (httpguard.StreamCost each): the hog's 400 KB and the next post's
	// 300 KB do not fit, a post alone does.
	maddr := freeAddr(t)
	startDaemon(t, genIndex(t, "testdata/mini.json"), "--http-listen", addr, "--timeout", "60s", "--metrics-listen", maddr,
		"--max-body-bytes-in-flight", "4000000", "--max-body-bytes-in-flight-per-client", fmt.Sprint(600000+2*httpguard.StreamCost))
	const path = "/classifier.v1.ClassifierService/Route"

	// The hog: declares 500 KB, sends 400 KB, waits.
	hog, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	fmt.Fprintf(hog, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 500000\r\n\r\n", path, addr)
	if _, err := hog.Write(bytes.Repeat([]byte(" "), 400000)); err != nil {
		t.Fatal(err)
	}
	// Post once the hog's 400 KB are read: a post racing them could
	// take the share first and have the hog refused (seen at a load
	// average of 25).
	waitMetric(t, maddr, "classifierd_request_bytes_in_flight", 400000)

	post := func() (int, string) {
		body := `{"query":"` + strings.Repeat("a", 300000) + `"}`
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var msg string
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		// Until the daemon has read the hog's 400 KB, the next body may
		// still fit.
		if code, msg = post(); code == http.StatusTooManyRequests {
			break
		}
	}
	if code != http.StatusTooManyRequests || !strings.Contains(msg, "in flight") {
		t.Fatalf("with 400 KB of the same caller's body held: %d %s, want 429 naming the bytes in flight", code, clipped(msg))
	}
	hog.Close()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, msg = post(); code != http.StatusTooManyRequests {
			break
		}
	}
	if code == http.StatusTooManyRequests {
		t.Fatalf("after the hog went away: %d %s, want its bytes given back", code, clipped(msg))
	}
}

func clipped(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// TestHTTPBodyBudgetTwoHogs: two identities that each fill their share of
// --max-body-bytes-in-flight with stalled bodies (the seventh hostile
// pass: 4 MiB bodies that hold their last byte, then smaller ones to fill
// the rest) leave room for a third identity's small Route: the last
// quarter of the budget is kept for callers that hold little. Before,
// the two shares (half the budget each) filled it and bob got 429 on 40
// calls in 40 until the held bodies timed out.
func TestHTTPBodyBudgetTwoHogs(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\ncarol route "+carolToken+"\nbob route "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	// --timeout 60s: the held bodies outlast the test (the read timeout
	// is --timeout + 10s). A share is half the budget, as by default, and
	// a little more, so that the hogs' last bodies (300 bytes, 512 taken) are refused by the
	// budget, not by their shares, and fill it to less than the 512 bytes
	// bob's first read takes.
	startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", tokens, "--http-listen", addr, "--timeout", "60s",
		"--max-body-bytes-in-flight", "3990000", "--max-body-bytes-in-flight-per-client", "2000000")
	const path = "/classifier.v1.ClassifierService/Route"

	// hold sends a body of size bytes but its last and reports whether
	// the daemon holds it (no answer yet), keeping its connection open.
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	hold := func(token string, size int) bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
			return false
		}
		body := `{"query":"` + strings.Repeat("a", size-12) + `"}`
		go func() {
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
				path, addr, token, len(body))
			_, _ = io.WriteString(c, body[:len(body)-1]) // an error: answered and closed
		}()
		_ = c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			c.Close() // answered (429) or closed
			return false
		}
		mu.Lock()
		held = append(held, c)
		mu.Unlock()
		return true
	}
	var wg sync.WaitGroup
	holds := map[string]*int{}
	for _, tok := range []string{aliceToken, carolToken} {
		n := new(int)
		holds[tok] = n
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, size := range []int{1000000, 250000, 60000, 15000, 4000, 1000, 300} {
				for i := 0; i < 8 && hold(tok, size); i++ {
					*n++
				}
			}
		}()
	}
	wg.Wait()
	if *holds[aliceToken] == 0 || *holds[carolToken] == 0 {
		t.Fatalf("bodies held: alice %d, carol %d; want both hogs holding", *holds[aliceToken], *holds[carolToken])
	}

	route := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(`{"query":"list my open github pull requests"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Bob's small calls are all answered.
	for i := 0; i < 10; i++ {
		if code, msg := route(bobToken); code != http.StatusOK {
			t.Fatalf("bob's small Route %d with alice (%d bodies) and carol (%d) holding theirs: %d %s, want 200",
				i, *holds[aliceToken], *holds[carolToken], code, clipped(msg))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
