package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testmcp"
)

// TestBackendsDoNotInheritOwnSecrets reproduces the tenth hostile pass's
// secret leak through the real daemon and a real MCP server: the daemon
// runs with the Redis password of --state in $CLASSIFIERD_STATE_PASSWORD
// (as --state's help offers) and the collector's credentials in
// $OTEL_EXPORTER_OTLP_HEADERS, and call_tool reaches a stdio backend
// whose tool answers its environment (npm's server-everything has such a
// tool, get-env). Before, every stdio backend inherited the daemon's whole
// environment, so any caller with the call scope read the password
// (tools/hostile/envleak10a.sh: LEAKED). Now classifierd's own variables
// are left out; the rest of the environment (PATH) and what the server's
// configuration sets are passed as before.
func TestBackendsDoNotInheritOwnSecrets(t *testing.T) {
	bin, _ := binaries(t)
	idx := genIndex(t, "testdata/mini.json")
	dir := t.TempDir()
	tools := filepath.Join(dir, "github.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "get_env", Description: "Show the environment", Env: true}})
	servers := filepath.Join(dir, "mcp.json")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"github": map[string]any{
		"command": testmcp.Binary(t), "args": []string{"--tools", tools},
		"env": map[string]string{"GITHUB_TOKEN": "configured-for-the-backend"}}}})
	if err := os.WriteFile(servers, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	const password, otlp = "redis-password-never-in-a-backend", "authorization=Bearer otlp-credential-never-in-a-backend"
	cmd := exec.Command(bin, "mcp", "--index", idx, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(),
		"--log-level", "warn", "--mcp-servers", servers)
	cmd.Env = append(os.Environ(), "CLASSIFIERD_STATE_PASSWORD="+password, "OTEL_EXPORTER_OTLP_HEADERS="+otlp,
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS="+otlp)
	cmd.Stderr = &syncBuffer{}
	cs := mcpClient(t, &mcp.CommandTransport{Command: cmd}, nil)

	var env string
	deadline := time.Now().Add(30 * time.Second) // the github server connects in the background
	for {
		res := callToolResult(t, cs, "call_tool", map[string]any{"server": "github", "tool": "get_env", "arguments": map[string]any{}})
		env = resultText(res)
		if !res.IsError || !strings.HasPrefix(env, "UNAVAILABLE") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(env, "PATH=") || !strings.Contains(env, "GITHUB_TOKEN=configured-for-the-backend") {
		t.Fatalf("the backend's environment lacks PATH or its configured GITHUB_TOKEN (did the call reach it?):\n%.2000s", env)
	}
	for _, secret := range []string{password, "otlp-credential-never-in-a-backend"} {
		if strings.Contains(env, secret) {
			t.Errorf("a backend's caller read the daemon's secret %q from its environment", secret)
		}
	}
}
