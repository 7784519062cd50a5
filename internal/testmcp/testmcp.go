// Package testmcp is test support for MCP: it builds the test MCP server in
// ./server (a real server made with the official Go SDK, whose tool list
// follows a JSON file) and writes its tool files, and installs the
// reference memory server from npm (MemoryServer).
package testmcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Tool is one tool the test server serves.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Fail makes every call of the tool answer a tool error (isError).
	Fail bool `json:"fail,omitempty"`
	// Env makes the tool answer its process's environment, a NAME=value a
	// line.
	Env bool `json:"env,omitempty"`
	// Bytes makes the tool answer a text of this many bytes.
	Bytes int `json:"bytes,omitempty"`
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

// MemoryServer returns the command that runs the reference MCP memory
// server (@modelcontextprotocol/server-memory from npm, the version pinned
// with its integrity hash in memory/package-lock.json), a stateful server
// whose knowledge graph lives in the file MEMORY_FILE_PATH names. It is
// installed with `npm ci` into <root>/.cache/mcp-memory, by `make
// test-programs` or here the first time a test needs it; a test fails,
// never skips, when node or npm is missing.
func MemoryServer(t testing.TB) (command string, args []string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not found: the memory server test needs Node.js and npm (Debian packages nodejs, npm)")
	}
	memoryOnce.Do(func() { memoryDir, memoryErr = installMemory() })
	if memoryErr != nil {
		t.Fatal(memoryErr)
	}
	return node, []string{filepath.Join(memoryDir, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")}
}

var (
	memoryOnce sync.Once
	memoryDir  string
	memoryErr  error
)

// installMemory runs npm ci for memory/package-lock.json in
// <root>/.cache/mcp-memory unless that lock is installed there already.
func installMemory() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "memory")
	dir := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "mcp-memory")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err
	}
	if have, err := os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && len(have) > 0 {
		if installed, err := os.ReadFile(filepath.Join(dir, "package-lock.json")); err == nil && bytes.Equal(installed, lock) {
			return dir, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--silent")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci for the memory server in %s: %v\n%s", dir, err, out)
	}
	return dir, nil
}
