package reload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		index   string
		cfg     Config
		wantErr string
	}{
		{"i.idx", Config{}, ""},
		{"", Config{MCPConfig: "m.json", MCPTimeout: time.Second}, ""},
		{"", Config{}, "--index or --mcp-config"},
		{"i.idx", Config{Catalog: "c.json"}, "--catalog needs --mcp-config"},
		{"i.idx", Config{Interval: -1}, "must not be negative"},
		{"", Config{MCPConfig: "m.json"}, "--mcp-timeout"},
	} {
		err := tc.cfg.Validate(tc.index)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%q %+v: got %v, want %q", tc.index, tc.cfg, err, tc.wantErr)
		}
	}
}

// TestStampFileSeesAReplacement: a file replaced by rename (as gen-index
// writes) has another stamp; an unchanged one the same.
func TestStampFileSeesAReplacement(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "i.idx")
	if err := os.WriteFile(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := stampFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := stampFile(path); b != a {
		t.Fatal("an unchanged file changed stamp")
	}
	tmp := filepath.Join(dir, "new")
	if err := os.WriteFile(tmp, []byte("two!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if b, _ := stampFile(path); b == a {
		t.Fatal("a replaced file kept its stamp")
	}
}

// TestRebuildBudget: rebuilds for changed MCP tools spend a budget of
// texts that refills at RebuildEmbedPerMinute; one that needs more than
// it holds waits for them (a server re-listing new descriptions without
// end rebuilt every time: the thirteenth hostile pass).
func TestRebuildBudget(t *testing.T) {
	var r Reloader
	now := time.Unix(1_700_000_000, 0)
	if w := r.spend(RebuildEmbedBurst-10, now); w != 0 {
		t.Fatalf("a full budget: wait %v", w)
	}
	if w := r.spend(70, now); w != 30*time.Second {
		t.Fatalf("10 left, 70 wanted at %d a minute: wait %v, want 30s", RebuildEmbedPerMinute, w)
	}
	if w := r.spend(70, now.Add(30*time.Second)); w != 0 {
		t.Fatalf("after the wait: %v", w)
	}
}
