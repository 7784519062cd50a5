package httpguard

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/classifierd/classifierd/server"
)

// MaxElements (server.MaxValues) is the most values one request body may
// hold on --http-listen and the MCP listeners (the daemon's and the proxy's)
// (JSON objects, arrays and their members; protobuf fields, each element
// of a repeated field one), counted before it is decoded. Decoding costs
// memory per value, not per byte: the tenth hostile pass's 4 MiB Route of
// 1.4 million empty messages ({} each, 3 bytes) cost 470 MB and 7.6 s of
// CPU to be refused "1398070 messages, limit 64", three at once by one
// identity 1.5 GB; over gRPC-Web 2 million (2 bytes each) 350 MB; as a
// tool call's arguments on an MCP listener 135 MB each, three at once
// +405 MB in the proxy (whose manifest allows 512 Mi). The
// largest request the API takes at its defaults holds a few thousand
// (AnalyzePrompt's 1,024 valid_categories, 64 messages or texts), so this
// is room for limits raised sixteen-fold; 65,536 values decode in about
// 22 MB.
const MaxElements = server.MaxValues

// errTooManyElements is a body past MaxElements.
var errTooManyElements = server.ErrTooManyValues

// CheckElements refuses (INVALID_ARGUMENT) a request body of
// more than MaxElements values, counted without decoding: a JSON body
// (REST, Connect JSON, enveloped +json) by its structure outside strings,
// a protobuf body (Connect, gRPC and gRPC-Web +proto) by its fields, along
// the method's request message found from the path. A body whose method
// is unknown or that does not parse is left to the decoder, which answers
// its own error.
func CheckElements(path, contentType string, body []byte) error {
	_, err := countElements(path, contentType, body)
	return err
}

// countElements is CheckElements with the count of the body's values
// (as far as it counted: MaxElements+1 for a body past it, 0 for one it
// does not count).
func countElements(path, contentType string, body []byte) (int, error) {
	ct := mediaType(contentType)
	var n int
	var err error
	switch {
	case enveloped(ct) && strings.HasSuffix(ct, "json"):
		// Each message's JSON apart: a prefix's bytes are not JSON (a
		// length byte of '"' opened a string that hid what followed).
		var j jsonCounter
		err = eachMessage(body, func(msg []byte) error {
			j.newMessage()
			return j.feed(msg)
		})
		n = j.n
	case strings.Contains(ct, "json") || ct == "":
		n, err = jsonValues(body)
	case enveloped(ct):
		md := requestDescriptor(path)
		if md == nil {
			return 0, nil
		}
		err = eachMessage(body, func(msg []byte) error { return server.CountProtoValues(msg, md, &n) })
	case strings.HasSuffix(ct, "proto") || strings.HasSuffix(ct, "protobuf"):
		if md := requestDescriptor(path); md != nil {
			err = server.CountProtoValues(body, md, &n)
		}
	}
	return n, elementsRefusal(err)
}

// elementsRefusal is the refusal of a body for err, a counter's error
// (nil if it is none of the bounds').
func elementsRefusal(err error) error {
	if errors.Is(err, errTooManyElements) {
		return status.Errorf(codes.InvalidArgument, "request body holds more than %d values: at most %d per request", MaxElements, MaxElements)
	}
	if errors.Is(err, server.ErrUnknownFields) {
		return server.UnknownFieldsRefusal()
	}
	if errors.Is(err, errTooManyMembers) || errors.Is(err, errTooManyMembersTogether) {
		return err
	}
	return nil
}

// jsonBody reports whether CheckElements counts a body of contentType as
// plain JSON (not enveloped).
func jsonBody(contentType string) bool {
	ct := mediaType(contentType)
	return !enveloped(ct) && (strings.Contains(ct, "json") || ct == "")
}

// mediaType is a Content-Type's media type, in lower case, without its
// parameters.
func mediaType(contentType string) string {
	ct := strings.ToLower(strings.TrimSpace(contentType))
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = strings.TrimSpace(ct[:i])
	}
	return ct
}

// eachMessage calls f with each message of an enveloped body (5-byte
// prefixes: flags, big-endian length) until f fails, stopping at a
// prefix cut short or declaring more than the body holds
// (checkEnvelopes refuses those).
func eachMessage(body []byte, f func(msg []byte) error) error {
	for rest := body; len(rest) >= 5; {
		size := uint64(binary.BigEndian.Uint32(rest[1:5]))
		if size > uint64(len(rest)-5) {
			return nil
		}
		if err := f(rest[5 : 5+size]); err != nil {
			return err
		}
		rest = rest[5+size:]
	}
	return nil
}

