package mcpsrc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/rpcid"
)

// MaxMessage bounds one message a backend sends, in bytes of its JSON
// line (stdio, an SSE data line) or its HTTP body (a streamable JSON
// answer). A larger message is skipped while it is read: the request it
// answers gets a JSON-RPC error of code CodeMessageTooLarge, and one
// that answers nothing (a notification, or an answer whose id could not
// be read) becomes a warning. Without it a backend's answer was read
// whole, up to the SDK's 16 MiB a line, and decoded before its size was
// known: 8 callers of a tool answering 15 MB used 1.38 cores of the
// proxy (the fifteenth hostile pass). mcpserver passes on answers of
// MaxForwardedAnswer (4 MiB) at most; the fifth more leaves room for
// JSON's escapes.
const MaxMessage = 5 << 20

// CodeMessageTooLarge is the JSON-RPC error code of an answer over
// MaxMessage (the range -32000..-32099 is the implementation's).
const CodeMessageTooLarge = -32050

// capRead is the buffer of a capped reader: a message's bytes are kept
// until its end (or MaxMessage), then passed on whole.
const capRead = 64 << 10

// capReader passes on the messages of r whole, each ended by sep ('\n'
// for lines; 0, which JSON never holds raw, for a body that is one
// message), and replaces one over limit bytes by what tooLarge makes of
// its first and last bytes, reading the rest of it without keeping it.
type capReader struct {
	r     *bufio.Reader
	sep   byte
	limit int

	msg  []byte // the message read so far, at most limit bytes
	out  []byte // what Read passes on next
	over bool   // msg went past limit: what follows is skipped
	head []byte // an over-long message's first bytes
	tail []byte // its last bytes
	n    int64  // its length
	err  error  // r's error, passed on once out is empty

	// events makes a message an SSE event: its lines up to a blank line
	// (the SDK joins an event's data lines whatever their number: capped
	// by the line, 50 lines of 5 MiB made one answer of 250 MB, the
	// sixteenth hostile pass). lineLen is the current line's bytes so far.
	events     bool
	lineLen    int
	eventLines int // the current event's lines so far
	// unheard drops the notifications classifierd has no handler for
	// (unheard).
	unheard bool

	// tooLarge is the message that replaces an over-long one of n bytes.
	tooLarge func(head, tail []byte, n int64) []byte
}

func newCapReader(r io.Reader, sep byte, limit int) *capReader {
	return &capReader{r: bufio.NewReaderSize(r, capRead), sep: sep, limit: limit, tooLarge: tooLargeMessage}
}

// unheard reports whether msg, a whole message (a line, an SSE event),
// is a notification the pool has no handler for: every one but
// notifications/tools/list_changed. The SDK decoded each before dropping
// it: a backend sending progress notifications during a call (44,598 in
// 10 s) cost the proxy 7.4 s of CPU against its own 0.9 s (the sixteenth
// hostile pass). Read from the message's first bytes, where every SDK
// writes the method of a notification (it has no id, and no result
// before it); a message so written that is not a notification answers
// nothing the pool waits for either.
func unheard(msg []byte) bool {
	body := msg
	if i := dataLine(msg[:min(len(msg), 512)]); i >= 0 {
		body = msg[i+len("data:"):]
		if j := bytes.IndexByte(body, '\n'); j >= 0 {
			body = body[:j] // the event's first data line (MaxEventLines bound the rest)
		}
	}
	// The top-level members, whatever their order (the re-verification
	// of the sixteenth pass's fix: a notification whose params came
	// before its method was decoded, 0.17 ms each): a method naming a
	// notification, and no id, result or error.
	method, answer := topLevel(body)
	return !answer && strings.HasPrefix(method, "notifications/") && method != "notifications/tools/list_changed"
}

// topLevel reads the top-level members of the JSON object b, without
// decoding it: the string value of "method", and whether an "id",
// "result" or "error" is among them. Keys are compared unescaped.
func topLevel(b []byte) (method string, answer bool) {
	depth := 0
	expectKey, wantValue := false, false
	var key []byte // the last top-level key, quoted
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return method, answer
			}
			if depth == 1 {
				switch {
				case expectKey:
					key, expectKey = b[i:j+1], false
				case wantValue:
					if keyIs(key, "method") {
						_ = json.Unmarshal(b[i:j+1], &method)
					}
					wantValue = false
				}
			}
			i = j
		case '{', '[':
			wantValue = false
			if depth++; depth == 1 && c == '{' {
				expectKey = true
			}
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				expectKey, wantValue = true, false
			}
		case ':':
			if depth == 1 {
				wantValue = true
				if keyIs(key, "id") || keyIs(key, "result") || keyIs(key, "error") {
					answer = true
				}
			}
		case ' ', '\t', '\r', '\n':
		default:
			if depth == 1 {
				wantValue = false // a number or a literal
			}
		}
	}
	return method, answer
}

