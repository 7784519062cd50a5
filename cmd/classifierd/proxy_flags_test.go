package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseProxyFlags(t *testing.T) {
	ok := []string{"--config", "mcp.json", "--model", "m"}
	cases := []struct {
		args    []string
		wantErr string
	}{
		{ok, ""},
		{append(ok, "--mcp-listen", "127.0.0.1:0", "--default-exposure", "all"), ""},
		{[]string{"--model", "m"}, "--config is required"},
		{[]string{"--config", "c"}, "--model is required"},
		{append(ok, "--default-exposure", "minimal"), "is not meta-only or all"},
		{append(ok, "--timeout", "0s"), "must be positive"},
		{append(ok, "--max-sessions", "0"), "must be positive"},
		{append(ok, "--log-format", "xml"), "is not text or json"},
		{append(ok, "extra"), "unexpected arguments"},
	}
	for _, tc := range cases {
		_, err := parseProxyFlags(tc.args, io.Discard)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("parseProxyFlags(%v) = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
