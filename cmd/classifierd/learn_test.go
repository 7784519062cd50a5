package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/state"
	"github.com/classifierd/classifierd/internal/testmcp"
	"github.com/classifierd/classifierd/internal/testredis"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/mcpproxy"
)

// learnQueries are requests about GitHub; the agents of this deployment
// always post to Slack as well, which the descriptions do not say.
var learnQueries = []string{
	"list the open pull requests on my github repository",
	"which github issues were opened this week",
	"review the latest pull request in the repo",
	"close the stale github issues in our repository",
	"show me the failing checks on my pull request",
	"find the github issue about the login bug",
}

// learnProbe is the request whose answer the reports should change: a
// GitHub request no report was made of.
const learnProbe = "summarise the pull requests merged on github today"

// rankOf is server id's place (0 first) and confidence in a Route answer
// of every server, and its learned evidence; -1 when absent.
func rankOf(t *testing.T, c pb.ClassifierServiceClient, id string) (int, float32, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := float32(0)
	resp, err := c.Route(ctx, &pb.RouteRequest{Query: learnProbe, MaxServers: 50, MinConfidence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range resp.GetServers() {
		if s.GetId() == id {
			return i, s.GetConfidence(), s.GetEvidenceParts().GetLearned()
		}
	}
	return -1, 0, ""
}

// TestLearningDaemon runs the daemon with --learn-db and --http-listen:
// reports over gRPC (by request id) and HTTP/JSON (by query) move Slack
// up for a GitHub request nobody reported; the reports are exported
// without their text, survive a restart in a 0600 SQLite file, and
// ResetLearning gives back the answers of before.
func TestLearningDaemon(t *testing.T) {
	idx := genIndex(t, defaultCatalog(t))
	db := filepath.Join(t.TempDir(), "state", "learn.db")
	httpAddr := freeAddr(t)
	d, conn := startDaemon(t, idx, "--learn-db", db, "--http-listen", httpAddr)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	before, beforeConf, part := rankOf(t, c, "slack")
	if before <= 0 || part != "" {
		t.Fatalf("before any report slack is at %d with learned %q, want below first and nothing learned", before, part)
	}

	// gRPC, by request id: the agent called GitHub and Slack.
	for _, q := range learnQueries {
		rt, err := c.Route(ctx, &pb.RouteRequest{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		if rt.GetRequestId() == "" {
			t.Fatal("Route returned no request_id with learning on")
		}
		rep, err := c.ReportUse(ctx, &pb.ReportUseRequest{RequestId: rt.GetRequestId(), Servers: []string{"github", "slack"},
			Tools: []*pb.ToolRef{{Server: "github", Name: "list_pull_requests"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.GetStored() || rep.GetServers() != 2 {
			t.Fatalf("ReportUse = %v, want stored with 2 servers", rep)
		}
	}
	// HTTP/JSON, by query.
	for _, q := range learnQueries {
		body, _ := json.Marshal(map[string]any{"query": q + " please", "servers": []string{"github", "slack"}})
		code, out := do(t, "POST", "http://"+httpAddr+"/classifier.v1.ClassifierService/ReportUse", "application/json", string(body))
		if code != 200 || out["stored"] != true {
			t.Fatalf("HTTP ReportUse: %d %v", code, out)
		}
	}
	// A secret in a report's text or names is neither stored nor logged:
	// the text is embedded and dropped, a name the catalog lacks ignored.
	secretQuery := "open a pull request on github with the key AKIAQ7EXAMPLEK3YSECRET in the config"
	secretName := "ghp_R4nd0mT0kenValue0123456789abcdefABCD"
	body, _ := json.Marshal(map[string]any{"query": secretQuery, "servers": []string{"github", "slack", secretName}})
	code, out := do(t, "POST", "http://"+httpAddr+"/classifier.v1.ClassifierService/ReportUse", "application/json", string(body))
	if code != 200 || out["stored"] != true || !slices.Equal(toStrings(out["ignoredServers"]), []string{secretName}) {
		t.Fatalf("HTTP ReportUse with a secret: %d %v, want stored with the unknown name ignored", code, out)
	}
	reports := int32(2*len(learnQueries) + 1)
	code, out = do(t, "POST", "http://"+httpAddr+"/classifier.v1.ClassifierService/ReportUse", "application/json",
		`{"request_id": "rq-unknown", "servers": ["github"]}`)
	if code != 404 {
		t.Fatalf("HTTP ReportUse of an unknown request id: %d %v, want 404", code, out)
	}

	after, afterConf, part := rankOf(t, c, "slack")
	if after >= before || afterConf <= beforeConf || part == "" {
		t.Fatalf("after the reports slack is at %d (%.3f, learned %q), was %d (%.3f): want it higher, with its learned evidence",
			after, afterConf, part, before, beforeConf)
	}
	t.Logf("slack for %q: place %d (%.3f) -> %d (%.3f): %s", learnProbe, before, beforeConf, after, afterConf, part)

	info, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l := info.GetLearning(); !l.GetEnabled() || l.GetReports() != reports {
		t.Fatalf("GetIndexInfo.learning = %v, want %d reports", l, reports)
	}
	exp, err := c.ExportLearning(ctx, &pb.ExportLearningRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if exp.GetTotal() != reports || len(exp.GetReports()) != int(reports) {
		t.Fatalf("ExportLearning: total %d, %d reports", exp.GetTotal(), len(exp.GetReports()))
	}
	for _, r := range exp.GetReports() {
		if !slices.Equal(r.GetServers(), []string{"github", "slack"}) && !slices.Equal(r.GetServers(), []string{"slack", "github"}) || len(r.GetVector()) == 0 {
			t.Fatalf("exported report %v", r)
		}
	}

	// The reports survive a restart, in a file only the daemon's user reads;
	// the text of the requests is nowhere in it.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, d.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop within 30s of SIGTERM")
	}
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		st, err := os.Stat(f)
		if err != nil {
			if f != db && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", f, st.Mode().Perm())
		}
	}
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(learnQueries, secretQuery, "AKIAQ7EXAMPLEK3YSECRET", secretName) {
		if strings.Contains(string(raw), q) {
			t.Fatalf("the request text %q is in %s", q, db)
		}
		if strings.Contains(d.stderr.String(), q) {
			t.Fatalf("the request text %q is in the daemon's log", q)
		}
	}

	_, conn = startDaemon(t, idx, "--learn-db", db)
	c = pb.NewClassifierServiceClient(conn)
	restarted, restartedConf, _ := rankOf(t, c, "slack")
	if restarted != after || fmt.Sprintf("%.4f", restartedConf) != fmt.Sprintf("%.4f", afterConf) {
		t.Fatalf("after a restart slack is at %d (%.4f), was %d (%.4f) before it", restarted, restartedConf, after, afterConf)
	}

	res, err := c.ResetLearning(ctx, &pb.ResetLearningRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetDeleted() != reports {
		t.Fatalf("ResetLearning deleted %d, want %d", res.GetDeleted(), reports)
	}
	reset, resetConf, part := rankOf(t, c, "slack")
	if reset != before || resetConf != beforeConf || part != "" {
		t.Fatalf("after ResetLearning slack is at %d (%.4f, learned %q), want %d (%.4f) as before any report", reset, resetConf, part, before, beforeConf)
	}
}

// TestProxyLearnsFromItsCalls runs classifierd proxy over two real MCP
// servers with --learn-db: the calls it forwards after a prompt are
// reported for that prompt by the proxy itself, with no hub code, and
// are in the file when it stops.
func TestProxyLearnsFromItsCalls(t *testing.T) {
	config, _ := proxySetup(t)
	addr := freeAddr(t)
	db := filepath.Join(t.TempDir(), "learn.db")
	d := startProxyHTTP(t, config, addr, "--learn-db", db)
	cs := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + listeners.MCPPath}, nil)
	var out mcpproxy.AnalyzeOutput
	callTool(t, cs, mcpproxy.ToolAnalyze, map[string]any{"prompt": "search my notes for the meeting agenda"}, &out)
	if out.RequestID == "" {
		t.Fatalf("hub__analyze_prompt gave no request id with learning on: %+v", out)
	}
	for _, c := range [][2]string{{"notes", "search_notes"}, {"weather", "get_forecast"}} {
		res := callToolResult(t, cs, mcpproxy.ToolCall, map[string]any{"server": c[0], "tool": c[1]})
		if res.IsError || resultText(res) != c[1] {
			t.Fatalf("call_tool %v: %v %q", c, res.IsError, resultText(res))
		}
	}
	cs.Close()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(30 * time.Second):
		t.Fatal("proxy did not stop within 30s of SIGTERM")
	}
	st, err := learn.OpenSQLite(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d reports in %s, want the one of the prompt", len(recs), db)
	}
	servers := slices.Sorted(slices.Values(recs[0].Servers))
	var tools []string
	for _, tl := range recs[0].Tools {
		tools = append(tools, tl.Server+"/"+tl.Name)
	}
	slices.Sort(tools)
	if !slices.Equal(servers, []string{"notes", "weather"}) || !slices.Equal(tools, []string{"notes/search_notes", "weather/get_forecast"}) ||
		recs[0].ID != out.RequestID || len(recs[0].Vec) == 0 {
		t.Fatalf("report %+v, want request %s with notes and weather and their two tools", recs[0], out.RequestID)
	}
}

// TestLearningSharedByTwoDaemons runs two daemons on one Redis (--state):
// reports made to one change the other's answers within seconds, and a
// reset on the other gives both the answers of before.
func TestLearningSharedByTwoDaemons(t *testing.T) {
	srv := testredis.Start(t, "--requirepass", statePassword)
	t.Setenv(state.PasswordEnv, statePassword)
	idx := genIndex(t, defaultCatalog(t))
	_, connA := startDaemon(t, idx, "--state", srv.URL(0))
	_, connB := startDaemon(t, idx, "--state", srv.URL(0))
	a, b := pb.NewClassifierServiceClient(connA), pb.NewClassifierServiceClient(connB)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	before, beforeConf, _ := rankOf(t, b, "slack")
	if got, _, _ := rankOf(t, a, "slack"); got != before {
		t.Fatalf("the two daemons differ before any report: %d and %d", got, before)
	}
	for _, q := range learnQueries {
		rep, err := a.ReportUse(ctx, &pb.ReportUseRequest{Query: q, Servers: []string{"github", "slack"}})
		if err != nil || !rep.GetStored() {
			t.Fatalf("ReportUse on A: %v %v", rep, err)
		}
	}
	// until polls f every 100 ms for up to 15 s.
	until := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !f(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 15 s", what)
			}
		}
	}
	until("B follows A's reports", func() bool {
		after, _, part := rankOf(t, b, "slack")
		return after < before && part != ""
	})
	res, err := b.ResetLearning(ctx, &pb.ResetLearningRequest{})
	if err != nil || res.GetDeleted() != int32(len(learnQueries)) {
		t.Fatalf("ResetLearning on B: %v %v, want %d deleted", res, err, len(learnQueries))
	}
	until("A follows B's reset", func() bool {
		got, conf, part := rankOf(t, a, "slack")
		return got == before && conf == beforeConf && part == ""
	})
}

// TestReportByQueryAsByRequestID makes the same reports three ways, with
// a reset between: gRPC by the request id Route returned, gRPC by query,
// and HTTP/JSON by query in the exact shape a hub replaying its tasks
// sends ({"query": …, "servers": [...]}, no request id). Each moves Slack
// up for a GitHub request nobody reported, and a report by query text is
// learned as well as one by request id: the same place and confidence.
func TestReportByQueryAsByRequestID(t *testing.T) {
	idx := genIndex(t, defaultCatalog(t))
	httpAddr := freeAddr(t)
	_, conn := startDaemon(t, idx, "--http-listen", httpAddr)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	servers := []string{"github", "slack"}
	before, beforeConf, _ := rankOf(t, c, "slack")
	type moved struct {
		place int
		conf  float32
	}
	var byID moved
	for _, tc := range []struct {
		name   string
		report func(t *testing.T, q string)
	}{
		{"gRPC by request id", func(t *testing.T, q string) {
			rt, err := c.Route(ctx, &pb.RouteRequest{Query: q})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := c.ReportUse(ctx, &pb.ReportUseRequest{RequestId: rt.GetRequestId(), Servers: servers})
			if err != nil || !rep.GetStored() || rep.GetRequestId() != rt.GetRequestId() {
				t.Fatalf("ReportUse by request id: %v, %v", rep, err)
			}
		}},
		{"gRPC by query", func(t *testing.T, q string) {
			rep, err := c.ReportUse(ctx, &pb.ReportUseRequest{Query: q, Servers: servers})
			if err != nil || !rep.GetStored() || rep.GetRequestId() == "" || rep.GetServers() != 2 {
				t.Fatalf("ReportUse by query: %v, %v", rep, err)
			}
		}},
		{"HTTP/JSON by query", func(t *testing.T, q string) {
			body, err := json.Marshal(map[string]any{"query": q, "servers": servers})
			if err != nil {
				t.Fatal(err)
			}
			code, out := do(t, "POST", "http://"+httpAddr+"/classifier.v1.ClassifierService/ReportUse", "application/json", string(body))
			if code != 200 || out["stored"] != true || out["requestId"] == "" || out["servers"] != float64(2) {
				t.Fatalf("HTTP ReportUse %s: %d %v", body, code, out)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.ResetLearning(ctx, &pb.ResetLearningRequest{}); err != nil {
				t.Fatal(err)
			}
			for _, q := range learnQueries {
				tc.report(t, q)
			}
			place, conf, part := rankOf(t, c, "slack")
			if place >= before || conf <= beforeConf || part == "" {
				t.Fatalf("slack at %d (%.4f, learned %q) after the reports, %d (%.4f) before: want it higher, with its learned evidence",
					place, conf, part, before, beforeConf)
			}
			t.Logf("slack %d (%.4f) -> %d (%.4f): %s", before, beforeConf, place, conf, part)
			if byID == (moved{}) {
				byID = moved{place, conf}
				return
			}
			if place != byID.place || math.Abs(float64(conf-byID.conf)) > 1e-3 {
				t.Fatalf("by query slack is at %d (%.4f), by request id at %d (%.4f): want the same", place, conf, byID.place, byID.conf)
			}
		})
	}
}

// TestProxyRoutingLearnsFromForwardedCalls runs classifierd proxy over
// real MCP servers: the reference memory server (npm, pinned) and two
// built with the official Go SDK. This deployment's agents store every
// forecast they get in the memory graph, which no description says. The
// proxy reports the calls it forwards after each hub__analyze_prompt,
// with no hub code, and its search_tools answer for a weather request
// nobody reported then ranks the memory server's tools higher, with the
// learned evidence said.
func TestProxyRoutingLearnsFromForwardedCalls(t *testing.T) {
	node, script := testmcp.MemoryServer(t)
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	weatherFile, notesFile := filepath.Join(dir, "weather.json"), filepath.Join(dir, "notes.json")
	testmcp.WriteTools(t, weatherFile, weatherTools)
	testmcp.WriteTools(t, notesFile, notesTools)
	config := writeConfig(t, dir, map[string]any{
		"weather": map[string]any{"command": bin, "args": []string{"--tools", weatherFile}},
		"notes":   map[string]any{"command": bin, "args": []string{"--tools", notesFile}},
		"memory": map[string]any{"command": node, "args": script,
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}},
	})
	addr := freeAddr(t)
	startProxyHTTP(t, config, addr)
	endpoint := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + listeners.MCPPath}

	const probe = "will it rain in Rome tomorrow afternoon"
	// memoryRank is the place (0 first) of the memory server's best tool
	// in search_tools' answer to the probe, its confidence and evidence.
	memoryRank := func() (int, float32, string) {
		t.Helper()
		cs := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint.Endpoint}, nil)
		defer cs.Close()
		var out mcpproxy.SearchOutput
		callTool(t, cs, mcpproxy.ToolSearch, map[string]any{"query": probe, "k": 20}, &out)
		for i, tl := range out.Tools {
			if tl.Server == "memory" {
				return i, tl.Confidence, tl.Evidence
			}
		}
		t.Fatalf("no memory tool among %d found for %q", len(out.Tools), probe)
		return 0, 0, ""
	}
	before, beforeConf, _ := memoryRank()

	prompts := []string{
		"what is the weather forecast for Berlin this weekend",
		"will it be sunny in Madrid on Friday",
		"give me the five day forecast for Oslo",
		"how cold will it get in Toronto tonight",
		"is rain expected in London tomorrow",
		"what temperatures are forecast for Athens next week",
	}
	for i, p := range prompts {
		cs := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint.Endpoint}, nil)
		var out mcpproxy.AnalyzeOutput
		callTool(t, cs, mcpproxy.ToolAnalyze, map[string]any{"prompt": p}, &out)
		if out.RequestID == "" {
			t.Fatalf("hub__analyze_prompt gave no request id with learning on: %+v", out)
		}
		if res := callToolResult(t, cs, mcpproxy.ToolCall, map[string]any{"server": "weather", "tool": "get_forecast"}); res.IsError {
			t.Fatalf("call_tool weather/get_forecast: %s", resultText(res))
		}
		create := map[string]any{"server": "memory", "tool": "create_entities", "arguments": map[string]any{
			"entities": []map[string]any{{"name": fmt.Sprintf("forecast-%d", i), "entityType": "forecast", "observations": []string{p}}}}}
		if res := callToolResult(t, cs, mcpproxy.ToolCall, create); res.IsError {
			t.Fatalf("call_tool memory/create_entities: %s", resultText(res))
		}
		cs.Close()
	}

	after, afterConf, evidence := memoryRank()
	t.Logf("memory's best tool for %q: place %d (%.3f) -> %d (%.3f): %s", probe, before, beforeConf, after, afterConf, evidence)
	if after >= before || afterConf <= beforeConf || !strings.Contains(evidence, "learned") {
		t.Fatalf("after %d forwarded sessions memory's best tool is at %d (%.3f, %q), was %d (%.3f): want it higher, with its learned evidence",
			len(prompts), after, afterConf, evidence, before, beforeConf)
	}
}
