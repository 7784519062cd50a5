package listeners

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// TestHeadLines: a head's lines are counted across reads up to its blank
// line, its body is not, and the count starts again at the next head.
func TestHeadLines(t *testing.T) {
	fields := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString("h: a\r\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name  string
		reads []string
		over  bool
	}{
		{"a small head", []string{"GET / HTTP/1.1\r\nHost: x\r\n\r\n"}, false},
		{"256 fields", []string{"GET / HTTP/1.1\r\n" + fields(256) + "\r\n"}, false},
		{"257 fields", []string{"GET / HTTP/1.1\r\n" + fields(257) + "\r\n"}, true},
		{"bare LF lines", []string{"GET / HTTP/1.1\n" + strings.ReplaceAll(fields(300), "\r\n", "\n")}, true},
		{"split across reads", []string{"GET / HTTP/1.1\r\n" + fields(200), fields(100)}, true},
		{"a blank line split across reads", []string{"GET / HTTP/1.1\r\n" + fields(10) + "\r", "\n" + strings.Repeat("\n", 1000)}, false},
		{"a body of many lines", []string{"POST / HTTP/1.1\r\n" + fields(10) + "\r\n" + strings.Repeat("x\r\n", 5000)}, false},
		{"a head that never ends", []string{"GET / HTTP/1.1\r\n" + fields(6500)}, true},
	} {
		c := &headConn{inHead: true}
		over := false
		for _, r := range tc.reads {
			if c.inHead && c.scan([]byte(r)) {
				over = true
			}
		}
		if over != tc.over {
			t.Errorf("%s: over %v, want %v", tc.name, over, tc.over)
		}
	}
	// After a request, the next head is counted from nothing.
	c := &headConn{inHead: true}
	c.scan([]byte("GET / HTTP/1.1\r\n" + fields(200) + "\r\n"))
	c.nextHead()
	if c.scan([]byte("GET / HTTP/1.1\r\n" + fields(200) + "\r\n")) {
		t.Error("the second head of 200 fields counted with the first")
	}
}

// TestHeadLinesRefusal: the refusal is a well-formed 431.
func TestHeadLinesRefusal(t *testing.T) {
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(headLinesRefusal)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 100)
	n, _ := resp.Body.Read(b)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || int64(n) != resp.ContentLength || !strings.Contains(string(b[:n]), "256") {
		t.Errorf("refusal %d, body %q (Content-Length %d)", resp.StatusCode, b[:n], resp.ContentLength)
	}
}
