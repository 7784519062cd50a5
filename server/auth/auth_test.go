package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAndLookup(t *testing.T) {
	p := writeFile(t, "# hubs\nhub route,sessions tok-hub-0123456789\n\nops * tok-ops-0123456789abc\n", 0o600)
	ts, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		token, name string
		ok          bool
		scopes      []string
	}{
		{"tok-hub-0123456789", "hub", true, []string{ScopeRoute, ScopeSessions}},
		{"tok-ops-0123456789abc", "ops", true, AllScopes},
		{"tok-hub-012345678", "", false, nil},
		{"", "", false, nil},
	}
	for _, c := range cases {
		id, ok := ts.Lookup(c.token)
		if ok != c.ok || id.Name != c.name || strings.Join(id.Scopes, ",") != strings.Join(c.scopes, ",") {
			t.Errorf("Lookup(%q) = %+v %v, want %s %v %v", c.token, id, ok, c.name, c.ok, c.scopes)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	const secret = "supersecret-token-value"
	cases := []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"readable by others", "a route " + secret + "\n", 0o644, "readable by others"},
		{"two fields", "a " + secret + "\n", 0o600, "want NAME SCOPES TOKEN"},
		{"short token", "a route short\n", 0o600, "shorter than 16"},
		{"unknown scope", "a root " + secret + "\n", 0o600, "unknown scope"},
		{"duplicate name", "a route " + secret + "\na route " + secret + "x\n", 0o600, "used twice"},
		{"empty", "# nothing\n", 0o600, "no tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeFile(t, c.content, c.mode))
			if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrFile saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error echoes the token: %v", err)
			}
		})
	}
	if _, err := Load("/dev/zero"); !errors.Is(err, ErrFile) {
		t.Fatalf("Load(/dev/zero) = %v, want ErrFile", err)
	}
}

func TestReloadKeepsTokensOnError(t *testing.T) {
	p := writeFile(t, "a route tok-a-0123456789abcdef\n", 0o600)
	ts, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("b route tok-b-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := ts.Lookup("tok-a-0123456789abcdef"); ok {
		t.Fatal("removed token still accepted after reload")
	}
	if err := os.WriteFile(p, []byte("broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.Reload(); err == nil {
		t.Fatal("broken file reloaded")
	}
	if id, ok := ts.Lookup("tok-b-0123456789abcdef"); !ok || id.Name != "b" {
		t.Fatal("tokens lost after a failed reload")
	}
}
