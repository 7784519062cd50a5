// Package httpguard is the one guard in front of every HTTP listener of
// classifierd (--http-listen, --mcp-listen, classifierd proxy --mcp-listen):
// the caller authenticated before a body is read, bodies bounded as they
// arrive and never sized from a header, compressed bodies refused; and the
// refusals written in each listener's protocol (gRPC, Connect, REST,
// JSON-RPC for MCP).
package httpguard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/internal/rpcid"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server"
)

// Guard stands in front of every HTTP listener: --http-listen (Connect,
// gRPC-Web and REST through vanguard, the hub REST shape), --mcp-listen and
// classifierd proxy --mcp-listen. Before anything downstream (vanguard,
// the MCP SDK, the proxy) sees a request, it
//
//  0. refuses (431 RESOURCE_EXHAUSTED) a request of more than
//     MaxHeaderFields header fields, (403 PERMISSION_DENIED) a request
//     other than GET, HEAD or OPTIONS that a web page of another origin
//     sent (crossSite), and
//     after authentication (415) a POST whose Content-Type is none of
//     the API's (apiContentType): what a page may send without a CORS
//     preflight;
//  1. authenticates it, before a byte of its body is read: 401
//     UNAUTHENTICATED, 403 PERMISSION_DENIED;
//  2. answers 413 RESOURCE_EXHAUSTED to a body whose Content-Length is
//     over maxBody, without reading it;
//  3. answers 415 UNIMPLEMENTED to a compressed body (Content-Encoding,
//     Connect-Content-Encoding or Grpc-Encoding other than identity): no
//     client of the API compresses requests (browsers, curl, the Connect
//     and gRPC-Web clients do not by default), and inflating is what made
//     a 200 KB body cost 1.1 GB (vanguard inflates with an unbounded
//     bytes.Buffer.ReadFrom before its size limit applies);
//  4. reads the body into memory that grows with the bytes that arrive,
//     never with what a header declares, up to maxBody (413 past it), and
//     hands the handler that complete body with its true length. So
//     vanguard's buffer, which it sizes from Content-Length, and the
//     buffer of an enveloped message (gRPC-Web, Connect streaming), which
//     it sizes from the 5-byte length prefix, are only ever as large as
//     what the client really sent: a length prefix that claims more than
//     the body holds is a 400.
//
// Every request to our HTTP APIs ends its body before its answer begins
// (no client or bidi streaming RPC; an MCP POST is one message), so
// reading it whole first changes nothing a client sees.
type Guard struct {
	// Auth finds the caller of a request from its header and TLS state
	// (a status error: UNAUTHENTICATED, PERMISSION_DENIED); the caller
	// reaches the handler in the request's context (server.CallerFrom).
	// nil: no one is checked here.
	Auth func(*http.Request) (server.Caller, error)
	// Public, if set, says which requests are served without auth: on
	// --http-listen, a GET, HEAD or OPTIONS without a body (the explain
	// page's files; the gRPC edge still authenticates the calls among
	// them, such as GET /tools).
	Public func(*http.Request) bool
	// MaxBody is the largest body accepted, in bytes as sent.
	MaxBody int64
	// ReadWait bounds the reading of one body, for a listener without a
	// server-wide ReadTimeout (the MCP listeners, whose event streams
	// must outlive one); 0: the server's ReadTimeout bounds it.
	ReadWait time.Duration
	// CheckBody, if set, checks a body read whole before the handler
	// sees it (an INVALID_ARGUMENT status error: 400).
	CheckBody func(body []byte) error
	// CountValues, if set, refuses (400 INVALID_ARGUMENT) a body of
	// more than MaxElements values before the handler decodes it
	// (CheckElements): decoding costs memory per value.
	CountValues bool
	// ValueCost is what each value counted weighs in the rates of body
	// bytes beside its bytes (0: server.ValueCost; MCPValueCost on the
	// MCP listeners).
	ValueCost int64
	// JSONOnly refuses (415, from the head) a POST whose Content-Type
	// is not application/json: an MCP listener's. Its other API types
	// were read whole and scanned before the SDK refused them 415, at 4-7
	// times the client's CPU (the seventeenth hostile pass).
	JSONOnly bool
	// Budget, if set, bounds the body bytes held at once (Budget).
	Budget *Budget
	// Refuse answers a refused request in the listener's protocol.
	Refuse func(w http.ResponseWriter, r *http.Request, httpCode int, err error)
	// WriteWait bounds each write of an answer (boundWriter); 0:
	// DefaultWriteWait.
	WriteWait time.Duration
	// Messages, if set with Budget, is how many requests a body holds (a
	// JSON-RPC batch's messages): each past the first is charged
	// StreamCost more, as a request of its own is.
	Messages func(body []byte) int
	// Admit, if set, is admission's precheck of a request let in, after
	// its body is read and checked and before the handler sees it
	// (--http-listen: server.Admission.PrecheckHTTP, before vanguard
	// transcodes it): a refusal (RESOURCE_EXHAUSTED with a retry delay)
	// is answered 429 with Retry-After at once. The connection is kept
	// (its body was read whole): an honest client refused under
	// overload keeps it, unless the refusal is past its caller's rate
	// (rapidreset.RefusedPastRate closes an HTTP/1.1 one).
	Admit func(r *http.Request) error
	// Rate, if set, holds each caller's requests (an MCP listener's
	// POSTs, its requests, notifications and batches, a batch's messages
	// each counted; its GETs and DELETEs, and any other method, one each)
	// to its rate (RequestRate). One past it is refused 429
	// after authentication and before its body is read (a batch's
	// further messages, once it is read and counted): at once, with
	// Retry-After, under the request's id (Refuse reads the first bytes
	// of the body for it), and on HTTP/1.1 with Connection: close
	// (rapidreset.RefusedPastRate), dropping what the client pipelined
	// behind it.
	Rate *RequestRate
	// BadBodies, if set, holds each caller's bodies refused after they
	// were read (RefusedBodies) to its rate: past it, a request with a
	// body is refused 429 from its head, as past Rate.
	BadBodies *RefusedBodies
	// BodyRate, if set, holds each caller's bodies, whatever their
	// answer, to its rate (NewBodyRate), as BadBodies does.
	BodyRate *RefusedBodies
}