// keyIs reports whether quoted, a JSON string, is name.
func keyIs(quoted []byte, name string) bool {
	if len(quoted) < 2 {
		return false
	}
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1:len(quoted)-1]) == name
	}
	var k string
	return json.Unmarshal(quoted, &k) == nil && k == name
}

// backendReader is c reading a backend: notifications the pool does not
// handle are dropped (unheard).
func backendReader(c *capReader) *capReader {
	c.unheard = true
	return c
}

// MaxEventLines bounds the lines of one SSE event (the SDK writes one
// data line an event, and an id and an event line).
const MaxEventLines = 64

// newEventCapReader caps the events of an SSE stream at limit bytes and
// MaxEventLines lines each.
func newEventCapReader(r io.Reader, limit int) *capReader {
	c := newCapReader(r, '\n', limit)
	c.events = true
	return c
}

const (
	capHead = 64 << 10 // enough for the id before a result
	capTail = 1 << 10  // enough for the id after one (TypeScript servers write it last)
)

func (c *capReader) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.fill()
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	if len(c.out) == 0 && cap(c.msg) > 4*capRead {
		c.msg = nil // a large message's buffer is not kept for the next
	}
	return n, nil
}

// fill reads on until a message ends, or r fails.
func (c *capReader) fill() {
	for {
		chunk, err := c.r.ReadSlice(c.sep)
		if c.over {
			c.n += int64(len(chunk))
			c.keepTail(chunk)
		} else if len(c.msg)+len(chunk) <= c.limit {
			c.msg = append(c.msg, chunk...)
		} else {
			c.over = true
			c.n = int64(len(c.msg) + len(chunk))
			c.head = append(c.head[:0], c.msg[:min(len(c.msg), capHead)]...)
			if len(c.head) < capHead {
				c.head = append(c.head, chunk[:min(len(chunk), capHead-len(c.head))]...)
			}
			c.tail = c.tail[:0]
			c.keepTail(c.msg)
			c.keepTail(chunk)
			c.msg = c.msg[:0]
		}
		lineEnded := err == nil
		if c.events {
			c.lineLen += len(chunk)
			if lineEnded {
				// An event ends at a blank line.
				blank := c.lineLen == len(chunk) && (string(chunk) == "\n" || string(chunk) == "\r\n")
				c.lineLen = 0
				if c.eventLines++; blank {
					c.eventLines = 0
				} else if c.eventLines > MaxEventLines && !c.over {
					// As long as it is over the cap: the SDK joins an
					// event's lines, 28 ms for 40,000 tiny ones (the
					// re-verification of the sixteenth pass).
					c.over, c.n = true, int64(len(c.msg))
					c.head = append(c.head[:0], c.msg[:min(len(c.msg), capHead)]...)
					c.tail = c.tail[:0]
					c.keepTail(c.msg)
					c.msg = c.msg[:0]
				}
				lineEnded = blank
			}
		}
		ended := lineEnded || (err == io.EOF && (c.over || len(c.msg) > 0))
		if ended {
			if c.over {
				c.out = c.tooLarge(c.head, c.tail, c.n)
				if c.events {
					c.out = append(c.out, "\n\n"...)
				} else if c.sep != 0 {
					c.out = append(c.out, c.sep)
				}
				c.over, c.head, c.tail = false, nil, nil
			} else if c.unheard && unheard(c.msg) {
				c.msg, ended = c.msg[:0], false // dropped: read on
			} else {
				c.out, c.msg = c.msg, c.msg[len(c.msg):]
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			c.err = err
		}
		if ended || c.err != nil {
			return
		}
	}
}

func (c *capReader) keepTail(b []byte) {
	if len(b) >= capTail {
		c.tail = append(c.tail[:0], b[len(b)-capTail:]...)
		return
	}
	c.tail = append(c.tail, b...)
	if len(c.tail) > capTail {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-capTail:]...)
	}
}

