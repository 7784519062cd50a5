package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/server"
)

func TestToolError(t *testing.T) {
	withReason := func(c codes.Code, msg, reason string) error {
		st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "classifierd"})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	cases := []struct {
		err  error
		want string
	}{
		{withReason(codes.NotFound, "Session s1 not found", "SESSION_NOT_FOUND"), "SESSION_NOT_FOUND: Session s1 not found"},
		{withReason(codes.InvalidArgument, "min_confidence must be within [0,1]", "INVALID_CONFIDENCE"), "INVALID_CONFIDENCE: min_confidence must be within [0,1]"},
		{status.Error(codes.InvalidArgument, "text is empty"), "INVALID_ARGUMENT: text is empty"},
		{status.Error(codes.ResourceExhausted, "too many sessions"), "RESOURCE_EXHAUSTED: too many sessions"},
		{status.Error(codes.DeadlineExceeded, "late"), "DEADLINE_EXCEEDED: late"},
		{status.Error(codes.Canceled, "gone"), "CANCELLED: gone"},
		{status.Error(codes.Unavailable, "server stopping"), "UNAVAILABLE: server stopping"},
		// Not a status: a bug; nothing of it reaches the client.
		{errors.New("secret detail"), "INTERNAL: internal error"},
	}
	for _, tc := range cases {
		if got := ToolError(tc.err).Error(); got != tc.want {
			t.Errorf("ToolError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestGuardRecoversPanics(t *testing.T) {
	h := guard(discard(), 0, nil, nil)(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("boom") })
	res, err := h(context.Background(), "tools/call", nil)
	var we *jsonrpc.Error
	if res != nil || !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError || we.Message != "internal error" {
		t.Fatalf("got %v, %v; want a JSON-RPC internal error (%d)", res, err, jsonrpc.CodeInternalError)
	}
}

// TestGuardRefusesAsToolResult: a caller the guard refuses gets a tool
// result with IsError and the contract's "REASON: message" text, not a
// JSON-RPC error (which would carry no valid code), and the tool never
// runs.
func TestGuardRefusesAsToolResult(t *testing.T) {
	refuse := func(string, http.Header) (server.Caller, error) {
		return server.Caller{}, status.Error(codes.PermissionDenied, "search_tools needs scope \"route\"")
	}
	ran := false
	h := guard(discard(), 0, refuse, nil)(func(context.Context, string, mcp.Request) (mcp.Result, error) { ran = true; return nil, nil })
	res, err := h(context.Background(), "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "search_tools"}})
	r, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || !r.IsError || len(r.Content) != 1 {
		t.Fatalf("got %v, %v; want a tool result with IsError", res, err)
	}
	if text := r.Content[0].(*mcp.TextContent).Text; text != `PERMISSION_DENIED: search_tools needs scope "route"` {
		t.Errorf("text %q", text)
	}
	if ran {
		t.Error("the refused tool ran")
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