func (g Guard) writeWait() time.Duration {
	if g.WriteWait > 0 {
		return g.WriteWait
	}
	return DefaultWriteWait
}

// BodyReadWait is how long an MCP listener waits for one request body:
// 4 MiB at about 1 Mbit/s, while a client that declares a body and sends
// none holds its connection and a few KB no longer than this.
const BodyReadWait = 30 * time.Second

// headRefusal is the refusal a request's head alone earns, after
// authentication: a declared body past the limit (413), a GET or HEAD
// with a body (400), a POST without an API content type (415), a
// compressed body (415); 0 and nil if none.
func (g Guard) headRefusal(r *http.Request) (int, error) {
	if r.ContentLength > g.MaxBody {
		return http.StatusRequestEntityTooLarge, tooLarge(g.MaxBody)
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && hasBody(r) {
		// The transcoder read the whole body to answer 500 "request
		// should have no body": never early, and a body a handler reads
		// is free of the HTTP/2 frame budget, so a token holder had
		// 31,000 such 500s in 10 s on 64 connections, the daemon at 4
		// times its client's CPU (the twenty-third hostile pass). A 4xx
		// from the head is early on HTTP/2 and closes an HTTP/1.1
		// connection with a body.
		return http.StatusBadRequest, status.Errorf(codes.InvalidArgument,
			"a %s request has no body: send none (Content-Length 0, or END_STREAM on its headers)", r.Method)
	}
	if ct := strings.ToLower(r.Header.Get("Content-Type")); r.ProtoMajor == 1 && (ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+")) {
		// gRPC is HTTP/2 only: its server answered 505 once the body
		// was read whole (the twenty-sixth hostile pass).
		return http.StatusHTTPVersionNotSupported, status.Error(codes.InvalidArgument,
			"gRPC needs HTTP/2: use HTTP/2, gRPC-Web or Connect over HTTP/1.1")
	}
	if ct := r.Header.Get("Content-Type"); r.Method == http.MethodPost && !apiContentType(ct) {
		return http.StatusUnsupportedMediaType, errContentType(ct)
	}
	if ct := r.Header.Get("Content-Type"); g.JSONOnly && r.Method == http.MethodPost && !jsonContentType(ct) {
		return http.StatusUnsupportedMediaType, status.Errorf(codes.InvalidArgument,
			"an MCP request needs Content-Type application/json; got %q", clipHeader(ct))
	}
	if !hasBody(r) {
		return 0, nil
	}
	if h, enc := requestEncoding(r.Header); enc != "" {
		return http.StatusUnsupportedMediaType, status.Errorf(codes.Unimplemented,
			"%s %q is not accepted: send the request body uncompressed (at most %d bytes)", h, clipHeader(enc), g.MaxBody)
	}
	return 0, nil
}

// errBodyTooLarge is a body past maxBody.
var errBodyTooLarge = errors.New("request body too large")

// Wrap puts g in front of next. Every request it lets in, refused or
// not, is charged StreamCost to its caller in g.Budget (the identity, or
// the peer host when it has none or its credentials are refused) until
// its answer is written; each write of the answer is bounded in time
// (DefaultWriteWait, RefusalWriteWait for a refusal). A request the
// budget has no room for is refused (429, or the refusal it had already
// earned) with a status and headers only, which no flow-control window
// holds back.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h1body := r.ProtoMajor == 1 && hasBody(r)
		var refusal error
		code := 0
		if n := headerFields(r.Header); n > MaxHeaderFields {
			code, refusal = http.StatusRequestHeaderFieldsTooLarge, status.Errorf(codes.ResourceExhausted,
				"request head holds %d header fields: at most %d", n, MaxHeaderFields)
		} else if err := crossSite(r); err != nil {
			code, refusal = http.StatusForbidden, err
		} else if g.Auth != nil && (g.Public == nil || !g.Public(r)) {
			c, err := g.Auth(r)
			if err != nil {
				code, refusal = http.StatusUnauthorized, err
				if status.Code(err) == codes.PermissionDenied {
					code = http.StatusForbidden
				}
			} else {
				r = r.WithContext(server.WithCaller(r.Context(), c))
			}
		}
		if refusal == nil {
			// What the head alone refuses is refused as such, budget or
			// not: a compressed body is 415 whether or not there is room.
			code, refusal = g.headRefusal(r)
		}
		if g.Budget != nil {
			who := bodyOwner(r)
			if !g.Budget.take(who, StreamCost) {
				if refusal == nil {
					code, refusal = http.StatusTooManyRequests, errStreamBudget
				}
				if h1body {
					w.Header().Set("Connection", "close")
				}
				// Its connection is closed after the answer (GOAWAY on
				// HTTP/2), as past a caller's rate: the twenty-second
				// hostile pass filled the local peer's share with 256
				// answers held unread, then had 181,826 of these 429s
				// answered in 10 s on 4 HTTP/2 connections with no
				// token, never closed (3.1 times the client's CPU).
				rapidreset.RefusedPastRate(r.Context())
				_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(RefusalWriteWait))
				r.Body = http.NoBody // an MCP refusal would read it for the request's id
				g.Refuse(headOnly{w}, r, code, refusal)
				return
			}
			defer g.Budget.give(who, StreamCost)
		}
		bw := newBoundWriter(w, r, g.writeWait())
		defer bw.finish()
		w = bw
		refuse := func(w http.ResponseWriter, r *http.Request, code int, err error) {
			bw.wait = RefusalWriteWait
			if h1body {
				// Close the connection after the answer: net/http would
				// otherwise read what is left of a small body first, from a
				// client that may never send it.
				w.Header().Set("Connection", "close")
			}
			g.Refuse(w, r, code, err)
		}
		if refusal != nil {
			refuse(w, r, code, refusal)
			return
		}
		// refusePast answers 429 a request past one of its caller's
		// rates, to retry after retry seconds.
		refusePast := func(retry int64, err error) {
			bw.wait = RefusalWriteWait
			if !rapidreset.RefusedPastRate(r.Context()) && r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close") // a listener without the marks
			}
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
			g.Refuse(w, r, http.StatusTooManyRequests, err)
		}
		pastRate := func(n int) bool {
			if g.Rate.allow(bodyOwner(r), n) { // every method: a GET, a DELETE too
				return false
			}
			refusePast(1, g.Rate.refusal())
			return true
		}
		if pastRate(1) {
			return
		}
		if hasBody(r) {
			for _, q := range []*RefusedBodies{g.BadBodies, g.BodyRate} {
				if q == g.BodyRate && r.ContentLength >= 0 && r.ContentLength <= SmallBody {
					continue // charged, never refused: see SmallBody
				}
				if wait, byShare := q.past(bodyOwner(r)); wait > 0 {
					r.Body = http.NoBody // an MCP refusal would read it for the request's id
					refusePast(retryAfter(wait), q.refusal(wait, byShare))
					return
				}
			}
		}
		admitted := func() bool {
			if g.Admit == nil {
				return true
			}
			err := g.Admit(r)
			if err == nil {
				return true
			}
			bw.wait = RefusalWriteWait
			if d := server.RetryAfter(err); d > 0 {
				w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
			}
			g.Refuse(w, r, http.StatusTooManyRequests, err)
			return false
		}
		if !hasBody(r) {
			if admitted() {
				next.ServeHTTP(w, r)
			}
			return
		}
		rc := http.NewResponseController(w)
		if g.ReadWait > 0 {
			_ = rc.SetReadDeadline(time.Now().Add(g.ReadWait))
		}
		var src io.Reader = r.Body
		if g.Budget != nil {
			// Taken before each chunk is read, given back once the
			// request is answered: the body (and the handler's copies
			// of it) live that long.
			br := &budgetReader{r: r.Body, b: g.Budget, who: bodyOwner(r)}
			defer func() { g.Budget.give(br.who, br.taken) }()
			src = br
		}
		// A JSON body's values are counted as it is read: one past a
		// bound is refused there, not read whole first.
		counted := g.CountValues && jsonBody(r.Header.Get("Content-Type"))
		var cr *countingReader
		if counted {
			cr = &countingReader{r: src}
			src = cr
		}
		values := 0 // counted by CheckElements' count, if not as read
		if g.BadBodies != nil || g.BodyRate != nil {
			// A body refused once read, by the guard or the handler,
			// is charged to its caller's rate of refused bodies; every
			// body to its rate of bodies. Each weighs its bytes and
			// server.ValueCost for each value counted in it.
			bc := &byteCounter{r: src}
			src = bc
			defer func() {
				if bc.n == 0 {
					return
				}
				if cr != nil {
					values = cr.c.n
				}
				cost := g.ValueCost
				if cost == 0 {
					cost = server.ValueCost
				}
				n := bc.n + cost*int64(values)
				g.BodyRate.Charge(bodyOwner(r), n)
				if bodyFault(bw.code, bw.Header()) {
					g.BadBodies.Charge(bodyOwner(r), n)
				}
			}()
		}
		body, err := readBody(src, g.MaxBody, r.ContentLength)
		if g.ReadWait > 0 {
			// Lifted once the body is in: the server reads on in the
			// background to notice a client that goes away, and a
			// deadline there would cancel a long tool call.
			_ = rc.SetReadDeadline(time.Time{})
		}
		switch {
		case elementsRefusal(err) != nil:
			refuse(w, r, http.StatusBadRequest, elementsRefusal(err))
			return
		case errors.Is(err, errBodyBudget):
			refuse(w, r, http.StatusTooManyRequests, err)
			return
		case errors.Is(err, errBodyTooLarge):
			refuse(w, r, http.StatusRequestEntityTooLarge, tooLarge(g.MaxBody))
			return
		case err != nil:
			// The client went away or stopped sending: it will most
			// likely not read this.
			refuse(w, r, http.StatusBadRequest, status.Error(codes.InvalidArgument, "request body could not be read to its end"))
			return
		}
		if enveloped(r.Header.Get("Content-Type")) {
			if err := checkEnvelopes(body); err != nil {
				refuse(w, r, http.StatusBadRequest, status.Error(codes.InvalidArgument, err.Error()))
				return
			}
		}
		if g.CheckBody != nil {
			if err := g.CheckBody(body); err != nil {
				refuse(w, r, http.StatusBadRequest, err)
				return
			}
		}
		if g.CountValues && !counted {
			var err error
			if values, err = countElements(r.URL.Path, r.Header.Get("Content-Type"), body); err != nil {
				refuse(w, r, http.StatusBadRequest, err)
				return
			}
		}
		if g.Messages != nil && (g.Budget != nil || g.Rate != nil) {
			// A batch of 64 tools/list was charged as one request: one
			// identity's 8 threads held 512 in flight, where its 256
			// places (a 16 MiB share of 64 KiB each) allow 256 requests
			// (the thirteenth hostile pass: another's p50 2 -> 424 ms).
			n := g.Messages(body)
			if n > 1 && pastRate(n-1) { // its body read: refused with no id
				return
			}
			if n > 1 && g.Budget != nil {
				who, extra := bodyOwner(r), int64(n-1)*StreamCost
				if !g.Budget.take(who, extra) {
					refuse(w, r, http.StatusTooManyRequests, errStreamBudget)
					return
				}
				defer g.Budget.give(who, extra)
			}
		}
		if !admitted() {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		r.TransferEncoding = nil
		next.ServeHTTP(w, r)
	})
}

