package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/server"
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
	var slots CallSlots
	AddTool(s, &mcp.Tool{Name: ToolCall, Description: "Call a tool of any MCP server in the catalog by server and tool name " +
		"(as search_tools returns them), whether or not it is in your tool list."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in CallToolInput) (*mcp.CallToolResult, any, error) {
			name, ok := serverName(backend().Index, in.Server)
			if !ok {
				return nil, nil, fmt.Errorf("NOT_FOUND: no server %q in the catalog; find one with search_tools", clip.String(in.Server, 128))
			}
			release, ok := slots.Take(ctx, server.CallerFrom(ctx).Quota)
			if !ok {
				return SlotsExhausted(), nil, nil
			}
			defer release()
			return Forward(ctx, caller, name, in.Tool, in.Arguments), nil, nil
		})
}

// MaxForwardedAnswer bounds the answer of a tool Forward passes on, in
// bytes of JSON (about: AnswerBytes): a larger one is an error result
// for the agent. MaxCallsPerCaller bounds the forwarded calls of one
// caller (server.Caller.Quota) in flight, their answers written or not
// (CallSlots). With neither, 40 calls of one identity (scope
// route,call) whose 15 MB answers it never read grew the proxy from 166
// MB to 1.4 GB, and an honest memory server's 10.9 MB read_graph did as
// much (the fourteenth hostile pass). A tool answer is text for a
// model's context: 4 MiB is about a million tokens. A backend's message
// over mcpsrc.MaxMessage is skipped while it is read; one under it is
// read whole before it is measured: a caller's calls hold at most
// MaxCallsPerCaller of those.
const (
	MaxForwardedAnswer = 4 << 20
	MaxCallsPerCaller  = 4
)

// MaxForwardedArguments bounds a forwarded call's arguments as encoded
// for its backend (mcpsrc.MaxMessage, what is read of a backend's
// answer): the encoder escapes `<`, `>` and `&` in 6 bytes, so 3 MB of
// `<` in a request went to the backend's stdin as 18 MB (the eighteenth
// hostile pass).
const MaxForwardedArguments = mcpsrc.MaxMessage

// CallSlots counts each caller's forwarded calls in flight. Its zero
// value is ready.
type CallSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// Take takes one of quota's MaxCallsPerCaller places if one is free, and
// returns its release: call it when the call returns, or leave it to
// ctx, a request's context, which the SDK ends once its answer is
// written (an answer its client does not read then holds the place).
func (s *CallSlots) Take(ctx context.Context, quota string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	if s.n[quota] >= MaxCallsPerCaller {
		return nil, false
	}
	s.n[quota]++
	give := sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.n[quota]--; s.n[quota] <= 0 {
			delete(s.n, quota)
		}
	})
	if ctx.Done() == nil {
		return give, true
	}
	context.AfterFunc(ctx, give)
	return func() {}, true
}

// SlotsExhausted is the result of a call CallSlots refused.
func SlotsExhausted() *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(fmt.Errorf("RESOURCE_EXHAUSTED: %d tool calls of this caller are in flight (their answers not all read); retry when one has ended", MaxCallsPerCaller))
	return &r
}

// AnswerBytes is about the size of res in JSON, without encoding its
// texts and data (marshalling a 15 MB answer to measure it took as much
// memory again); it stops counting past MaxForwardedAnswer.
func AnswerBytes(res *mcp.CallToolResult) int {
	if res == nil {
		return 0
	}
	n := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += jsonStringBytes(c.Text) + metaBytes(c.Meta)
		case *mcp.ImageContent:
			n += len(c.Data)*4/3 + metaBytes(c.Meta)
		case *mcp.AudioContent:
			n += len(c.Data)*4/3 + metaBytes(c.Meta)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				n += jsonStringBytes(c.Resource.Text) + len(c.Resource.Blob)*4/3 + metaBytes(c.Resource.Meta)
			}
			n += metaBytes(c.Meta)
		default:
			b, _ := json.Marshal(c)
			n += len(b)
		}
		if n > MaxForwardedAnswer {
			return n
		}
	}
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		n += len(b)
	}
	return n + metaBytes(res.Meta)
}

// jsonStringBytes is the size of s as encoding/json writes it, quotes
// aside: with `<`, `>` and `&` escaped (\u003c, 6 bytes), as the SDK's
// encoder has them. Counting a text's bytes let a 3 MB answer of `<`
// through as 18 MB (the eighteenth hostile pass: 1.88 s of the proxy's
// CPU a call, 5 such answers unread +250 MB).
func jsonStringBytes(s string) int {
	n := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\n' || b == '\r' || b == '\t' || b == '\b' || b == '\f':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// metaBytes is the size of m, a _meta, in JSON (within what mcpsrc read:
// mcpsrc.MaxMessage). _meta was not counted: an answer of 4.25 MB of
// _meta was passed on over the bound (the sixteenth hostile pass).
func metaBytes(m mcp.Meta) int {
	if len(m) == 0 {
		return 0
	}
	b, _ := json.Marshal(m)
	return len(b)
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
//
// Its CPU is charged to its caller's admission place (admitted), except
// while the backend works: the arguments are encoded for the backend here,
// in the place, then the place is given back for the backend's work
// (pauseAdmission) and taken again when it answers, for the answer's
// handling and encoding. The SDK client still checks and copies the
// encoded arguments as it sends them (json.RawMessage), outside any
// place: it has no hook between its encoding and its wait.
func Forward(ctx context.Context, c Caller, server, tool string, args any) *mcp.CallToolResult {
	args = encodedArguments(args)
	if raw, ok := args.(json.RawMessage); ok && len(raw) > MaxForwardedArguments {
		var r mcp.CallToolResult
		r.SetError(fmt.Errorf("RESOURCE_EXHAUSTED: the arguments for server %q's %s are %d bytes of JSON, over the %d this server forwards",
			clip.String(server, 128), clip.String(tool, 128), len(raw), MaxForwardedArguments))
		return &r
	}
	resume := pauseAdmission(ctx)
	res, err := c.CallTool(ctx, server, &mcp.CallToolParams{Name: tool, Arguments: args})
	resume()
	name := clip.String(server, 128)
	if err == nil {
		if n := AnswerBytes(res); n > MaxForwardedAnswer {
			var r mcp.CallToolResult
			r.SetError(fmt.Errorf("RESOURCE_EXHAUSTED: the answer of server %q's %s is about %d bytes, over the %d this server passes on",
				name, clip.String(tool, 128), n, MaxForwardedAnswer))
			return &r
		}
		return res
	}
	var r mcp.CallToolResult
	var wire *jsonrpc.Error
	switch {
	case errors.As(err, &wire) && wire.Code == mcpsrc.CodeMessageTooLarge:
		r.SetError(fmt.Errorf("RESOURCE_EXHAUSTED: the answer of server %q's %s is over the %d bytes this server reads",
			name, clip.String(tool, 128), mcpsrc.MaxMessage))
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

// encodedArguments is args encoded as the SDK client would send them
// (json.RawMessage: already encoded arguments are left alone); args as
// they are if they do not encode, for the SDK to report.
func encodedArguments(args any) any {
	switch args.(type) {
	case nil, json.RawMessage:
		return args
	}
	b, err := json.Marshal(args)
	if err != nil {
		return args
	}
	return json.RawMessage(b)
}
