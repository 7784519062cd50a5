package main

import (
	"math/rand"
	"strings"
	"testing"
)

func TestCompoundQueries(t *testing.T) {
	qs := []query{
		{Text: "What is the weather in Paris?", Servers: []string{"W"}, Tools: []string{"W/W"}},
		{Text: "Find me a flight to Rome.", Servers: []string{"T"}, Tools: []string{"T/T"}},
		{Text: "I'm hungry, any recipes?", Servers: []string{"R"}, Tools: []string{"R/R"}},
		{Text: "Will it rain tomorrow?", Servers: []string{"W"}, Tools: []string{"W/W"}},
		{Text: "NASA news please", Servers: []string{"N"}, Tools: []string{"N/N"}},
		{Text: "Book a hotel", Servers: []string{"T"}, Tools: []string{"T/T"}},
	}
	out := compoundQueries(qs, 10, rand.New(rand.NewSource(1)))
	if len(out) == 0 || len(out) > len(qs)/2 {
		t.Fatalf("got %d compound queries from %d, want 1..%d (each query used once)", len(out), len(qs), len(qs)/2)
	}
	used := map[string]int{}
	for _, q := range out {
		if q.Kind != "multi" || len(q.Tools) != 2 || len(q.Servers) != 2 || q.Tools[0] == q.Tools[1] {
			t.Errorf("%q: kind %q tools %v servers %v, want two different tools", q.Text, q.Kind, q.Tools, q.Servers)
		}
		for _, s := range qs {
			// Each half is in the text (first letter and final stop may change).
			if strings.Contains(strings.ToLower(q.Text), strings.ToLower(strings.TrimRight(s.Text, ".?! ")[1:])) {
				used[s.Text]++
			}
		}
	}
	if len(used) != 2*len(out) {
		t.Errorf("halves used %v, want each of %d queries once", used, 2*len(out))
	}
	for s, n := range used {
		if n != 1 {
			t.Errorf("%q used %d times", s, n)
		}
	}
	again := compoundQueries(qs, 10, rand.New(rand.NewSource(1)))
	for i := range out {
		if again[i].Text != out[i].Text {
			t.Fatalf("same seed, different output: %q vs %q", again[i].Text, out[i].Text)
		}
	}
	if n := len(compoundQueries(qs, 1, rand.New(rand.NewSource(1)))); n != 1 {
		t.Errorf("n=1 gave %d queries", n)
	}
}

func TestLowerFirst(t *testing.T) {
	for in, want := range map[string]string{
		"Can you help?":     "can you help?",
		"I need a flight":   "I need a flight",
		"I'm looking":       "I'm looking",
		"NASA news":         "NASA news",
		"Is it raining":     "is it raining",
		"already lowercase": "already lowercase",
		"":                  "",
	} {
		if got := lowerFirst(in); got != want {
			t.Errorf("lowerFirst(%q) = %q, want %q", in, got, want)
		}
	}
}
