package main

import "testing"

func TestStepsIn(t *testing.T) {
	steps := query{Servers: []string{"a", "b", "c"}, ServerSteps: [][]string{{"a"}, {"b", "c"}}}
	plain := query{Servers: []string{"a", "b"}}
	tests := []struct {
		name    string
		q       query
		got     []string
		in, top bool
	}{
		{"every step met", steps, []string{"c", "x", "a"}, true, true},
		{"one alternative is enough", steps, []string{"a", "b"}, true, true},
		{"a step unmet", steps, []string{"x", "a"}, false, false},
		{"no steps: every gold server", plain, []string{"b", "a"}, true, true},
		{"no steps: one missing", plain, []string{"a", "x"}, false, true},
		{"nothing returned", plain, nil, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepsIn(tc.q, tc.got); got != tc.in {
				t.Errorf("stepsIn = %v, want %v", got, tc.in)
			}
			top := len(tc.got) > 0 && stepsAny(tc.q, tc.got[0])
			if top != tc.top {
				t.Errorf("top server right = %v, want %v", top, tc.top)
			}
		})
	}
}
