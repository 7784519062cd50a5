package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxJSONDepth is how deeply a message read by StdioTransport may nest
// arrays and objects: the SDK's own bound on the messages of the HTTP
// listener, so both transports accept the same messages.
const MaxJSONDepth = 1000

// MaxBatchedRequests bounds the request ids StdioTransport remembers from
// JSON-RPC batches (see frameReader.batch): past it, a session sends one
// message per line.
const MaxBatchedRequests = 4096

// StdioTransport is the transport classifierd serves MCP with on stdin and
// stdout: the SDK's newline-delimited JSON (mcp.IOTransport) behind a
// reader that hands the SDK only lines it can take. The SDK's reader ends
// the session, and with it `classifierd mcp`, on the first line that is
// not JSON, nests deeper than its decoder allows or is longer than its
// limit; here such a line is answered with a JSON-RPC error and the next
// one is read:
//
//   - longer than maxBytes: skipped as it streams in (never held whole,
//     so memory stays within maxBytes and a read buffer), and answered
//     -32600 with data {"reason":"INPUT_TOO_LARGE","max_bytes":maxBytes};
//   - arrays and objects nested deeper than MaxJSONDepth: -32600;
//   - not JSON: -32700 (parse error);
//   - JSON that is not a JSON-RPC 2.0 message (no "jsonrpc":"2.0", an id
//     that is not a string or number, a response without an id), or a
//     batch the SDK would end the session for: -32600.
//
// Errors carry the request's id when one could be read, else null, as
// JSON-RPC 2.0 says. Answers and the SDK's messages share out, one whole
// line at a time. log, if set, gets each refusal at debug level: its
// reason and size, never its content.
func StdioTransport(in io.ReadCloser, out io.Writer, maxBytes int, log *slog.Logger) mcp.Transport {
	w := &lineWriter{w: out}
	r := &frameReader{in: bufio.NewReaderSize(in, 64<<10), c: in, out: w, max: maxBytes, log: log}
	// The SDK's own limit is a backstop: every line it reads here is at
	// most maxBytes and a newline.
	return &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: maxBytes + 1024}
}

// lineWriter writes whole messages to w under a lock, so an error answer
// never lands inside a message of the SDK's (it writes each message,
// newline included, in one Write).
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close leaves the writer open: stdout outlives the session.
func (l *lineWriter) Close() error { return nil }

// frameReader reads newline-delimited messages from in and gives the SDK
// the valid ones, a line at a time, answering the others on out.
type frameReader struct {
	in  *bufio.Reader
	c   io.Closer
	out *lineWriter
	max int
	log *slog.Logger

	buf     []byte // the line being read
	pending []byte // the rest of a valid line (and its newline) for the SDK
	err     error  // the input's end or failure, once every line before it is out

	// version is the protocol version the client's initialize asked for;
	// batched are the ids of requests the client sent in batches.
	version string
	batched map[string]bool
}

// Read implements io.Reader for the SDK's decoder.
func (r *frameReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, tooLong, err := r.readLine()
		switch {
		case tooLong > 0:
			r.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: message over %d bytes, skipped", r.max),
				map[string]any{"reason": "INPUT_TOO_LARGE", "max_bytes": r.max}, "too large", tooLong)
		case len(line) > 0:
			r.check(line)
		}
		if err != nil {
			r.err = err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// Close closes the input, which ends a Read waiting on it.
func (r *frameReader) Close() error { return r.c.Close() }

// readLine returns the next line without its newline and surrounding
// white space; a line longer than r.max is read to its end and dropped,
// and tooLong is its length. err is the input's end or failure, after the
// line that preceded it.
func (r *frameReader) readLine() (line []byte, tooLong int, err error) {
	if cap(r.buf) > 64<<10 {
		r.buf = nil // do not keep a large line's buffer for small ones
	}
	r.buf = r.buf[:0]
	n := 0
	for {
		chunk, err := r.in.ReadSlice('\n')
		n += len(chunk)
		if n <= r.max+1 { // +1: the newline
			r.buf = append(r.buf, chunk...)
		} else {
			r.buf = nil // past the limit: skip the rest as it comes
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && n == 0 {
			return nil, 0, err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, err // a failed read: a partial line is no message
		}
		line = bytes.TrimSpace(r.buf)
		if n > r.max+1 || (len(line) > r.max) {
			return nil, n, err
		}
		return line, 0, err
	}
}

// check hands line to the SDK if it can take it, else answers it.
func (r *frameReader) check(line []byte) {
	if jsonDepth(line) > MaxJSONDepth {
		r.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: JSON nested deeper than %d levels", MaxJSONDepth),
			nil, "too deep", len(line))
		return
	}
	if !json.Valid(line) {
		r.refuse(nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON", nil, "not JSON", len(line))
		return
	}
	if line[0] == '[' {
		if why := r.batch(line); why != "" {
			r.refuse(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: "+why, nil, "bad batch", len(line))
			return
		}
	} else {
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			r.refuse(messageID(line), jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message", nil, "not JSON-RPC", len(line))
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(req.Params, &p) == nil {
				r.version = p.ProtocolVersion
			}
		}
	}
	r.buf = append(line, '\n')
	r.pending = r.buf
}

// batch says why the SDK cannot take the JSON-RPC batch line ("" if it
// can). The SDK ends the session, rather than answering, for a batch once
// the session speaks 2025-06-18 or later (which dropped batching), an
// empty one, an element that is not a JSON-RPC message, and a request id
// used twice in a batch or in two unanswered ones. So a batch passes only
// in a session whose initialize asked for an older version the SDK
// speaks, and only if none of its request ids was ever batched before in
// the session (at most MaxBatchedRequests of them).
func (r *frameReader) batch(line []byte) string {
	if r.version == "" || r.version >= "2025-06-18" || !slices.Contains(mcp.SupportedProtocolVersions(), r.version) {
		return "JSON-RPC batches are not supported in this protocol version; send one message per line"
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
		return "an empty batch"
	}
	var ids []string
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return "a batch element is not a JSON-RPC 2.0 message"
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			id := fmt.Sprintf("%T:%v", req.ID.Raw(), req.ID.Raw())
			if r.batched[id] || slices.Contains(ids, id) {
				return "a batch reuses the id of a batched request; use a new id"
			}
			ids = append(ids, id)
		}
	}
	if len(r.batched)+len(ids) > MaxBatchedRequests {
		return fmt.Sprintf("more than %d batched requests in this session; send one message per line", MaxBatchedRequests)
	}
	if r.batched == nil {
		r.batched = map[string]bool{}
	}
	for _, id := range ids {
		r.batched[id] = true
	}
	return ""
}

// refuse answers a line the SDK cannot take with a JSON-RPC error.
func (r *frameReader) refuse(id json.RawMessage, code int64, msg string, data any, why string, size int) {
	if r.log != nil {
		r.log.Debug("MCP message refused", "why", why, "bytes", size)
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg, data}})
	if err != nil {
		return // cannot happen: every field marshals
	}
	_, _ = r.out.Write(append(b, '\n'))
}

// messageID is the id of a JSON object line if it is a valid JSON-RPC id
// (a string or a number), else nil.
func messageID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	switch m.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return m.ID
	}
	return nil
}

// jsonDepth is how deeply b nests arrays and objects, reading it as JSON
// would (brackets inside strings do not count) without checking the rest
// of its syntax; it stops counting past MaxJSONDepth.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > MaxJSONDepth {
					return deepest
				}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
