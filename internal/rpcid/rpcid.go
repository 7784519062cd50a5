// Package rpcid finds the id of a JSON-RPC message from its first bytes,
// without decoding the rest: the one id finder of the MCP listeners'
// refusals (internal/httpguard: a request refused before the SDK reads
// it is answered under its id) and of the proxy's refusal of a backend's
// oversized answer (mcpsrc: the answer is skipped, the error carries the
// id of the call it answered).
package rpcid

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Leading is the id of the JSON-RPC message of which head is the first
// bytes (head may end anywhere), read among the object's leading members,
// one at a time, until a member head ends inside of. Keys match as
// encoding/json matches a struct's fields (the SDKs decode messages with
// it): case-insensitively. An id is found only when it is a JSON-RPC id,
// a number or a string; the first one counts. Work is bounded by
// len(head): callers bound head (a few KiB).
//
// A request (answer false) is read up to its id. An answer (answer true)
// is read on past its id up to its result or error: a method member
// before them says the message is a request (the Go SDK writes a
// server's requests id first), whose id is none of the answers', and
// request reports it.
func Leading(head []byte, answer bool) (id json.RawMessage, found, request bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		switch {
		case answer && strings.EqualFold(k, "method"):
			return nil, false, true
		case answer && id != nil && (strings.EqualFold(k, "result") || strings.EqualFold(k, "error")):
			return id, true, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if id == nil && strings.EqualFold(k, "id") {
			if !Valid(v) {
				return nil, false, false
			}
			id = v
			if !answer {
				return id, true, false
			}
		}
	}
	return id, id != nil, false
}

// Valid reports whether raw, one JSON value, is a JSON-RPC id: a number
// or a string (not null, an object, an array or a boolean).
func Valid(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		var s string
		return json.Unmarshal(raw, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		return json.Unmarshal(raw, &n) == nil
	}
	return false
}
