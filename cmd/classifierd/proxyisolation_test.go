package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/reload"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpproxy"
	"github.com/classifierd/classifierd/mcpsrc"
)

// TestProxyIsolation puts the reference memory server (npm, pinned) behind
// the real proxy with tokens for alice, bob and carol: alice stores a
// secret with create_entities and bob reads the graph with read_graph.
// Under per-identity (the default with tokens) bob does not see it; under
// an explicit shared he does, as the docs say. The backends are bounded
// (--max-backends) and reaped when idle (--backend-idle-timeout).
func TestProxyIsolation(t *testing.T) {
	node, script := testmcp.MemoryServer(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,call "+aliceToken+"\nbob route,call "+bobToken+"\ncarol route,call "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "alice bank PIN 4921"
	for _, tc := range []struct {
		name      string
		isolation string // "" sets none: the default
		memFile   string // MEMORY_FILE_PATH, under the test's directory
		bobSees   bool
	}{
		{"per-identity by default with tokens", "", "memory-${identity}.jsonl", false},
		{"explicit per-identity", "per-identity", "memory-${identity}.jsonl", false},
		{"explicit shared", "shared", "memory.jsonl", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			entry := map[string]any{"command": node, "args": script,
				"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, tc.memFile)}}
			if tc.isolation != "" {
				entry["isolation"] = tc.isolation
			}
			config := writeConfig(t, dir, map[string]any{"memory": entry})
			addr := freeAddr(t)
			d := startProxyHTTP(t, config, addr, "--auth-token-file", tokens, "--max-backends", "2", "--backend-idle-timeout", "15s")
			endpoint := "http://" + addr + listeners.MCPPath
			alice := mustConnect(t, endpoint, bearerClient(aliceToken))
			bob := mustConnect(t, endpoint, bearerClient(bobToken))

			create := map[string]any{"server": "memory", "tool": "create_entities", "arguments": map[string]any{
				"entities": []map[string]any{{"name": "alice", "entityType": "person", "observations": []string{secret}}}}}
			if res := callToolResult(t, alice, mcpproxy.ToolCall, create); res.IsError {
				t.Fatalf("alice's create_entities: %s", resultText(res))
			}
			read := map[string]any{"server": "memory", "tool": "read_graph", "arguments": map[string]any{}}
			if res := eventually(t, alice, read); !strings.Contains(resultText(res), secret) {
				t.Fatalf("alice's read_graph: %s, want her own entity", resultText(res))
			}
			res := callToolResult(t, bob, mcpproxy.ToolCall, read)
			if res.IsError {
				t.Fatalf("bob's read_graph: %s", resultText(res))
			}
			if got := strings.Contains(resultText(res), secret); got != tc.bobSees {
				t.Fatalf("bob's read_graph %s; bob sees alice's entity: %v, want %v", resultText(res), got, tc.bobSees)
			}
			procs, rss := serverProcs(t, d.cmd.Process.Pid)
			t.Logf("%s: %d server processes under the proxy, %.0f MB RSS", tc.name, procs, float64(rss)/(1<<20))
			if tc.bobSees {
				if procs != 1 {
					t.Fatalf("shared: %d server processes, want 1", procs)
				}
				return
			}
			// The one that lists tools, alice's and bob's.
			if procs != 3 {
				t.Fatalf("per-identity: %d server processes, want 3 (tools, alice, bob)", procs)
			}
			// --max-backends 2: carol's call would start a third backend.
			carol := mustConnect(t, endpoint, bearerClient(carolToken))
			if res := callToolResult(t, carol, mcpproxy.ToolCall, read); !res.IsError || !strings.HasPrefix(resultText(res), "RESOURCE_EXHAUSTED") {
				t.Fatalf("carol's call past --max-backends: %s, want RESOURCE_EXHAUSTED", resultText(res))
			}
			// Once alice's and bob's backends have been idle for
			// --backend-idle-timeout, they are stopped and carol's starts.
			if res := eventually(t, carol, read); strings.Contains(resultText(res), secret) {
				t.Fatalf("carol sees alice's entity: %s", resultText(res))
			}
			if procs, _ := serverProcs(t, d.cmd.Process.Pid); procs > 3 {
				t.Fatalf("%d server processes after reaping, want at most 3", procs)
			}
			// Alice's data outlives her stopped backend: it is in her
			// file, which her next backend reads.
			if res := eventually(t, alice, read); !strings.Contains(resultText(res), secret) {
				t.Fatalf("alice's read_graph after her backend was stopped: %s, want her entity from her file", resultText(res))
			}
		})
	}
}

// eventually calls call_tool with args until it is not refused
// RESOURCE_EXHAUSTED, for 60s; the answer must not be another error.
func eventually(t *testing.T, cs *mcp.ClientSession, args any) *mcp.CallToolResult {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res := callToolResult(t, cs, mcpproxy.ToolCall, args)
		switch {
		case !res.IsError:
			return res
		case !strings.HasPrefix(resultText(res), "RESOURCE_EXHAUSTED") || time.Now().After(deadline):
			t.Fatalf("call_tool %v: %s", args, resultText(res))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// writeConfig writes an mcpServers configuration into dir.
func writeConfig(t *testing.T, dir string, servers map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverProcs counts the processes pid started and sums their resident
// memory.
func serverProcs(t *testing.T, pid int) (n int, rss int64) {
	t.Helper()
	// Each thread lists the children it started.
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no tasks of %d: %v", pid, err)
	}
	var all []string
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err == nil {
			all = append(all, strings.Fields(string(b))...)
		}
	}
	for _, f := range all {
		c, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		n++
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c)); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if fs := strings.Fields(l); len(fs) == 3 && fs[0] == "VmRSS:" {
					kb, _ := strconv.ParseInt(fs[1], 10, 64)
					rss += kb << 10
				}
			}
		}
	}
	return n, rss
}

