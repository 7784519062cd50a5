package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/mcpsrc"
)

// ToolCall is the name of the tool that calls a catalog tool on its server.
const ToolCall = "call_tool"

// Caller calls a tool on a named MCP server: an *mcpsrc.Pool.
type Caller interface {
	CallTool(ctx context.Context, server string, params *mcp.CallToolParams) (*mcp.CallToolResult, error)
}

// CallToolInput is call_tool's input.
type CallToolInput struct {
	Server    string         `json:"server" jsonschema:"the server's id or name, as search_tools returned it"`
	Tool      string         `json:"tool" jsonschema:"the tool's name on that server"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments"`
}

// AddCallTool adds call_tool: it calls any tool on the server of the
// index named by id or name, through caller, so an agent can call what
// search_tools found although it was never shown the tool.
func AddCallTool(s *mcp.Server, backend func() Backend, caller Caller) {
	AddTool(s, &mcp.Tool{Name: ToolCall, Description: "Call a tool of any MCP server in the catalog by server and tool name " +
		"(as search_tools returns them), whether or not it is in your tool list."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in CallToolInput) (*mcp.CallToolResult, any, error) {
			name, ok := serverName(backend().Index, in.Server)
			if !ok {
				return nil, nil, fmt.Errorf("NOT_FOUND: no server %q in the catalog; find one with search_tools", clip.String(in.Server, 128))
			}
			return Forward(ctx, caller, name, in.Tool, in.Arguments), nil, nil
		})
}

// serverName is the verbatim name of the index's server with this id or
// name: the name it has in an MCP configuration.
func serverName(idx *index.Index, server string) (string, bool) {
	if li, ok := idx.Lookup(index.KindServer, server); ok {
		return idx.Labels[li].Name, true
	}
	for _, li := range idx.LabelsOf(index.KindServer) {
		if idx.Labels[li].Name == server {
			return server, true
		}
	}
	return "", false
}

// Forward calls tool on server with args, verbatim, and returns the
// server's result; a failure to reach it is a tool error in the
// contract's spelling (NOT_FOUND, UNAVAILABLE, DEADLINE_EXCEEDED), and the
// server's own protocol error (an unknown tool, bad arguments) is passed
// on as UNKNOWN so the agent can correct itself.
func Forward(ctx context.Context, c Caller, server, tool string, args any) *mcp.CallToolResult {
	res, err := c.CallTool(ctx, server, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err == nil {
		return res
	}
	var r mcp.CallToolResult
	name := clip.String(server, 128)
	switch {
	case errors.Is(err, mcpsrc.ErrUnknownServer):
		r.SetError(fmt.Errorf("NOT_FOUND: no server %q is configured", name))
	case errors.Is(err, mcpsrc.ErrUnavailable):
		r.SetError(fmt.Errorf("UNAVAILABLE: server %q is not connected now", name))
	case errors.Is(err, mcpsrc.ErrTooManyBackends):
		r.SetError(fmt.Errorf("RESOURCE_EXHAUSTED: server %q: %s", name, strings.TrimPrefix(err.Error(), "mcpsrc: ")))
	case ctx.Err() != nil:
		r.SetError(fmt.Errorf("DEADLINE_EXCEEDED: server %q did not answer in time", name))
	default:
		r.SetError(fmt.Errorf("UNKNOWN: server %q: %v", name, err))
	}
	return &r
}
