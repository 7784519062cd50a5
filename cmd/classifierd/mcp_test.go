package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/mcpserver"
)

// These tests run the real binary with the real model and drive it with
// the official MCP Go SDK's client: over stdio (classifierd mcp) and over
// streamable HTTP (--mcp-listen beside gRPC).

// mcpClient returns an SDK client session closed at the end of the test.
func mcpClient(t *testing.T, tr mcp.Transport, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "classifierd-test", Version: "1"}, opts).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and decodes its structured result into out; it
// fails the test on a protocol error or a tool error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) {
	t.Helper()
	res := callToolResult(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s: tool error %s", name, resultText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, b, err)
	}
}

func callToolResult(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wantToolError checks that a call fails as a tool error (not a protocol
// error) whose text starts with the contract's reason.
func wantToolError(t *testing.T, cs *mcp.ClientSession, name string, args any, reason string) {
	t.Helper()
	res := callToolResult(t, cs, name, args)
	if !res.IsError || !strings.HasPrefix(resultText(res), reason+": ") {
		t.Fatalf("%s(%v): isError %v %q, want a tool error starting %s", name, args, res.IsError, resultText(res), reason)
	}
}

func listToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func TestMCPStdio(t *testing.T) {
	bin, _ := binaries(t)
	idx := genIndex(t, "testdata/mini.json")
	state := t.TempDir()
	logs := filepath.Join(state, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	// A real MCP server standing for the catalog's github server, so
	// call_tool has somewhere to call (its tools answer their own name).
	githubTools := filepath.Join(state, "github.json")
	testmcp.WriteTools(t, githubTools, []testmcp.Tool{{Name: "list_notifications", Description: "List notifications"},
		{Name: "create_issue", Description: "Create an issue"}})
	servers := filepath.Join(state, "mcp.json")
	cfgJSON, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"github": map[string]any{"command": testmcp.Binary(t),
		"args": []string{"--tools", githubTools}}}})
	if err := os.WriteFile(servers, cfgJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp", "--index", idx, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(),
		"--terminal", "--terminal-logs", logs, "--terminal-db", filepath.Join(state, "events.db"), "--log-level", "warn",
		"--mcp-servers", servers)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs := mcpClient(t, &mcp.CommandTransport{Command: cmd}, nil)

	t.Run("tools with schemas", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
			// call_tool answers what the called tool answers: no schema of its own.
			if tl.InputSchema == nil || (tl.OutputSchema == nil) != (tl.Name == "call_tool") || tl.Description == "" {
				t.Errorf("%s: input schema %v, output schema %v, description %q", tl.Name, tl.InputSchema, tl.OutputSchema, tl.Description)
			}
		}
		slices.Sort(names)
		want := []string{"analyze_prompt", "call_tool", "detect_input_prompt", "infer_expected_input", "report_use", "route", "search_tools", "track_input_event"}
		if !slices.Equal(names, want) {
			t.Fatalf("tools = %v, want %v", names, want)
		}
	})
	t.Run("search_tools ranks the right tool first", func(t *testing.T) {
		var out mcpserver.SearchToolsOutput
		callTool(t, cs, "search_tools", map[string]any{"query": "open a bug report in the repository", "k": 3}, &out)
		if len(out.Tools) == 0 || len(out.Tools) > 3 {
			t.Fatalf("got %d tools, want 1-3: %+v", len(out.Tools), out.Tools)
		}
		top := out.Tools[0]
		if top.Server != "github" || top.Name != "create_issue" || top.Description == "" || top.Evidence == "" {
			t.Fatalf("top = %+v, want github create_issue with description and evidence", top)
		}
		for i := 1; i < len(out.Tools); i++ {
			if out.Tools[i].Score > out.Tools[i-1].Score {
				t.Fatalf("not ranked by score: %+v", out.Tools)
			}
		}
		if top.Confidence <= out.Tools[len(out.Tools)-1].Confidence && len(out.Tools) > 1 {
			t.Fatalf("top confidence %v not above the last %v", top.Confidence, out.Tools[len(out.Tools)-1].Confidence)
		}
	})
	t.Run("call_tool calls a tool found by search_tools", func(t *testing.T) {
		var out mcpserver.SearchToolsOutput
		callTool(t, cs, "search_tools", map[string]any{"query": "open a bug report in the repository", "k": 1}, &out)
		if len(out.Tools) != 1 {
			t.Fatalf("got %+v", out.Tools)
		}
		var res *mcp.CallToolResult
		deadline := time.Now().Add(20 * time.Second) // the github server connects in the background
		for {
			res = callToolResult(t, cs, "call_tool", map[string]any{"server": out.Tools[0].Server, "tool": out.Tools[0].Name,
				"arguments": map[string]any{"title": "crash on start"}})
			if !res.IsError || !strings.HasPrefix(resultText(res), "UNAVAILABLE") || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if res.IsError || resultText(res) != "create_issue" {
			t.Fatalf("call_tool: isError %v %q, want the github server's create_issue answer", res.IsError, resultText(res))
		}
		wantToolError(t, cs, "call_tool", map[string]any{"server": "nowhere", "tool": "x"}, "NOT_FOUND")
		// In the catalog but not in --mcp-servers.
		wantToolError(t, cs, "call_tool", map[string]any{"server": "filesystem", "tool": "read_file"}, "NOT_FOUND")
		// The server's own error for a tool it does not have.
		wantToolError(t, cs, "call_tool", map[string]any{"server": "github", "tool": "no_such_tool"}, "UNKNOWN")
	})
	t.Run("search_tools bad input is a tool error", func(t *testing.T) {
		wantToolError(t, cs, "search_tools", map[string]any{"query": ""}, "INVALID_ARGUMENT")
		wantToolError(t, cs, "search_tools", map[string]any{"query": "x", "k": 1000}, "INVALID_ARGUMENT")
		wantToolError(t, cs, "search_tools", map[string]any{"query": "x", "k": -1}, "INVALID_ARGUMENT")
		// Over --max-text-bytes (256 KiB), under the message limit.
		wantToolError(t, cs, "search_tools", map[string]any{"query": strings.Repeat("word ", 60_000)}, "INVALID_ARGUMENT")
	})
	t.Run("route a conversation", func(t *testing.T) {
		var out mcpserver.RouteOutput
		callTool(t, cs, "route", map[string]any{"messages": []map[string]string{
			{"role": "user", "content": "Check my GitHub notifications"},
			{"role": "assistant", "content": "You have 3 new notifications."},
			{"role": "user", "content": "open an issue about the first one"}}}, &out)
		if len(out.Servers) == 0 || out.Servers[0].ID != "github" || len(out.Tools) == 0 || out.Tools[0].Server != "github" {
			t.Fatalf("servers %+v tools %+v, want github first", out.Servers, out.Tools)
		}
		var fs mcpserver.RouteOutput
		callTool(t, cs, "route", map[string]any{"query": "read the file config.yaml from my disk", "max_servers": 1}, &fs)
		if len(fs.Servers) != 1 || fs.Servers[0].ID != "filesystem" || fs.TokensSaved <= 0 {
			t.Fatalf("servers %+v saved %v%%, want filesystem alone and tokens saved", fs.Servers, fs.TokensSaved)
		}
		var none mcpserver.RouteOutput
		callTool(t, cs, "route", map[string]any{"query": "what is the capital of France", "on_no_match": "meta"}, &none)
		if none.Abstained && none.AppliedPolicy != "meta" {
			t.Fatalf("abstained with policy %q, want meta", none.AppliedPolicy)
		}
		wantToolError(t, cs, "route", map[string]any{"query": "x", "on_no_match": "sometimes"}, "INVALID_ARGUMENT")
	})
	t.Run("analyze_prompt", func(t *testing.T) {
		var out mcpserver.AnalyzePromptOutput
		callTool(t, cs, "analyze_prompt", map[string]any{"prompt": "read the file config.yaml from my disk"}, &out)
		if !slices.Contains(out.Categories, "filesystem") || len(out.Scores) == 0 {
			t.Fatalf("got %+v, want filesystem", out)
		}
		wantToolError(t, cs, "analyze_prompt", map[string]any{"prompt": "x", "session_id": "nobody"}, "NOT_FOUND")
		wantToolError(t, cs, "analyze_prompt", map[string]any{"prompt": "x", "mode": "sideways"}, "INVALID_ARGUMENT")
	})
	t.Run("terminal contract", func(t *testing.T) {
		log := "Connecting to db...\n[sudo] password for alice: "
		if err := os.WriteFile(filepath.Join(logs, "t1.log"), []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
		var det mcpserver.DetectInputPromptOutput
		callTool(t, cs, "detect_input_prompt", map[string]any{"session_id": "t1"}, &det)
		p := det.Prompt
		if !det.Detected || p == nil || p.PromptType != "password" || p.Confidence < 0.7 || p.MatchedPattern == "" ||
			p.FilePosition != int64(strings.LastIndex(log, "\n")+1) || p.IsDangerous {
			t.Fatalf("got %+v %+v, want a password prompt at the last line", det, p)
		}
		if _, err := time.Parse(time.RFC3339Nano, p.Timestamp); err != nil {
			t.Fatalf("timestamp %q: %v", p.Timestamp, err)
		}
		var danger mcpserver.DetectInputPromptOutput
		callTool(t, cs, "detect_input_prompt", map[string]any{"text": "Dropping schema analytics\nDelete 3 tables? (yes/no): "}, &danger)
		if !danger.Detected || danger.Prompt.PromptType != "yes_no" || !danger.Prompt.IsDangerous {
			t.Fatalf("got %+v, want a dangerous yes_no", danger.Prompt)
		}
		var none mcpserver.DetectInputPromptOutput
		callTool(t, cs, "detect_input_prompt", map[string]any{"text": "Build finished in 3.2s\n"}, &none)
		if none.Detected || none.Prompt != nil {
			t.Fatalf("finished output detected as a prompt: %+v", none.Prompt)
		}
		wantToolError(t, cs, "detect_input_prompt", map[string]any{"session_id": "nobody"}, "SESSION_NOT_FOUND")
		wantToolError(t, cs, "detect_input_prompt", map[string]any{"session_id": "t1", "min_confidence": 1.5}, "INVALID_CONFIDENCE")
		wantToolError(t, cs, "detect_input_prompt", map[string]any{"session_id": "../etc/passwd"}, "INVALID_SESSION_ID")

		var inf mcpserver.InferExpectedInputOutput
		callTool(t, cs, "infer_expected_input", map[string]any{"prompt_text": "Do you want to continue? [Y/n] "}, &inf)
		if len(inf.Suggestions) == 0 || !strings.EqualFold(inf.Suggestions[0].InputText, "y") {
			t.Fatalf("suggestions = %+v, want y first", inf.Suggestions)
		}
		wantToolError(t, cs, "infer_expected_input", map[string]any{"prompt_text": strings.Repeat("x", 5000)}, "INPUT_TOO_LARGE")

		var tr mcpserver.TrackInputEventOutput
		callTool(t, cs, "track_input_event", map[string]any{"session_id": "t1", "prompt_text": "Choose a branch name: ",
			"input_text": "release-7", "success": true, "input_source": "user_typed"}, &tr)
		if !tr.Recorded || tr.EventID == "" {
			t.Fatalf("got %+v, want recorded", tr)
		}
		var learned mcpserver.InferExpectedInputOutput
		callTool(t, cs, "infer_expected_input", map[string]any{"prompt_text": "Choose a branch name: ", "session_id": "t1"}, &learned)
		if !slices.ContainsFunc(learned.Suggestions, func(s mcpserver.InputSuggestion) bool { return s.InputText == "release-7" }) {
			t.Fatalf("suggestions = %+v, want the tracked answer", learned.Suggestions)
		}
		wantToolError(t, cs, "track_input_event", map[string]any{"session_id": "../x", "prompt_text": "p"}, "INVALID_SESSION_ID")
	})
	if strings.Contains(stderr.String(), "panic") {
		t.Fatalf("daemon log has a panic:\n%s", stderr.String())
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	mcpAddr := freeAddr(t)
	d, conn := startDaemon(t, idx, "--mcp-listen", mcpAddr, "--default-exposure", "meta-only")
	endpoint := "http://" + mcpAddr + listeners.MCPPath
	a := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	b := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)

	if got := listToolNames(t, a); !slices.Equal(got, []string{"analyze_prompt", "report_use", "route", "search_tools"}) {
		t.Fatalf("tools without --terminal = %v, want the classifier tools only", got)
	}
	var out mcpserver.SearchToolsOutput
	callTool(t, b, "search_tools", map[string]any{"query": "show my unread GitHub notifications", "k": 1}, &out)
	if len(out.Tools) != 1 || out.Tools[0].Name != "list_notifications" {
		t.Fatalf("got %+v, want list_notifications", out.Tools)
	}
	// analyze_prompt over MCP applies to the same hub sessions as gRPC.
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "hub-1"}); err != nil {
		t.Fatal(err)
	}
	var an mcpserver.AnalyzePromptOutput
	callTool(t, a, "analyze_prompt", map[string]any{"prompt": "write the report to disk as report.md", "session_id": "hub-1"}, &an)
	if !an.Changed || !slices.Contains(an.Added, "filesystem") {
		t.Fatalf("got %+v, want filesystem added", an)
	}
	sn, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: "hub-1"})
	if err != nil || !slices.Contains(sn.GetSession().GetExposedCategories(), "filesystem") {
		t.Fatalf("session after MCP analyze_prompt: %v %v", sn, err)
	}
	// An agent's start at the default --mcp-requests-per-second and
	// --mcp-request-burst: 64 tool calls and 64 listings at once, on a
	// new session, none refused by the rate (it holds back floods, not
	// this); on a loaded machine the admission may refuse some as
	// overloaded (--max-waiting-time), as it would any burst.
	agent := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 128)
	for i := range 64 {
		wg.Go(func() {
			res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": fmt.Sprintf("show my unread GitHub notifications %d", i), "k": 1}})
			if err == nil && res.IsError {
				err = errors.New("tool error")
				if len(res.Content) > 0 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						err = errors.New(tc.Text)
					}
				}
			}
			errs <- err
		})
		wg.Go(func() {
			_, err := agent.ListTools(ctx, nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	overloaded := 0
	for err := range errs {
		switch {
		case err == nil:
		case strings.Contains(err.Error(), "RESOURCE_EXHAUSTED: server overloaded"):
			overloaded++
		default:
			t.Fatalf("an agent's start of 128 requests at once, at the default request rate: %v", err)
		}
	}
	if overloaded == 128 {
		t.Fatal("an agent's start of 128 requests at once: none answered")
	}
	t.Logf("an agent's start of 128 requests at once: %d refused by the admission as overloaded, none by the rate", overloaded)
	if strings.Contains(d.stderr.String(), "panic") {
		t.Fatalf("daemon log has a panic:\n%s", d.stderr.String())
	}
}

// BenchmarkMCPSearchToolsStdio measures one search_tools call through the
// SDK client over stdio against the real model and the default catalog:
// JSON-RPC framing, schema validation and the Route behind it.
func BenchmarkMCPSearchToolsStdio(b *testing.B) {
	bin, _ := binaries(b)
	idx := genIndex(b, defaultCatalog(b))
	cmd := exec.Command(bin, "mcp", "--index", idx, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(), "--log-level", "warn")
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"query": "Check my GitHub notifications", "k": 10}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("%v %v", res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/call")
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPHTTPNeedsTheDaemonsTokens checks that --mcp-listen is no side
// door around --auth-token-file: a tool call over MCP needs a bearer token
// of the file with the tool's scope, and sessions stay their creator's
// whichever protocol touches them.
func TestMCPHTTPNeedsTheDaemonsTokens(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,sessions "+aliceToken+"\nbob route,sessions "+bobToken+"\nterm terminal "+routerToken+"\nadmin sessions,admin "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mcpAddr := freeAddr(t)
	_, conn := startDaemon(t, idx, "--mcp-listen", mcpAddr, "--auth-token-file", tokens)
	endpoint := "http://" + mcpAddr + listeners.MCPPath
	client := func(token string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: endpoint}
		if token != "" {
			tr.HTTPClient = &http.Client{Transport: bearerTransport{token}}
		}
		return mcpClient(t, tr, nil)
	}
	// Every request is checked before the MCP SDK reads it: no session
	// opens without a token holding a scope of some daemon tool.
	for _, tc := range []struct{ name, token, want string }{
		{"no token", "", "UNAUTHENTICATED"},
		{"unknown token", "nobody-0123456789abcdef", "UNAUTHENTICATED"},
		{"token of no MCP tool's scope", carolToken, "PERMISSION_DENIED"},
	} {
		var hc *http.Client
		if tc.token != "" {
			hc = &http.Client{Transport: bearerTransport{tc.token}}
		}
		if _, err := mcpConnect(t, endpoint, hc); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: connecting got %v, want %s", tc.name, err, tc.want)
		}
	}
	// Each tool call checks its own scope.
	query := map[string]any{"query": "show my unread GitHub notifications", "k": 1}
	if err := mcpCallErr(client(routerToken), "search_tools", query); err == nil || !strings.Contains(err.Error(), "PERMISSION_DENIED") {
		t.Errorf("token without the route scope: got %v, want PERMISSION_DENIED", err)
	}
	alice, bob := client(aliceToken), client(bobToken)
	var out mcpserver.SearchToolsOutput
	callTool(t, alice, "search_tools", query, &out)
	if len(out.Tools) != 1 {
		t.Fatalf("alice's search: %+v", out)
	}
	// A session alice made over gRPC is hers over MCP too, and not bob's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := pb.NewClassifierServiceClient(conn)
	if _, err := c.CreateSession(bearerCtx(ctx, aliceToken), &pb.CreateSessionRequest{SessionId: "alice-1"}); err != nil {
		t.Fatal(err)
	}
	prompt := map[string]any{"prompt": "write the report to disk as report.md", "session_id": "alice-1"}
	if err := mcpCallErr(bob, "analyze_prompt", prompt); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("bob analyzing alice's session: got %v, want NOT_FOUND (session ids are per caller)", err)
	}
	var an mcpserver.AnalyzePromptOutput
	callTool(t, alice, "analyze_prompt", prompt, &an)
	if !an.Changed {
		t.Errorf("alice's own session: got %+v, want a change", an)
	}
	// An MCP session is its opener's: bob's token on alice's session id
	// is refused by the SDK before any tool runs.
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	if code, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, list, sessionHeader(alice, bearer(bobToken))); code != http.StatusForbidden || !strings.Contains(body, "session user mismatch") {
		t.Errorf("bob on alice's MCP session: %d %q, want 403 session user mismatch", code, body)
	}
	if code, body := rawMCP(t, http.DefaultClient, http.MethodPost, endpoint, list, sessionHeader(alice, bearer(aliceToken))); code != http.StatusOK {
		t.Errorf("alice on her MCP session: %d %q, want 200", code, body)
	}
	// A refused request whose body never ends is answered all the same
	// (mcpRefusalReadWait), rather than holding its connection for good.
	raw, err := net.Dial("tcp", mcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := io.WriteString(raw, "POST "+listeners.MCPPath+" HTTP/1.1\r\nHost: "+mcpAddr+"\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":"); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(time.Minute)) // the test's bound, far past the daemon's
	resp, err := http.ReadResponse(bufio.NewReader(raw), nil)
	if err != nil {
		t.Fatalf("unauthenticated request with an endless body: no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unauthenticated request with an endless body: %s, want 401", resp.Status)
	}
}
