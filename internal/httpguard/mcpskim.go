package httpguard

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// mcpFields are what the MCP checks read of one JSON-RPC message: its
// method, params.name and params.uri, decoded lengths in bytes (every
// occurrence's longest: a key given twice counts at its longest), the
// longest object key anywhere in it (a tool call's argument names), and
// the length in bytes of params._meta as sent (its longest).
type mcpFields struct{ method, name, uri, key, meta int }

// skimMCP reads a body as one JSON-RPC message or a batch (an array of
// them) in one pass over its bytes, decoding nothing but the strings the
// checks bound (and those only when they hold escapes or invalid bytes;
// a plain string's length is its length): the rest (a tool
// call's arguments, megabytes) is skipped as it is scanned. Decoding the
// whole body with encoding/json cost 24 ms a megabyte (65 MB/s, 2 cores
// under load); this runs at memory speed. Keys are matched as
// encoding/json matches a struct's fields, case-insensitively, after
// their escapes. ok is false for a body that is not JSON this reader
// can follow: the SDK parses it and answers the error. n is the number of
// messages; past maxMCPBatch the rest are counted, not read.
func skimMCP(body []byte) (msgs []mcpFields, n int, batch bool, ok bool) {
	s := skimmer{b: body}
	s.ws()
	if s.at('[') {
		s.i++
		batch = true
		s.ws()
		if s.at(']') {
			return nil, 0, true, true
		}
		for {
			s.ws()
			var f mcpFields
			switch {
			case n >= maxMCPBatch: // refused anyway: counted only
				if !s.value() {
					return nil, 0, true, false
				}
			case s.at('{'):
				if !s.message(&f) {
					return nil, 0, true, false
				}
				msgs = append(msgs, f)
			default:
				if !s.value() {
					return nil, 0, true, false
				}
				msgs = append(msgs, f)
			}
			n++
			s.ws()
			switch {
			case s.at(','):
				s.i++
			case s.at(']'):
				return msgs, n, true, true
			default:
				return nil, 0, true, false
			}
		}
	}
	var f mcpFields
	if !s.at('{') || !s.message(&f) {
		return nil, 0, false, false
	}
	return []mcpFields{f}, 1, false, true
}

type skimmer struct {
	b []byte
	i int
	// longestKey is the decoded length of the longest object key read
	// since it was last reset.
	longestKey int
}

// noteKey counts raw, an object key undecoded, in longestKey: decoded
// only when it is long enough to matter.
func (s *skimmer) noteKey(raw []byte) {
	if len(raw) <= s.longestKey || len(raw) <= maxMCPKey/3 {
		s.longestKey = max(s.longestKey, len(raw))
		return
	}
	s.longestKey = max(s.longestKey, decodedLen(raw))
}

func (s *skimmer) at(c byte) bool { return s.i < len(s.b) && s.b[s.i] == c }

func (s *skimmer) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// str reads a string at s.i (at its quote) and returns what is between
// its quotes, undecoded.
func (s *skimmer) str() ([]byte, bool) {
	if !s.at('"') {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); {
		k := bytes.IndexAny(s.b[j:], `"\`)
		if k < 0 {
			return nil, false
		}
		j += k
		if s.b[j] == '\\' {
			j += 2
			continue
		}
		s.i = j + 1
		return s.b[start:j], true
	}
	return nil, false
}

// decodedLen is the length in bytes of the string raw (undecoded, without
// its quotes) once decoded, as encoding/json decodes it (an invalid byte
// becomes U+FFFD, 3 bytes), or -1 if it does not decode.
func decodedLen(raw []byte) int {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return len(raw)
	}
	v, ok := unquote(raw)
	if !ok {
		return -1
	}
	return len(v)
}

// unquote decodes raw, a JSON string without its quotes, as encoding/json
// does.
func unquote(raw []byte) (string, bool) {
	var v string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return v, json.Unmarshal(q, &v) == nil
}

// key reads an object's key and its colon, and returns the key decoded
// when it may be one of the few the checks want (short), else nil.
func (s *skimmer) key() (string, bool) {
	raw, ok := s.str()
	if !ok {
		return "", false
	}
	s.noteKey(raw)
	s.ws()
	if !s.at(':') {
		return "", false
	}
	s.i++
	s.ws()
	if len(raw) > 64 {
		return "", true // no key the checks want is this long, escaped or not
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), true
	}
	return unquote(raw)
}

// strLen reads a value: a string's decoded length, or -1 for any other
// value, skipped.
func (s *skimmer) strLen() (int, bool) {
	if !s.at('"') {
		return -1, s.value()
	}
	raw, ok := s.str()
	if !ok {
		return 0, false
	}
	return decodedLen(raw), true
}

// object reads an object at s.i, calling field for each key with s.i at
// its value; field reads the value.
func (s *skimmer) object(field func(key string) bool) bool {
	s.i++ // '{'
	s.ws()
	if s.at('}') {
		s.i++
		return true
	}
	for {
		s.ws()
		k, ok := s.key()
		if !ok || !field(k) {
			return false
		}
		s.ws()
		switch {
		case s.at(','):
			s.i++
		case s.at('}'):
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *skimmer) message(f *mcpFields) bool {
	s.longestKey = 0
	defer func() { f.key = s.longestKey }()
	return s.object(func(k string) bool {
		switch {
		case eqFold(k, "method"):
			n, ok := s.strLen()
			f.method = max(f.method, n)
			return ok
		case eqFold(k, "params") && s.at('{'):
			return s.object(func(k string) bool {
				var n int
				var ok bool
				switch {
				case eqFold(k, "name"):
					n, ok = s.strLen()
					f.name = max(f.name, n)
				case eqFold(k, "uri"):
					n, ok = s.strLen()
					f.uri = max(f.uri, n)
				case eqFold(k, "_meta"):
					start := s.i
					ok = s.value()
					f.meta = max(f.meta, s.i-start)
				default:
					ok = s.value()
				}
				return ok
			})
		}
		return s.value()
	})
}

// eqFold is encoding/json's key match: Unicode case folding, so that
// "PARAMS" and "paramſ" (a long s) are params too.
func eqFold(k, name string) bool { return strings.EqualFold(k, name) }

// value skips any value at s.i.
func (s *skimmer) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				raw, ok := s.str()
				if !ok {
					return false
				}
				s.ws()
				if s.at(':') { // a string followed by a colon is a key
					s.noteKey(raw)
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	default: // a number, true, false, null
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return s.i > start
			}
			s.i++
		}
		return s.i > start
	}
}
