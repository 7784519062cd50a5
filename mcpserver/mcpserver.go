// Package mcpserver is classifierd's MCP boundary: it presents the
// classifier (search_tools, route, analyze_prompt, report_use) and, when enabled, the
// terminal prompt contract (detect_input_prompt, infer_expected_input,
// track_input_event) as MCP tools, using the official Go SDK.
//
// It holds no behaviour of its own. Every tool converts its typed input to
// the gRPC request message, calls the same in-process server.Server or
// server.TerminalServer method the gRPC API calls, and converts the answer
// back; a gRPC status becomes an MCP tool error (IsError) whose text starts
// with the contract's reason (SESSION_NOT_FOUND, INVALID_CONFIDENCE, ...)
// or the code name (INVALID_ARGUMENT, ...). So validation, limits and
// errors are defined once, in server/ and the domain packages.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/server/auth"
)

// Backend is the classifier an MCP tool call answers from: the service and
// the index it serves. The proxy swaps it when its servers' tools change.
type Backend struct {
	Classifier *server.Server
	Index      *index.Index
}

// Config configures New.
type Config struct {
	// Backend returns the classifier to answer from; it is called once per
	// tool call, so a caller may swap what it returns.
	Backend func() Backend
	// Terminal, if set, adds the terminal prompt tools.
	Terminal *server.TerminalServer
	// Timeout bounds each tool call (the daemon's --timeout); 0 means none.
	Timeout time.Duration
	// Version is reported in the MCP implementation info.
	Version string
	// Logger receives panics and the SDK's own log (its INFO lines at
	// DEBUG, session ids hashed: sdkLog); never request contents.
	Logger *slog.Logger
	// ProtocolVersions, if set, narrows the MCP versions served (see
	// mcp.ServerOptions.SupportedProtocolVersions).
	ProtocolVersions []string
	// Caller says who makes a tool call, from the HTTP request's header
	// (nil over stdio), and whether it may call the tool: the daemon
	// checks bearer tokens and scopes here as its gRPC interceptors do.
	// Nil: every call is server.Anonymous, as an unauthenticated daemon
	// treats gRPC calls, so sessions created over either are the same
	// client's.
	Caller func(tool string, header http.Header) (server.Caller, error)
	// Identify, if set, says who makes a request that is not a tool call
	// (tools/list, initialize, ping, ...), from the HTTP request's header
	// (nil over stdio), for its admission: no scope is checked (the
	// listener's gate has checked that the caller holds one that opens a
	// session). Nil: server.Anonymous, as with Caller nil.
	Identify func(header http.Header) (server.Caller, error)
	// Admit, if set, admits each request before it runs, with its caller
	// in ctx: a tool call (method tools/call) by the tool's name and the
	// size of its arguments, any other request by its method alone (tool
	// "", size 0). It is the daemon's fair, deadline-aware admission of
	// model calls (server.Admission.Admit), so MCP callers share the
	// daemon with gRPC callers by identity. It returns the context to run
	// the request with and the func that ends its admission; its error is
	// a tool call's error result, and any other request's JSON-RPC error
	// (rpcError). A tool call's admission ends when its handler returns,
	// except a forwarded call's (Forward): given back while its backend
	// works, taken again for the answer, which holds it until written;
	// any other request's when its answer has been encoded and written
	// (the SDK ends the request's context then): encoding a tools/list
	// answer is its work, 14 KB of JSON schemas, not the handler's.
	// Notifications have no answer to refuse with and are not admitted.
	Admit func(ctx context.Context, method, tool string, size int) (context.Context, func(), error)
}

// JSON-RPC error codes of the requests refused before they run (rpcError),
// in the range JSON-RPC leaves to implementations; the last digits echo
// the HTTP status, as the listeners' own (internal/httpguard).
const (
	CodeUnauthenticated   = -32001
	CodePermissionDenied  = -32003
	CodeDeadline          = -32008
	CodeResourceExhausted = -32029
	CodeUnavailable       = -32053
)

// Tool names. The terminal ones are the names hubs call.
const (
	ToolSearch            = "search_tools"
	ToolRoute             = "route"
	ToolAnalyzePrompt     = "analyze_prompt"
	ToolReportUse         = "report_use"
	ToolDetectInputPrompt = "detect_input_prompt"
	ToolInferExpected     = "infer_expected_input"
	ToolTrackInputEvent   = "track_input_event"
)

// New returns an MCP server with the classifier tools, and the terminal
// tools when cfg.Terminal is set. Serve it with Server.Run over
// mcp.StdioTransport, or mcp.NewStreamableHTTPHandler.
func New(cfg Config) (*mcp.Server, error) {
	if cfg.Backend == nil || cfg.Logger == nil {
		return nil, errors.New("mcpserver: backend and logger are required")
	}
	s := NewBare(cfg)
	AddClassifierTools(s, cfg.Backend)
	if cfg.Terminal != nil {
		AddTerminalTools(s, cfg.Terminal)
	}
	return s, nil
}

