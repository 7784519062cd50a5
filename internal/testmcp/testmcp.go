// Package testmcp is test support for MCP: it builds the test MCP server in
// ./server (a real server made with the official Go SDK, whose tool list
// follows a JSON file) and writes its tool files.
package testmcp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Tool is one tool the test server serves.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Fail makes every call of the tool answer a tool error (isError).
	Fail bool `json:"fail,omitempty"`
}

// Binary builds the test server into t.TempDir() and returns its path
// (the Go build cache makes every build after the first a link).
func Binary(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "testmcp")
	cmd := exec.Command("go", "build", "-o", bin, "./server")
	cmd.Dir = filepath.Dir(file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build test MCP server: %v\n%s", err, out)
	}
	return bin
}

// WriteTools replaces the tool file at path atomically (the server sees a
// whole file or the old one).
func WriteTools(t testing.TB, path string, tools []Tool) {
	t.Helper()
	data, err := json.Marshal(tools)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
