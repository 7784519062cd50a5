package tokens

import (
	"strings"
	"sync"
	"testing"
)

func TestCount(t *testing.T) {
	// The test runs with a proxy that goes nowhere: loading must not touch the network.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	c, err := NewCounter()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text string
		want int
	}{
		{"hello world", 2},
		{"", 0},
		{"list_notifications", 2},
	}
	for _, tc := range cases {
		if got := c.Count(tc.text); got != tc.want {
			t.Errorf("Count(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
	short := c.CountTool("read_file", "Read a file", `{"type":"object"}`)
	long := c.CountTool("read_file", strings.Repeat("Read a file. ", 20), `{"type":"object"}`)
	if short <= 5 || long <= short {
		t.Fatalf("CountTool short=%d long=%d", short, long)
	}
	if got := ToolText("x", "y", "not json"); got != `{"name":"x","description":"y","input_schema":{}}` {
		t.Fatalf("ToolText = %s", got)
	}
}

func TestConcurrent(t *testing.T) {
	c, err := NewCounter()
	if err != nil {
		t.Fatal(err)
	}
	want := c.Count("the quick brown fox jumps over the lazy dog")
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if got := c.Count("the quick brown fox jumps over the lazy dog"); got != want {
					t.Errorf("got %d, want %d", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkCountTool(b *testing.B) {
	c, err := NewCounter()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.CountTool("create_pull_request", "Create a pull request from a head branch into a base branch.", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"}}}`)
	}
}