// RequestTimeout is the deadline a request of --http-listen gives its
// call, as vanguard reads it (Connect-Timeout-Ms, X-Server-Timeout in
// seconds, Grpc-Timeout for gRPC-Web): 0 and true without one; false
// when one does not parse (the transcoder refuses it, or gives it to
// gRPC: the caller's precheck is then left to the interceptor).
func RequestTimeout(h http.Header) (time.Duration, bool) {
	if v := h.Get("Connect-Timeout-Ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		return time.Duration(n) * time.Millisecond, err == nil && n > 0 && n < 1e10
	}
	if v := h.Get("X-Server-Timeout"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		return time.Duration(f * float64(time.Second)), err == nil && f > 0 && f < 1e8
	}
	if v := h.Get("Grpc-Timeout"); len(v) >= 2 && len(v) <= 9 {
		n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
		unit, ok := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
			'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}[v[len(v)-1]]
		return time.Duration(n) * unit, err == nil && ok && n > 0
	} else if v != "" {
		return 0, false
	}
	return 0, true
}

// MaxHeaderFields bounds the header fields of a request (each value of a
// repeated name counts): past it the request is answered 431
// RESOURCE_EXHAUSTED from its head, before its token is checked or a byte
// of its body read. The 64 KiB bound on a head holds about 6,500 fields
// of a few bytes each, which net/http keeps as map entries and strings of
// about 100 bytes each: 0.6 MB for a request whose body then holds it
// (1.8 MB through the proxy's listener, which copies the header), against
// the 64 KiB (StreamCost) it is charged. The eleventh hostile pass held 504
// such requests with two tokens on --http-listen (+318 MB) and 378 on the
// proxy's listener (+686 MB, past its manifest's 512 Mi). Browsers, curl
// and the gRPC, Connect and MCP clients send a few dozen; Envoy refuses
// more than 100 by default.
const MaxHeaderFields = 256

