package listeners

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenUnix: a Unix socket is made 0600, a stale one is replaced,
// one a live process listens on and any other file are refused.
func TestListenUnix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.sock")
	lis, err := Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if _, err := Listen("unix://" + path); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("second listener on a live socket: %v, want refused", err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	lis.Close() // stale now
	lis, err = Listen("unix://" + path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	lis.Close()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listen over a file: %v, want refused", err)
	}
	if _, err := Listen("unix://"); err == nil {
		t.Fatal("unix:// without a path accepted")
	}
}

func TestCheckQuery(t *testing.T) {
	for q, bad := range map[string]bool{"": false, "a=b&c=d": false, "a=%zz": true, "=x": true, "a=%ff": true,
		"userId.x=1": true, "context=a.b&category=c": false} {
		if got := checkQuery(q) != ""; got != bad {
			t.Errorf("checkQuery(%q) = %q, want bad %v", q, checkQuery(q), bad)
		}
	}
}
