package httpguard

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/mcpserver"
)

type bodyKey struct{}

// Body is the body of r as the guard read it whole (Guard.Wrap), for a
// handler that reads it without consuming r.Body; ok is false for a
// request without one.
func Body(r *http.Request) (body []byte, ok bool) {
	body, ok = r.Context().Value(bodyKey{}).([]byte)
	return body, ok
}

// AdmitCalls admits, by admit, each POST whose body (Body: behind a
// Guard) holds a tools/call before next, the MCP SDK, decodes it: the SDK
// decodes the JSON-RPC message, the call's params and then its arguments
// against the tool's schema before any handler of ours runs, and 4 MiB of
// arguments (60,000 values, a 3.5 MB string, a 240 KB prompt) cost the
// proxy up to 0.4 s of CPU a call outside any admission: one identity's
// flood took 12.1 s of CPU in 12 s and another's small search_tools from
// p50 12.6 to 59.8 ms (issue 27, the sixteenth pass). admit is the
// caller's CPU share (server.Admission.AdmitCPU; the caller is the
// guard's, in r's context). The admission is handed to the call's
// handler (mcpserver.HoldCall), which keeps it while the arguments are
// validated and gives it back while a backend works (mcpserver.Forward);
// it ends at the latest when the request has been answered. A refused
// request is answered 429 with a JSON-RPC error RESOURCE_EXHAUSTED
// (CodeResourceExhausted) under its id, as a session refused for the
// caller's share is, before the SDK sees it. A body
// of several messages (a batch) is admitted once, for its decoding; its
// calls after the first are admitted each by the MCP server's own
// admission. nil admit: next.
func AdmitCalls(next http.Handler, admit func(ctx context.Context) (release func(), err error)) http.Handler {
	if admit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := Body(r)
		if r.Method != http.MethodPost || !ok || !holdsCall(body) {
			next.ServeHTTP(w, r)
			return
		}
		release, err := admit(r.Context())
		if err != nil {
			// The body is read: the connection stays open, and a refusal
			// costs no new connection (and TLS handshake).
			if status.Code(err) == codes.ResourceExhausted {
				WriteMCPError(w, r, http.StatusTooManyRequests, CodeResourceExhausted, err)
			} else { // the client went away
				WriteMCPError(w, r, http.StatusServiceUnavailable, CodeUnavailable, err)
			}
			return
		}
		defer mcpserver.HoldCall(r.Header, release)()
		next.ServeHTTP(w, r)
	})
}

// holdsCall reports whether body holds a tools/call (skimMCP).
func holdsCall(body []byte) bool {
	msgs, _, _, ok := skimMCP(body)
	if !ok {
		return false
	}
	for _, m := range msgs {
		if m.call {
			return true
		}
	}
	return false
}