// tooLargeMessage answers the request an over-long message answers with
// CodeMessageTooLarge, or, when no id can be read from its first or last
// bytes, is a warning that it was skipped. An SSE data line stays one.
func tooLargeMessage(head, tail []byte, n int64) []byte {
	var prefix []byte
	if i := dataLine(head); i >= 0 { // an SSE event: its other fields are dropped
		prefix, head = []byte("data: "), bytes.TrimLeft(head[i+len("data:"):], " ")
		tail = bytes.TrimRight(tail, "\r\n")
		if j := bytes.LastIndex(tail, []byte("\ndata:")); j >= 0 {
			tail = bytes.TrimLeft(tail[j+len("\ndata:"):], " ")
		}
	}
	msg := fmt.Sprintf("RESOURCE_EXHAUSTED: the server's message is %d bytes, over the %d classifierd reads", n, MaxMessage)
	var b []byte
	if id, ok := messageID(head, tail); ok {
		b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": CodeMessageTooLarge, "message": msg}})
	} else {
		b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
			"params": map[string]any{"level": "warning", "logger": "classifierd", "data": msg + "; it answered no request classifierd could name, and was skipped"}})
	}
	return append(prefix, b...)
}

// dataLine is where head's first SSE data line starts, or -1 when head
// does not start as an SSE event (with a field name, a comment, or data).
func dataLine(head []byte) int {
	for i := 0; i < len(head); {
		line := head[i:]
		if bytes.HasPrefix(line, []byte("data:")) {
			return i
		}
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) > 16 || bytes.ContainsAny(name, "{\"\n") {
			return -1 // JSON, not a field line
		}
		nl := bytes.IndexByte(line, '\n')
		if nl < 0 {
			return -1
		}
		i += nl + 1
	}
	return -1
}

// idLast is a top-level id written last, as the TypeScript SDK writes
// an answer ({"result":...,"jsonrpc":"2.0","id":7}), or before jsonrpc.
var idLast = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.){0,256}")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$`)

// messageID is the id of the JSON-RPC message of which head is the first
// bytes and tail the last: read as the first members of the object until
// one cannot be read whole (rpcid.Leading), else from its end. A message
// with a method is a request of the server's (the Go SDK writes its id
// first): its id is not one of ours.
func messageID(head, tail []byte) (any, bool) {
	if id, ok, request := rpcid.Leading(head, true); request {
		return nil, false
	} else if ok {
		return validID(id)
	}
	if m := idLast.FindSubmatch(bytes.TrimRight(tail, "\r\n")); m != nil {
		return validID(m[1])
	}
	return nil, false
}

// validID is raw as a JSON-RPC id: a number or a string.
func validID(raw []byte) (any, bool) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil, false
	}
	switch v.(type) {
	case json.Number, string:
		return v, true
	}
	return nil, false
}

// cappedBody caps a response's body: an SSE stream by the line, a JSON
// answer whole. The request's other bodies (202s, errors) are left.
func cappedBody(body io.ReadCloser, contentType string) io.ReadCloser {
	mt, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	switch strings.TrimSpace(mt) {
	case "text/event-stream":
		return readCloser{backendReader(newEventCapReader(body, MaxMessage+1024)), body}
	case "application/json":
		return readCloser{newCapReader(body, 0, MaxMessage), body}
	}
	return body
}

type readCloser struct {
	io.Reader
	io.Closer
}

// commandTransport is mcp.CommandTransport with the server's output read
// through a capReader (MaxMessage a line): the SDK's reads it whole, up
// to 16 MiB a line, and no reader can be put in front of its pipe.
type commandTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	tr := &mcp.IOTransport{
		// The connection is closed by closing stdin (stdinCloser), not stdout.
		Reader:        readCloser{backendReader(newCapReader(stdout, '\n', MaxMessage)), nopCloser{}},
		Writer:        &stdinCloser{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate},
		MaxLineLength: MaxMessage + 1,
	}
	return tr.Connect(ctx)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// stdinCloser ends a stdio server as the specification says (and as
// mcp.CommandTransport does): stdin closed, then SIGTERM if it has not
// exited after terminate, then SIGKILL after as long again.
type stdinCloser struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
}

func (s *stdinCloser) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-done:
			return err, true
		case <-time.After(s.terminate):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server did not exit after SIGKILL")
}
