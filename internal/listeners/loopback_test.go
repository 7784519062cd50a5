package listeners

import "testing"

// Host names are case-insensitive and may end with the root's dot: a
// loopback listener accepts localhost in any case and fully qualified,
// and still refuses names that only contain it.
func TestLoopbackName(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"localhost:9090", true},
		{"LOCALHOST:9090", true},
		{"LocalHost", true},
		{"localhost.", true},
		{"localhost.:9090", true},
		{"LOCALHOST.:9090", true},
		{"127.0.0.1:9090", true},
		{"127.1.2.3", true},
		{"[::1]:9090", true},
		{"::1", true},
		{"localhost..", false},
		{"localhost.evil.example", false},
		{"evil.localhost:9090", false},
		{"mylocalhost", false},
		{"evil.example:9090", false},
		{"10.0.0.1:9090", false},
		{"", false},
	} {
		if got := loopbackName(tc.host); got != tc.want {
			t.Errorf("loopbackName(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}
