package state

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsNeverRepeatThePassword: a --state URL is parsed without I/O,
// its errors and its logged form carry no password, and timeouts the URL
// leaves unset are bounded.
func TestOptionsNeverRepeatThePassword(t *testing.T) {
	const pw = "hunter2-secret"
	if _, err := Options("redis://u:" + pw + "@host:6379/notanumber"); err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("bad db: err %v, want an error without the password", err)
	}
	if _, err := Options("postgres://u:" + pw + "@host/1"); err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("bad scheme: err %v, want an error without the password", err)
	}
	if got := Redact("redis://u:" + pw + "@host:6379/2"); strings.Contains(got, pw) || !strings.Contains(got, "host:6379") {
		t.Fatalf("Redact = %q", got)
	}
	if got := Redact(""); got != "memory" {
		t.Fatalf("Redact(\"\") = %q, want memory", got)
	}
	t.Setenv(PasswordEnv, pw)
	opt, err := Options("redis://host:6379/3")
	if err != nil {
		t.Fatal(err)
	}
	if opt.Password != pw || opt.DB != 3 || opt.DialTimeout != 2*time.Second || opt.MaxRetries != 1 {
		t.Fatalf("options %+v: want the password from $%s, db 3, bounded timeouts, one retry", opt, PasswordEnv)
	}
}