// headerFields counts the fields of h, each value of a name once.
func headerFields(h http.Header) int {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	return n
}

func tooLarge(max int64) error {
	return status.Errorf(codes.ResourceExhausted, "request body is over the limit of %d bytes", max)
}

// hasBody reports whether r may carry a body: one of known length above
// zero, or of unknown length (chunked, or HTTP/2 without Content-Length).
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// BodilessRead reports whether r is a GET, HEAD or OPTIONS without a body.
func BodilessRead(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return !hasBody(r)
	}
	return false
}

// requestEncoding is the header and value of a compression of the request
// body other than identity, or "" for none: Content-Encoding (REST, Connect
// unary, MCP), Connect-Content-Encoding (Connect streaming), Grpc-Encoding
// (gRPC, gRPC-Web). Content-Encoding's coding is case-insensitive (RFC
// 9110); the other two name a compressor the transcoder looks up as
// spelled, so "Identity" there is a compression the API does not have
// (it answered 501 "Decompressor is not installed", the thirteenth
// hostile pass).
func requestEncoding(h http.Header) (string, string) {
	for _, name := range []string{"Content-Encoding", "Connect-Content-Encoding", "Grpc-Encoding"} {
		for _, v := range h.Values(name) {
			for _, e := range strings.Split(v, ",") {
				e = strings.TrimSpace(e)
				identity := e == "identity" || name == "Content-Encoding" && strings.EqualFold(e, "identity")
				if e != "" && !identity {
					return name, e
				}
			}
		}
	}
	return "", ""
}

