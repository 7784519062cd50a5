package ops

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
)

func valid() Config {
	return Config{MaxSessionsPerClient: 1, MaxIndexBytes: 1, IdleTimeout: time.Minute, MaxWatches: 1, MaxWatchesPerClient: 1, MaxWatchesPerSession: 1, DeadlineShare: 0.4, RecvTimeout: time.Second, WriteStallTimeout: time.Second, MaxStreams: 1, BodyBudget: 1, BodyBudgetPerClient: 1}
}

// TestValidatePlaintextListeners: --plaintext-listeners names http and
// mcp only, needs --tls-cert, and the defaults follow --concurrency.
func TestValidatePlaintextListeners(t *testing.T) {
	c := valid()
	c.TLSCert, c.TLSKey, c.PlaintextListeners = "c", "k", " mcp, "
	if err := c.Validate(3); err != nil || c.PlainHTTP || !c.PlainMCP {
		t.Fatalf("Validate = %v, http %v mcp %v; want only mcp plain", err, c.PlainHTTP, c.PlainMCP)
	}
	if c.MaxInFlight != 6 {
		t.Fatalf("--max-inflight default %d, want 2 x concurrency", c.MaxInFlight)
	}
	c.PlaintextListeners = "grpc"
	if err := c.Validate(1); err == nil || !strings.Contains(err.Error(), "not http or mcp") {
		t.Fatalf("grpc plain: %v", err)
	}
	c = valid()
	c.PlaintextListeners = "http"
	if err := c.Validate(1); err == nil || !strings.Contains(err.Error(), "needs --tls-cert") {
		t.Fatalf("plain without TLS: %v", err)
	}
}

// TestServedMethod: a refusal is counted under the method only when the
// daemon serves it, so a client cannot mint label values.
func TestServedMethod(t *testing.T) {
	served := map[string]grpc.ServiceInfo{"classifier.v1.ClassifierService": {Methods: []grpc.MethodInfo{{Name: "Route"}}}}
	for path, want := range map[string]string{
		"/classifier.v1.ClassifierService/Route": "/classifier.v1.ClassifierService/Route",
		"/classifier.v1.ClassifierService/Nope":  "unknown",
		"/x/Route":                               "unknown",
		"/tools":                                 "unknown",
	} {
		if got := servedMethod(path, served); got != want {
			t.Errorf("servedMethod(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestMCPAdmitForwardedCalls: a forwarded MCP tool call (call_tool, the
// proxy's server tools, whatever name a caller sends) takes a CPU place
// of its caller's share (AdmitCPU: a core too while another identity is
// active), as tools/list does; on main it took none.
func TestMCPAdmitForwardedCalls(t *testing.T) {
	a := server.NewAdmission(server.AdmissionConfig{MaxInFlight: 2, Cores: 1, MaxQueue: 4})
	admit := MCPAdmit(a)
	ctx := server.WithCaller(context.Background(), server.Caller{Name: "alice", Quota: "token:alice"})
	for _, tool := range []string{mcpserver.ToolCall, "notes__create_note", "no such tool"} {
		_, release, err := admit(ctx, "tools/call", tool, 100)
		if err != nil || a.InFlight() != 1 || a.LongInFlight() != 1 {
			t.Fatalf("%s: %v, %d places and %d cores held; want 1 and 1", tool, err, a.InFlight(), a.LongInFlight())
		}
		release()
		if a.InFlight() != 0 {
			t.Fatalf("%s: %d places held after release", tool, a.InFlight())
		}
	}
}