// TestDaemonRefusesPerIdentity: the daemon's call_tool has one connection
// per server, so it refuses a configuration that asks for more isolation
// than that rather than serving it shared.
func TestDaemonRefusesPerIdentity(t *testing.T) {
	for _, tc := range []struct {
		json       string
		identified bool
		want       string
	}{
		{`{"mcpServers":{"m":{"command":"x"}}}`, false, ""},
		{`{"mcpServers":{"m":{"command":"x","isolation":"shared"}}}`, false, ""},
		{`{"mcpServers":{"m":{"command":"x","isolation":"shared"}}}`, true, ""},
		// With tokens, an entry that says nothing would share alice's
		// memory graph with bob: it must say so.
		{`{"mcpServers":{"m":{"command":"x"}}}`, true, `--mcp-servers: server "m" sets no "isolation"`},
		{`{"mcpServers":{"a":{"command":"x","isolation":"shared"},"m":{"command":"x"}}}`, true, `server "m" sets no "isolation"`},
		{`{"mcpServers":{"m":{"command":"x","isolation":"per-identity"}}}`, false, `--mcp-servers: server "m" has "isolation": "per-identity", which only classifierd proxy serves`},
		{`{"mcpServers":{"m":{"command":"x","env":{"F":"${identity}"}}}}`, false, `server "m" uses ${identity} but is shared`},
	} {
		mc, err := mcpsrc.ParseConfig([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		err = reload.SharedOnly(mc, "--mcp-servers", tc.identified)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s (identified %v): %v, want %q", tc.json, tc.identified, err, tc.want)
		}
	}
}

// TestDaemonRefusesUnsaidIsolation starts the real daemon with a token
// file and a --mcp-servers entry that sets no isolation: it must refuse to
// start, naming the entry and the proxy's per-identity option, instead of
// letting one caller's call_tool read what another's stored.
func TestDaemonRefusesUnsaidIsolation(t *testing.T) {
	bin, _ := binaries(t)
	idx := genIndex(t, "testdata/mini.json")
	dir := t.TempDir()
	servers := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(servers, []byte(`{"mcpServers":{"memory":{"command":"`+testmcp.Binary(t)+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,call 0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--index", idx, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(),
		"--listen", freeAddr(t), "--mcp-listen", freeAddr(t), "--auth-token-file", tokens, "--mcp-servers", servers).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("classifierd started with an entry that sets no isolation:\n%s", out)
	}
	last := lastLine(string(out))
	if err == nil || !strings.Contains(last, `server "memory" sets no "isolation"`) || !strings.Contains(last, "per-identity") {
		t.Fatalf("err %v, last line %q: want a refusal naming the entry and per-identity", err, last)
	}
}