// clipHeader keeps an echoed header value short and printable: at most
// maxEcho bytes of it, then "…" to say it was cut (a Content-Type with
// its parameters read as another type when cut silently).
func clipHeader(s string) string {
	if len(s) > maxEcho {
		return strings.ToValidUTF8(s[:maxEcho], "?") + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// maxEcho bounds the bytes of a header value a refusal echoes.
const maxEcho = 80

// readBody reads r to its end into memory that grows with what arrives,
// errBodyTooLarge past max bytes.
func readBody(r io.Reader, limit, declared int64) ([]byte, error) {
	var buf bytes.Buffer
	// Room for a declared length up to readBodyStart at once (the
	// caller authenticated; the rest grows as it comes): a 64 KiB body
	// was read through seven growths, a fifth of its cost.
	buf.Grow(int(min(max(declared, 0), readBodyStart, limit+1)) + bytes.MinRead)
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if n > limit {
		return nil, errBodyTooLarge
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readBodyStart bounds the room readBody makes for a body from its
// declared length.
const readBodyStart = 64 << 10

// enveloped reports whether a content type frames its messages with a
// 5-byte prefix (flags, big-endian length): gRPC, gRPC-Web, Connect
// streaming.
func enveloped(ct string) bool {
	ct = strings.ToLower(strings.TrimSpace(ct))
	return ct == "application/grpc" || ct == "application/grpc-web" ||
		strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc-web+") ||
		strings.HasPrefix(ct, "application/connect+")
}

// checkEnvelopes checks that every message of an enveloped body has flags
// 0 (a compressed message is not accepted, and a client sends no trailers
// or end-of-stream frame: vanguard answered a compressed flag INTERNAL,
// "compressed flag set with identity or empty encoding", the client's
// mistake, a 400 here) and a length prefix that fits in the body.
func checkEnvelopes(body []byte) error {
	for rest := body; len(rest) > 0; {
		if len(rest) < 5 {
			return errors.New("request body: a message prefix is cut short")
		}
		if rest[0] != 0 {
			return fmt.Errorf("request body: message flags 0x%02x: send messages uncompressed (flags 0)", rest[0])
		}
		n := uint64(binary.BigEndian.Uint32(rest[1:5]))
		if n > uint64(len(rest)-5) {
			return fmt.Errorf("request body: a message prefix declares %d bytes, the body holds %d", n, len(rest)-5)
		}
		rest = rest[5+n:]
	}
	return nil
}

// WriteRPCError answers a refused request of --http-listen with the HTTP
// status code and the error of the status err in the shape the request's
// protocol expects: gRPC and gRPC-Web read Grpc-Status and Grpc-Message,
// Connect {"code": "unauthenticated", "message": ...}, REST (and anything
// else) google.rpc.Status {"code": 16, "message": ..., "details": []}.
func WriteRPCError(w http.ResponseWriter, r *http.Request, httpCode int, err error) {
	st := status.Convert(err)
	h := w.Header()
	ct := r.Header.Get("Content-Type")
	var body any
	switch {
	case strings.HasPrefix(ct, "application/grpc"):
		h.Set("Content-Type", ct)
		h.Set("Grpc-Status", strconv.Itoa(int(st.Code())))
		h.Set("Grpc-Message", url.PathEscape(st.Message()))
	case r.Header.Get("Connect-Protocol-Version") != "" || strings.HasPrefix(ct, "application/connect+"):
		body = map[string]string{"code": connect.Code(st.Code()).String(), "message": st.Message()}
	default:
		body = map[string]any{"code": int(st.Code()), "message": st.Message(), "details": []any{}}
	}
	if body == nil {
		w.WriteHeader(httpCode)
		return
	}
	b, _ := json.Marshal(body)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(httpCode)
	_, _ = w.Write(b)
}

// PlainMCP is the guard of an MCP listener that checks no caller: it
// bounds bodies and their values (MaxElements), refuses large JSON-RPC
// batches and answers in JSON-RPC;
// the requests and bodies it holds at once are bounded by a budget of
// the default size, per peer host.
func PlainMCP(maxBody int64) Guard {
	return Guard{MaxBody: maxBody, ReadWait: BodyReadWait, CheckBody: CheckMCPBody, CountValues: true, ValueCost: MCPValueCost, JSONOnly: true, Refuse: RefuseMCP,
		Budget: NewBudget(DefaultBodyBudget, DefaultBodyBudgetPerClient), Messages: MCPMessages}
}

// SmallBody: a request whose body declares this many bytes or fewer is
// never refused for the rate of body bytes (NewBodyRate), only charged:
// such requests are bounded by the rate of requests, and refusing them
// broke what small calls do beside a flood that kept the shared rate
// past (the twenty-ninth hostile pass: a 429 on an MCP
// notifications/initialized left the session uninitialized, every later
// tools/call in it failing).
const SmallBody = 1 << 10

// MCPValueCost is what each value of an MCP request weighs in the rates
// of body bytes (Guard.ValueCost) beside its bytes: the MCP SDK decodes
// a request's parts into maps and slices of any several times (the
// message, then params, then a tool call's arguments against the tool's
// schema), about 200-300 ns a value where protobuf costs 46. The
// twenty-eighth hostile pass's 64 KiB of 32,700 zeros cost 6.2 ms as a
// tools/call's arguments, 9.7 ms in initialize's capabilities (15 and 19
// times the client's CPU), within the rates at server.ValueCost's 16
// bytes a value 2.2 and 3.0 times. A tool call of an honest client holds
// tens of values, a few thousand at most (64 bytes each: a few hundred
// KiB against a burst of 64 MiB).
const MCPValueCost = 64

// maxMCPBatch is the most messages one JSON-RPC batch may hold on an MCP
// listener (protocol versions before 2025-06-18 allow batches; the SDK
// serves every message of one). Without a bound one POST of 4 MiB held
// about 25,000 tool calls: the hostile pass's 3.3 MB batch of 20,000
// search_tools ran for 53 s, raised the daemon's peak memory by 280 MB
// and made another client's small Routes time out. As many as an Embed
// call may carry texts (--max-batch's default).
const maxMCPBatch = 64

// CheckMCPBody is the MCP listeners' check of a body read whole, in one
// pass over it (skimMCP): a JSON-RPC batch (a body that is a JSON array)
// of more than maxMCPBatch messages is refused, and so is a message whose
// method, params.name or params.uri is past its bound. Any other body
// passes to the SDK, which parses it (and answers what does not parse).
func CheckMCPBody(body []byte) error {
	msgs, n, batch, ok := skimMCP(body)
	if !ok {
		return nil
	}
	if batch && n > maxMCPBatch {
		return status.Errorf(codes.InvalidArgument, "a JSON-RPC batch of %d messages: at most %d per request", n, maxMCPBatch)
	}
	for _, m := range msgs {
		switch {
		case m.method > maxMCPMethod:
			return status.Errorf(codes.InvalidArgument, "a JSON-RPC method of %d bytes: at most %d", m.method, maxMCPMethod)
		case m.name > maxMCPName:
			return status.Errorf(codes.InvalidArgument, "params.name of %d bytes: at most %d", m.name, maxMCPName)
		case m.uri > maxMCPURI:
			return status.Errorf(codes.InvalidArgument, "params.uri of %d bytes: at most %d", m.uri, maxMCPURI)
		case m.key > maxMCPKey:
			return status.Errorf(codes.InvalidArgument, "an object key of %d bytes: at most %d", m.key, maxMCPKey)
		case m.meta > maxMCPMeta:
			return status.Errorf(codes.InvalidArgument, "params._meta of %d bytes: at most %d", m.meta, maxMCPMeta)
		}
	}
	return nil
}

// MCPMessages is how many JSON-RPC messages body holds: a batch's, else 1
// (Guard.Messages).
func MCPMessages(body []byte) int {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return 1
	}
	if _, n, _, ok := skimMCP(b); ok && n > 1 {
		return n
	}
	return 1
}

// The longest method, tool or prompt name (params.name) and resource URI
// (params.uri) an MCP request may carry. The SDK quotes an unknown
// method or tool in its error, escaped: the twelfth hostile pass sent a
// 4 MB name of DEL bytes (0x7f, raw in a JSON string) and got a 20 MB
// answer (a 16 MB 400 for a method), six held unread +200 MB, with any
// token. MCP's methods are a few dozen bytes; the spec asks tool names of
// at most 128 characters.
//
// Any object key (a tool call's argument names) is bounded too: the SDK's
// argument validation quotes an unexpected property's name, and the
// thirteenth hostile pass got a 15 MB answer for a 3 MB one (six unread:
// the proxy's RSS 233 -> 738 MB).
//
// params._meta is bounded as sent: the SDK decodes it into a map several
// times for every request (extractRequestMeta, validateRequestMeta), and
// the twenty-seventh hostile pass's pings carrying 32,700 zeros in it
// (64 KiB) cost about 10 ms each, 4.9 times the client's CPU. A client
// puts a progress token and a few keys there.
const (
	maxMCPMethod = 128
	maxMCPName   = 512
	maxMCPURI    = 8 << 10
	maxMCPKey    = 1 << 10
	maxMCPMeta   = 4 << 10
)

// refuseMCP answers a request the guard refuses with a JSON-RPC error:
// under the request's id when it is refused before its body is read (401,
// 403: WriteMCPError reads a little of it for the id), under none when
// the body is the fault (413, 415, 400), which is not read again.
func RefuseMCP(w http.ResponseWriter, r *http.Request, code int, err error) {
	switch code {
	case http.StatusUnauthorized:
		WriteMCPError(w, r, code, CodeUnauthenticated, err)
	case http.StatusForbidden:
		WriteMCPError(w, r, code, CodePermissionDenied, err)
	case http.StatusRequestEntityTooLarge:
		WriteMCPErrorNoID(w, code, CodeTooLarge, err)
	case http.StatusUnsupportedMediaType:
		WriteMCPErrorNoID(w, code, CodeUnsupportedEncoding, err)
	case http.StatusTooManyRequests:
		if errors.As(err, new(errRequestRate)) {
			// Refused past the caller's rate of requests: before its body
			// was read (a batch's, once read, was taken: no id is found).
			WriteMCPError(w, r, code, CodeResourceExhausted, err)
			return
		}
		WriteMCPErrorNoID(w, code, CodeInvalidRequest, err)
	default:
		WriteMCPErrorNoID(w, code, CodeInvalidRequest, err)
	}
}

// refusalReadWait bounds how long WriteMCPError reads the body of a
// request it refuses, for the request's id.
const refusalReadWait = 5 * time.Second

// JSON-RPC error codes of mcpGate's answers and of refused sessions
// (refuseSession), in the range JSON-RPC leaves to implementations; the
// last digits echo the HTTP status (401, 403, 413, 415, 429, 503).
const (
	CodeUnauthenticated     = -32001
	CodePermissionDenied    = -32003
	CodeTooLarge            = -32013
	CodeUnsupportedEncoding = -32015
	CodeResourceExhausted   = -32029
	CodeUnavailable         = -32053
	// CodeInvalidRequest is JSON-RPC's own: a body that could not be
	// read to its end.
	CodeInvalidRequest = -32600
)

// WriteMCPError answers r with the HTTP status and a JSON-RPC error whose
// message is err in mcpserver.ToolError's spelling ("UNAUTHENTICATED:
// missing bearer token ..."), under the id of the request in r's body
// when it has one, so the client can match it to its call.
// The body is read for at most refusalReadWait: a refused client that
// sends it slowly, or never ends it, does not hold its connection.
func WriteMCPError(w http.ResponseWriter, r *http.Request, code int, rpcCode int64, err error) {
	var id jsonrpc.ID
	if r.Method == http.MethodPost && r.Body != nil {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusalReadWait))
		body, _ := io.ReadAll(io.LimitReader(r.Body, refusalReadBytes))
		if v, ok := leadingID(body); ok {
			id = v
		}
	}
	writeMCPError(w, code, id, rpcCode, err)
}

// WriteMCPErrorNoID is WriteMCPError for a request whose body is not read
// again (too large, compressed, cut short): the error's id is null.
func WriteMCPErrorNoID(w http.ResponseWriter, code int, rpcCode int64, err error) {
	writeMCPError(w, code, jsonrpc.ID{}, rpcCode, err)
}

func writeMCPError(w http.ResponseWriter, code int, id jsonrpc.ID, rpcCode int64, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if data, err := encodeMCPError(id, rpcCode, err); err == nil {
		_, _ = w.Write(data)
	}
}

// encodeMCPError is a JSON-RPC error response under id, or under
// "id": null when id is none (not found: past the first bytes of the
// body, a batch, a notification, a body not read). JSON-RPC 2.0 asks
// for null "if there was an error in detecting the id"; the SDK's
// encoder leaves out an id it does not hold, so that answer is written
// here, in the SDK's member order (the nineteenth hostile pass, LOW 8:
// a 429 past the rate had no id member at all).
func encodeMCPError(id jsonrpc.ID, rpcCode int64, err error) ([]byte, error) {
	e := &jsonrpc.Error{Code: rpcCode, Message: mcpserver.ToolError(err).Error()}
	if id.IsValid() {
		return jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the SDK's encoder
	if err := enc.Encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", json.RawMessage("null"), e}); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// refusalReadBytes is what WriteMCPError reads of a refused request's
// body for its id: a client sends "jsonrpc", "id" and "method" first.
// It read 64 KiB, and a body longer than that never decoded: 750 KB
// bodies with no token cost the proxy 2.2 times its client's CPU (the
// sixteenth hostile pass).
const refusalReadBytes = 4 << 10

// leadingID is the id of the JSON-RPC request of which body is the start
// (rpcid.Leading), as the SDK holds it.
func leadingID(body []byte) (jsonrpc.ID, bool) {
	raw, ok, _ := rpcid.Leading(body, false)
	if !ok {
		return jsonrpc.ID{}, false
	}
	// The SDK's reading of that id (a number it cannot hold is no id).
	if req, ok := decodeRequest([]byte(`{"jsonrpc":"2.0","method":"x","id":` + string(raw) + `}`)); ok {
		return req.ID, true
	}
	return jsonrpc.ID{}, false
}

func decodeRequest(body []byte) (*jsonrpc.Request, bool) {
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil, false
	}
	req, ok := msg.(*jsonrpc.Request)
	return req, ok && req.ID.IsValid()
}
