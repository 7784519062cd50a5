package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
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
	// loop below find no 429 at a load average of 20).
	startDaemon(t, genIndex(t, "testdata/mini.json"), "--http-listen", addr, "--timeout", "60s",
		"--max-body-bytes-in-flight", "4000000", "--max-body-bytes-in-flight-per-client", "600000")
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
