package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/reload"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testmcp"
)

// routeHasTool reports whether Route answers q with the named tool.
func routeHasTool(ctx context.Context, t *testing.T, c pb.ClassifierServiceClient, q, tool string) bool {
	t.Helper()
	resp, err := c.Route(ctx, &pb.RouteRequest{Query: q, MaxTools: 5})
	if err != nil {
		t.Fatalf("Route(%q): %v", q, err)
	}
	for _, tl := range resp.GetTools() {
		if tl.GetName() == tool {
			return true
		}
	}
	return false
}

// pollUntil calls cond until it holds or the deadline passes, and returns
// how long it took. The deadline is generous (a loaded CI machine); the
// time it took is logged, not asserted.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestDaemonFollowsLiveMCPServer is issue 15's acceptance test with real
// parts: a real MCP server (built with the official SDK, over stdio) whose
// tool list changes mid-test, the real daemon and model, Route over gRPC.
func TestDaemonFollowsLiveMCPServer(t *testing.T) {
	bin := testmcp.Binary(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{
		{Name: "get_weather", Description: "Current weather conditions for a city"},
		{Name: "get_forecast", Description: "Five-day weather forecast for a city"}})
	pidFile := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "weather.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec "+bin+" --tools "+tools+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mcp.json")
	const secret = "wx-secret-0123456789"
	if err := os.WriteFile(cfg, []byte(`{"mcpServers":{"Weather Service":{"command":"`+script+`","env":{"WEATHER_API_KEY":"`+secret+`"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d, conn := startDaemon(t, "", "--mcp-config", cfg, "--catalog", filepath.Join("testdata", "mini.json"), "--mcp-debounce", "20ms",
		"--reload-interval", "50ms")
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if !routeHasTool(ctx, t, c, "what will the weather be like in Paris this week", "get_forecast") {
		t.Fatal("Route does not offer get_forecast from the live server")
	}
	if !routeHasTool(ctx, t, c, "Check my GitHub notifications", "list_notifications") {
		t.Fatal("Route lost the base catalog's tools")
	}
	info := getInfo(ctx, t, c)
	gen := info.GetLoad().GetGeneration()
	if ms := info.GetMcpServers(); len(ms) != 1 || ms[0].GetName() != "Weather Service" || ms[0].GetId() != "weather_service" ||
		ms[0].GetTools() != 2 || ms[0].GetDegraded() || !ms[0].GetConnected() {
		t.Fatalf("mcp_servers = %v, want Weather Service (weather_service) connected with 2 tools", ms)
	}
	if src := info.GetLoad().GetSource(); !strings.HasPrefix(src, "mcp ") {
		t.Errorf("load source %q, want mcp ...", src)
	}

	// The server's tool list changes: Route offers the new tool without a
	// restart.
	testmcp.WriteTools(t, tools, []testmcp.Tool{
		{Name: "get_weather", Description: "Current weather conditions for a city"},
		{Name: "get_forecast", Description: "Five-day weather forecast for a city"},
		{Name: "get_air_quality", Description: "Air quality index, smog and pollen levels for a city"}})
	took := pollUntil(t, 20*time.Second, "Route never offered get_air_quality", func() bool {
		return routeHasTool(ctx, t, c, "how bad are pollen and smog in Berlin today", "get_air_quality")
	})
	t.Logf("new tool routed %v after the tool file changed (file watch 20ms + list_changed + debounce + rebuild)", took.Round(time.Millisecond))
	info = getInfo(ctx, t, c)
	if info.GetLoad().GetGeneration() <= gen || info.GetLoad().GetReason() != "mcp tools changed" || info.GetMcpServers()[0].GetTools() != 3 {
		t.Errorf("after the change: load %v, servers %v; want a later generation, reason mcp tools changed, 3 tools", info.GetLoad(), info.GetMcpServers())
	}

	// The hub adds a server to its config: no restart needed.
	calTools := filepath.Join(dir, "calendar.json")
	testmcp.WriteTools(t, calTools, []testmcp.Tool{{Name: "create_event", Description: "Create a calendar event at a date and time"}})
	replaceFile(t, cfg, []byte(`{"mcpServers":{"Weather Service":{"command":"`+script+`","env":{"WEATHER_API_KEY":"`+secret+`"}},`+
		`"calendar":{"command":"`+bin+`","args":["--tools","`+calTools+`"]}}}`))
	took = pollUntil(t, 20*time.Second, "Route never offered the added server's create_event", func() bool {
		return routeHasTool(ctx, t, c, "put a meeting with Anna in my calendar for Friday at 3pm", "create_event")
	})
	t.Logf("added server's tool routed %v after the config changed", took.Round(time.Millisecond))
	if ms := getInfo(ctx, t, c).GetMcpServers(); len(ms) != 2 || ms[0].GetName() != "Weather Service" || ms[0].GetTools() != 3 || ms[1].GetName() != "calendar" {
		t.Fatalf("after adding calendar, mcp_servers = %v; want Weather Service (3 tools, kept) and calendar", ms)
	}

	// The server goes away (and cannot be restarted): its tools stay
	// served, it is degraded, the daemon stays SERVING.
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(script); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("kill", "-9", strings.TrimSpace(string(pid))).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v %s", err, out)
	}
	pollUntil(t, 20*time.Second, "the killed server never showed as degraded", func() bool {
		ms := getInfo(ctx, t, c).GetMcpServers()
		return len(ms) == 2 && ms[0].GetDegraded()
	})
	ms := getInfo(ctx, t, c).GetMcpServers()[0]
	if ms.GetTools() != 3 || ms.GetConnected() || ms.GetLastError() == "" || ms.GetLastSync() == nil {
		t.Errorf("degraded server = %v, want its 3 last known tools, disconnected, an error and a last sync", ms)
	}
	if !routeHasTool(ctx, t, c, "how bad are pollen and smog in Berlin today", "get_air_quality") {
		t.Error("the dead server's tools are no longer routed to")
	}
	hc := healthpb.NewHealthClient(conn)
	// The health service follows the pool after the debounce.
	pollUntil(t, 5*time.Second, "health of "+reload.MCPHealthService+" never NOT_SERVING", func() bool {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: reload.MCPHealthService})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	})
	for svc, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"": healthpb.HealthCheckResponse_SERVING, pb.ClassifierService_ServiceDesc.ServiceName: healthpb.HealthCheckResponse_SERVING,
		reload.MCPHealthService: healthpb.HealthCheckResponse_NOT_SERVING} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("health %q = %v (%v), want %v", svc, resp.GetStatus(), err, want)
		}
	}
	if strings.Contains(d.stderr.String(), secret) {
		t.Error("the daemon's log shows a secret of the MCP config")
	}
}

func getInfo(ctx context.Context, t *testing.T, c pb.ClassifierServiceClient) *pb.GetIndexInfoResponse {
	t.Helper()
	info, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestGenIndexFromMCP builds an index offline from a live server with
// gen-index --from-mcp; a server that cannot start is reported and left
// out, and the daemon serves the result.
func TestGenIndexFromMCP(t *testing.T) {
	bin := testmcp.Binary(t)
	_, gi := binaries(t)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	testmcp.WriteTools(t, tools, []testmcp.Tool{{Name: "get_air_quality", Description: "Air quality index, smog and pollen levels for a city"}})
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"servers":{"air":{"type":"stdio","command":"`+bin+`","args":["--tools","`+tools+`"]},`+
		`"broken":{"type":"stdio","command":"`+filepath.Join(dir, "missing")+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mcp.idx")
	cmd := exec.Command(gi, "--from-mcp", cfg, "--mcp-timeout", "5s", "--model", testenv.ModelDir(), "--out", out, "--ort-lib", testenv.ORTLib(), "--quiet")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gen-index --from-mcp: %v\n%s", err, b)
	}
	for _, want := range []string{`mcp server "air": 1 tools`, `warning: mcp server "broken": not indexed`, "wrote " + out} {
		if !strings.Contains(string(b), want) {
			t.Errorf("gen-index output lacks %q:\n%s", want, b)
		}
	}
	_, conn := startDaemon(t, out)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !routeHasTool(ctx, t, c, "is the pollen bad in Berlin today", "get_air_quality") {
		t.Error("the index built from the live server does not route to its tool")
	}
}

func TestReloadFlags(t *testing.T) {
	base := []string{"--model", "m"}
	cases := []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"index", []string{"--index", "a.idx"}, ""},
		{"mcp config alone", []string{"--mcp-config", "mcp.json"}, ""},
		{"mcp config and catalog", []string{"--mcp-config", "mcp.json", "--catalog", "c.json"}, ""},
		{"neither", nil, "--index or --mcp-config is required"},
		{"catalog without mcp", []string{"--index", "a.idx", "--catalog", "c.json"}, "--catalog needs --mcp-config"},
		{"negative interval", []string{"--index", "a.idx", "--reload-interval", "-1s"}, "must not be negative"},
		{"zero mcp timeout", []string{"--mcp-config", "mcp.json", "--mcp-timeout", "0s"}, "--mcp-timeout must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(append(append([]string{}, base...), tc.args...), io.Discard)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestDaemonRefusesToStartWithoutAnyTools: with --mcp-config alone and no
// server answering, there is nothing to serve; the daemon says so and
// exits non-zero instead of serving an empty index.
func TestDaemonRefusesToStartWithoutAnyTools(t *testing.T) {
	bin, _ := binaries(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers":{"gone":{"command":"`+filepath.Join(dir, "missing")+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--mcp-config", cfg, "--mcp-timeout", "2s", "--model", testenv.ModelDir(), "--listen", freeAddr(t),
		"--ort-lib", testenv.ORTLib(), "--terminal-logs", filepath.Join(dir, "t"), "--terminal-db", filepath.Join(dir, "t.db"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("classifierd started with no tools at all")
	}
	last := lastLine(string(out))
	if !strings.HasPrefix(last, "classifierd: build the index from "+cfg) || !strings.Contains(last, "no categories and no servers") {
		t.Errorf("last line %q does not explain that no server listed tools", last)
	}
	if !strings.Contains(string(out), `mcp server degraded`) {
		t.Errorf("the log does not name the failed server:\n%s", out)
	}
}