// NewBare returns an MCP server named classifierd with the call guard
// (deadline, panic recovery) but no tools.
func NewBare(cfg Config) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "classifierd", Version: cfg.Version},
		&mcp.ServerOptions{Logger: sdkLog(cfg.Logger), SupportedProtocolVersions: cfg.ProtocolVersions, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	if cfg.Admit != nil { // inside guard: after the caller and the deadline are set
		s.AddReceivingMiddleware(admitted(cfg.Admit))
	}
	s.AddReceivingMiddleware(guard(cfg.Logger, cfg.Timeout, cfg.Caller, cfg.Identify))
	return s
}

// guard puts the caller of each request in its context (a tool call's
// checked by caller, any other request's by identify), applies the
// default deadline to tool calls and turns a panic in a handler into an
// error answer instead of a dead process, as the gRPC interceptors do.
func guard(log *slog.Logger, timeout time.Duration, caller func(string, http.Header) (server.Caller, error), identify func(http.Header) (server.Caller, error)) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			if method != "tools/call" && !notification(method) {
				c := server.Caller{Name: server.Anonymous, Quota: "mcp", Scopes: auth.AllScopes}
				if identify != nil {
					var header http.Header
					if x := req.GetExtra(); x != nil {
						header = x.Header
					}
					if c, err = identify(header); err != nil {
						return nil, rpcError(err)
					}
				}
				ctx = server.WithCaller(ctx, c)
			}
			if method == "tools/call" {
				c := server.Caller{Name: server.Anonymous, Quota: "mcp", Scopes: auth.AllScopes}
				if caller != nil {
					var tool string
					var header http.Header
					if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
						tool = r.Params.Name
					}
					if x := req.GetExtra(); x != nil {
						header = x.Header
					}
					if c, err = caller(tool, header); err != nil {
						// A tool result with IsError, as every refusal of
						// the contract: a middleware's error would be a
						// JSON-RPC error without a valid code.
						return &mcp.CallToolResult{IsError: true,
							Content: []mcp.Content{&mcp.TextContent{Text: ToolError(err).Error()}}}, nil
					}
				}
				ctx = server.WithCaller(ctx, c)
			}
			if method == "tools/call" {
				// The SDK's own context, which it ends once the answer
				// is written: a forwarded call's place is held until
				// then (admitted), not until this deadline's cancel.
				ctx = context.WithValue(ctx, requestCtxKey{}, ctx)
			}
			if method == "tools/call" && timeout > 0 {
				if _, ok := ctx.Deadline(); !ok {
					var cancel context.CancelFunc
					ctx, cancel = server.WithDefaultTimeout(ctx, timeout)
					defer cancel()
				}
			}
			defer func() {
				if r := recover(); r != nil {
					log.Error("panic in MCP handler", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
					res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// admitted admits each request with admit (Config.Admit) before it runs.
// A tool call's admission ends when it returns (a forwarded call's:
// heldPlace), and a refusal is the
// call's error result ("RESOURCE_EXHAUSTED: ..."), as guard's are. Any
// other request's admission ends when the request's context does, which
// the SDK ends once the answer has been encoded and written (or the
// client cancelled the request), and a refusal is its JSON-RPC error
// (rpcError): its answer is the work (a tools/list is one handler that
// copies 7 pointers, then 14 KB of JSON schemas marshalled), and outside
// any admission one identity's floods of tools/list took another's small
// Route from p50 2.4 ms to 176 ms (issue 27, the thirteenth pass).
// Notifications are not admitted: they have no answer to refuse with.
// Admission runs on the SDK's context, not the HTTP request's: the HTTP
// request's mark (rapidreset.FromHeader) goes with it, so that a request
// refused past its caller's rate closes its HTTP/1.1 connection as on
// --http-listen.
func admitted(admit func(context.Context, string, string, int) (context.Context, func(), error)) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if notification(method) {
				return next(ctx, method, req)
			}
			if x := req.GetExtra(); x != nil {
				ctx = rapidreset.FromHeader(ctx, x.Header)
			}
			r, ok := req.(*mcp.CallToolRequest)
			if !ok {
				actx, release, err := admit(ctx, method, "", 0)
				if err != nil {
					return nil, rpcError(err)
				}
				if ctx.Done() == nil { // never ends: not a request of the SDK's connection
					defer release()
				} else {
					context.AfterFunc(ctx, release)
				}
				return next(actx, method, req)
			}
			if r.Params == nil {
				return next(ctx, method, req)
			}
			name, size := r.Params.Name, len(r.Params.Arguments)
			ctx, release, err := admit(ctx, method, name, size)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: ToolError(err).Error()}}}, nil
			}
			h := &heldPlace{release: release, retake: func(ctx context.Context) func() {
				// The backend's answer is paid for: a refusal (past the
				// caller's share under overload, a deadline too near)
				// leaves its encoding uncharged rather than lost.
				_, release, err := admit(ctx, method, name, size)
				if err != nil {
					return nil
				}
				return release
			}}
			base, _ := ctx.Value(requestCtxKey{}).(context.Context)
			if base == nil {
				base = ctx
			}
			defer h.end(base)
			res, err := next(context.WithValue(ctx, heldPlaceKey{}, h), method, req)
			if h.wasPaused() && base.Err() != nil && err == nil {
				// Cancelled while its backend worked: nobody reads the
				// answer, and ending the hold now must not leave a large
				// one to encode outside it.
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "CANCELLED: the call was cancelled"}}}, nil
			}
			return res, err
		}
	}
}

