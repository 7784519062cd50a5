package terminal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLogsOfIdentity: an identity's logs are its own directory under the
// logs directory; a name that cannot be one directory (a path, "..", a
// CN with spaces) has no logs at all, never the shared directory's.
func TestLogsOfIdentity(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"s.log", "alice/s.log", "cert:bob/s.log"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l := Logs{Dir: dir}
	for _, tc := range []struct {
		identity, want string
	}{
		{"alice", "alice/s.log"},
		{"cert:bob", "cert:bob/s.log"},
		{"carol", ""},
		{"..", ""},
		{"../alice", ""},
		{"a/../alice", ""},
		{"", ""},
		{".", ""},
		{"cert:Bob Smith", ""},
		{"/alice", ""},
	} {
		tail, err := l.Of(tc.identity).ReadTail("s")
		switch {
		case tc.want == "" && !errors.Is(err, ErrSessionNotFound):
			t.Errorf("Of(%q): %q, %v; want not found", tc.identity, tail.Data, err)
		case tc.want != "" && (err != nil || string(tail.Data) != tc.want):
			t.Errorf("Of(%q): %q, %v; want %q", tc.identity, tail.Data, err, tc.want)
		}
	}
}