// countingReader counts the JSON values of what it reads (jsonCounter),
// failing the read at a bound broken.
type countingReader struct {
	r io.Reader
	c jsonCounter
}

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if cerr := cr.c.feed(p[:n]); cerr != nil {
		return n, cerr
	}
	return n, err
}

// jsonValues counts the values of a JSON text past which it stops, up
// to MaxElements+1: each '{' and '[' and each ',' outside strings (a
// member or element after the first). Whether the text is valid JSON is
// the decoder's to say.
func jsonValues(b []byte) (int, error) {
	var c jsonCounter
	err := c.feed(b)
	return c.n, err
}

// jsonCounter is jsonValues fed a text in pieces, as it is read: a body
// past a bound is refused at the byte that breaks it, not once read
// whole (60,000 keys in 769 KB were read and scanned, then refused, at
// 6 times the client's CPU: the sixteenth pass's re-verification).
type jsonCounter struct {
	n                 int
	inString, escaped bool
	// members counts the members of each object open (-1: an array),
	// tracked to maxTrackedDepth; deeper nesting is the decoder's to
	// refuse.
	members []int
	depth   int   // containers open, tracked or not
	total   int   // members of every object after their first
	err     error // the bound broken, once one is
}

// newMessage starts the count of another message of the same body: the
// values and members counted so far stay counted.
func (j *jsonCounter) newMessage() {
	j.inString, j.escaped, j.members, j.depth = false, false, j.members[:0], 0
}

// feed counts b, which follows what was fed before; it returns
// errTooManyElements or errTooManyMembers at the first byte past a
// bound (and then on every call).
func (j *jsonCounter) feed(b []byte) error {
	if j.err != nil {
		return j.err
	}
	for _, c := range b {
		if j.inString {
			switch {
			case j.escaped:
				j.escaped = false
			case c == '\\':
				j.escaped = true
			case c == '"':
				j.inString = false
			}
			continue
		}
		switch c {
		case '"':
			j.inString = true
		case '{', '[', ',':
			if j.n++; j.n > MaxElements {
				j.err = errTooManyElements
				return j.err
			}
			switch {
			case c == ',':
				if j.depth == len(j.members) && j.depth > 0 && j.members[j.depth-1] >= 0 {
					j.total++
					if j.members[j.depth-1]++; j.members[j.depth-1] >= MaxObjectMembers {
						j.err = errTooManyMembers
						return j.err
					}
					if j.total >= MaxObjectMembers*4 {
						j.err = errTooManyMembersTogether
						return j.err
					}
				}
			case j.depth >= maxTrackedDepth:
				j.depth++ // deeper than tracked: counted, not followed
			case c == '{':
				j.depth++
				j.members = append(j.members, 0)
			default:
				j.depth++
				j.members = append(j.members, -1)
			}
		case '}', ']':
			if j.depth > 0 {
				if j.depth == len(j.members) {
					j.members = j.members[:j.depth-1]
				}
				j.depth--
			}
		}
	}
	return nil
}

// MaxObjectMembers bounds the members of one JSON object in a request
// body (MaxElements bounds the values of the whole). Decoding, checking
// against a schema and encoding again an object of many keys costs far
// more than an array as long: a tool call whose arguments held 60,000
// keys (769 KB, under MaxElements) took the proxy about 0.4 s of CPU,
// most of it hashing and sorting the keys (the sixteenth hostile pass).
// No request of the API or of an MCP tool needs more than a few hundred.
// The objects of one body hold 4 times as many at most together (15
// objects of 4,095 members cost as much as one of 60,000: the
// re-verification of the sixteenth pass).
const MaxObjectMembers = 4096

const maxTrackedDepth = 1 << 12

// errTooManyMembers is a JSON object past MaxObjectMembers, and
// errTooManyMembersTogether a body whose objects are past it together
// (4 times it).
var (
	errTooManyMembers         = status.Errorf(codes.InvalidArgument, "a JSON object of the request holds more than %d members", MaxObjectMembers)
	errTooManyMembersTogether = status.Errorf(codes.InvalidArgument, "the JSON objects of the request hold more than %d members together", MaxObjectMembers*4)
)

// requestDescriptor is the request message of the RPC at path
// (/package.Service/Method), or nil if no registered service has it.
func requestDescriptor(path string) protoreflect.MessageDescriptor {
	path = strings.TrimPrefix(path, "/")
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(path[:i]))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	m := sd.Methods().ByName(protoreflect.Name(path[i+1:]))
	if m == nil {
		return nil
	}
	return m.Input()
}