// requestCtxKey marks the context of a tool call's handlers with the
// SDK's own context of the request (guard), before the daemon's default
// deadline: the SDK ends it once the call's answer has been encoded and
// written, or when the client cancels the call.
type requestCtxKey struct{}

// heldPlaceKey marks the context of a tool call's handler with its
// *heldPlace.
type heldPlaceKey struct{}

// heldPlace is the admission place of a tool call (Config.Admit), held
// from before the SDK checks and decodes its arguments (admitted calls
// the SDK's handler as next). A forwarded call gives it back while its
// backend works (pauseAdmission: that work is not this process's, and a
// place held by a slow backend would keep the caller's others, and
// everyone's past their shares, waiting) and takes one again when the
// backend answers, held until the SDK has written the answer. It is
// given back by code flow only, never by the client's cancel while the
// SDK still works on the call in it.
type heldPlace struct {
	mu      sync.Mutex
	release func() // the place held now; nil: none
	retake  func(context.Context) func()
	paused  bool // given back for a backend's work once
	ended   bool // the handler has returned
}

// pause gives the place back (if held) and returns the func that takes
// one again: call it when the wait ends, whatever came of it.
func (h *heldPlace) pause() (resume func(context.Context)) {
	h.mu.Lock()
	r := h.release
	h.release, h.paused = nil, true
	h.mu.Unlock()
	if r != nil {
		r()
	}
	return func(ctx context.Context) {
		h.mu.Lock()
		if h.ended || h.release != nil {
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		r := h.retake(ctx)
		if r == nil {
			return
		}
		h.mu.Lock()
		if h.ended || h.release != nil { // not the handler's own goroutine
			h.mu.Unlock()
			r()
			return
		}
		h.release = r
		h.mu.Unlock()
	}
}

func (h *heldPlace) wasPaused() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paused
}

// end gives back what the call holds when its handler has returned: the
// place taken first at once (nothing was forwarded; a tool call's answer
// is small, or, for the model's tools, encoded as it always was), a place
// taken again after a backend's answer when the SDK ends the request's
// context base, once that answer is written.
func (h *heldPlace) end(base context.Context) {
	h.mu.Lock()
	r, paused := h.release, h.paused
	h.release, h.ended = nil, true
	h.mu.Unlock()
	switch {
	case r == nil:
	case paused && base.Done() != nil:
		context.AfterFunc(base, r)
	default:
		r()
	}
}

// pauseAdmission gives back the admission place of ctx's tool call, if
// it holds one (admitted), while the call waits on work that is not this
// process's (a backend), and returns the func that takes a place again,
// in the caller's flow, when the wait ends: call it then (the answer's
// handling and encoding are charged to it). The place taken again is
// never refused: when the admission refuses one the answer goes on
// without.
func pauseAdmission(ctx context.Context) (resume func()) {
	h, _ := ctx.Value(heldPlaceKey{}).(*heldPlace)
	if h == nil {
		return func() {}
	}
	r := h.pause()
	return func() { r(ctx) }
}

// notification reports whether method is a notification's, which has no
// answer.
func notification(method string) bool { return strings.HasPrefix(method, "notifications/") }

// rpcError is the JSON-RPC error of a request refused before it ran, for
// a gRPC status err: its message in ToolError's spelling
// ("RESOURCE_EXHAUSTED: server overloaded: ...; retry with backoff (in
// about 20ms)"), its code one of ours by the status's code.
func rpcError(err error) *jsonrpc.Error {
	code := int64(jsonrpc.CodeInternalError)
	switch status.Code(err) {
	case codes.ResourceExhausted:
		code = CodeResourceExhausted
	case codes.Unauthenticated:
		code = CodeUnauthenticated
	case codes.PermissionDenied:
		code = CodePermissionDenied
	case codes.DeadlineExceeded, codes.Canceled:
		code = CodeDeadline
	case codes.Unavailable:
		code = CodeUnavailable
	}
	return &jsonrpc.Error{Code: code, Message: ToolError(err).Error()}
}

// ToolError turns an error of a server.Server or server.TerminalServer
// method (a gRPC status) into the error a tool handler returns, which the
// SDK sends as a tool result with IsError set. Its text is
// "REASON: message", REASON being the ErrorInfo reason the contract
// documents (SESSION_NOT_FOUND, INVALID_CONFIDENCE, INPUT_TOO_LARGE, ...)
// or else the gRPC code in the contract's spelling (INVALID_ARGUMENT,
// NOT_FOUND, ...).
func ToolError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return errors.New("INTERNAL: internal error")
	}
	reason := codeName(st.Code())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			reason = info.GetReason()
		}
	}
	return fmt.Errorf("%s: %s", reason, st.Message())
}

// codeName spells a code as the gRPC spec does: NotFound -> NOT_FOUND.
func codeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
