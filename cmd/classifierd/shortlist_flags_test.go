package main

import (
	"io"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/rank"
)

func TestShortlistFlag(t *testing.T) {
	base := []string{"--model", "m", "--index", "x.idx"}
	for _, tc := range []struct {
		args []string
		want int // DomainConfig.ShortlistFrom
	}{
		{nil, rank.DefaultShortlistFrom},
		{[]string{"--shortlist-from", "500"}, 500},
		{[]string{"--shortlist-from", "0"}, -1}, // never
	} {
		cfg, err := parseFlags(append(base, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := cfg.domain().ShortlistFrom; got != tc.want {
			t.Errorf("%v: ShortlistFrom %d, want %d", tc.args, got, tc.want)
		}
	}
	if _, err := parseFlags(append(base, "--shortlist-from", "-3"), io.Discard); err == nil || !strings.Contains(err.Error(), "--shortlist-from") {
		t.Fatalf("--shortlist-from -3: got %v", err)
	}
}
