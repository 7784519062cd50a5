package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpproxy"
	"github.com/classifierd/classifierd/mcpsrc"
)

// TestProxyBackendPlacesGiveWay is the eleventh hostile pass's finding on
// the proxy's per-identity backends: identities within their own share
// (--max-backends-per-client, by default one of each per-identity server)
// filled --max-backends, and every other identity's calls to a
// per-identity server were refused RESOURCE_EXHAUSTED until their backends
// had been idle for --backend-idle-timeout (10 minutes; two hog identities
// of three such servers each filled --max-backends 6 and kept a third out,
// renewable with one call every few minutes). Now, when every place is
// taken, an idle backend of the identity holding the most (at least two
// more than the caller) is stopped and the caller's starts. Here, real
// proxy and the npm memory server, two per-identity servers and
// --max-backends 2: alice holds both places; bob's call is answered and
// sees none of alice's data; alice, now holding one as bob does, is
// refused her second place back (no place goes back and forth); her data
// outlived her stopped backend, in her file.
func TestProxyBackendPlacesGiveWay(t *testing.T) {
	node, script := testmcp.MemoryServer(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,call "+aliceToken+"\nbob route,call "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "alice bank PIN 4921"
	servers := map[string]any{}
	for _, name := range []string{"mem1", "mem2"} {
		servers[name] = map[string]any{"command": node, "args": script, "isolation": "per-identity",
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, name+"-${identity}.jsonl")}}
	}
	config := writeConfig(t, dir, servers)
	addr := freeAddr(t)
	startProxyHTTP(t, config, addr, "--auth-token-file", tokens, "--max-backends", "2", "--backend-idle-timeout", "10m")
	endpoint := "http://" + addr + listeners.MCPPath
	alice := mustConnect(t, endpoint, bearerClient(aliceToken))
	bob := mustConnect(t, endpoint, bearerClient(bobToken))
	read := func(server string) map[string]any {
		return map[string]any{"server": server, "tool": "read_graph", "arguments": map[string]any{}}
	}

	create := map[string]any{"server": "mem1", "tool": "create_entities", "arguments": map[string]any{
		"entities": []map[string]any{{"name": "alice", "entityType": "person", "observations": []string{secret}}}}}
	if res := eventually(t, alice, create); res.IsError {
		t.Fatalf("alice's create_entities: %s", resultText(res))
	}
	if res := eventually(t, alice, read("mem2")); res.IsError {
		t.Fatalf("alice's mem2 read_graph: %s", resultText(res))
	}
	// alice holds both places; before, bob was refused for 10 minutes.
	res := callToolResult(t, bob, mcpproxy.ToolCall, read("mem1"))
	if res.IsError {
		t.Fatalf("bob's read_graph with alice holding every place: %s, want an answer (her least recently used idle backend gives way)", resultText(res))
	}
	if strings.Contains(resultText(res), secret) {
		t.Fatalf("bob sees alice's entity: %s", resultText(res))
	}
	// One place each now: alice does not take hers back from bob.
	if res := callToolResult(t, alice, mcpproxy.ToolCall, read("mem1")); !res.IsError || !strings.HasPrefix(resultText(res), "RESOURCE_EXHAUSTED") {
		t.Fatalf("alice's second place back while bob holds one: %s, want RESOURCE_EXHAUSTED", resultText(res))
	}
	// Her data is in her file: her remaining backend (mem2) is hers, and
	// mem1's file kept what her stopped backend wrote.
	b, err := os.ReadFile(filepath.Join(dir, "mem1-"+mcpsrc.IdentityKey("alice")+".jsonl"))
	if err != nil || !strings.Contains(string(b), secret) {
		t.Fatalf("alice's mem1 file after her backend was stopped: %q %v", b, err)
	}
}
