package httpguard

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// envelope is one gRPC-Web/Connect message frame holding msg.
func envelope(msg string) string {
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
	return string(prefix[:]) + msg
}

// TestWriteRPCError checks the shape of a refusal on --http-listen for
// each protocol.
func TestWriteRPCError(t *testing.T) {
	err := status.Error(codes.ResourceExhausted, "request body is over the limit of 4 bytes")
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		grpc   string
	}{
		{"REST", map[string]string{"Content-Type": "application/json"}, `{"code":8,"details":[],"message":"request body is over the limit of 4 bytes"}`, ""},
		{"Connect unary", map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"},
			`{"code":"resource_exhausted","message":"request body is over the limit of 4 bytes"}`, ""},
		{"Connect streaming", map[string]string{"Content-Type": "application/connect+json"}, `{"code":"resource_exhausted"`, ""},
		{"gRPC-Web", map[string]string{"Content-Type": "application/grpc-web+proto"}, "", "8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/x", nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			WriteRPCError(w, r, http.StatusRequestEntityTooLarge, err)
			if w.Code != 413 || !strings.HasPrefix(w.Body.String(), tc.body) || w.Header().Get("Grpc-Status") != tc.grpc {
				t.Errorf("got %d %q grpc-status %q, want 413 %q %q", w.Code, w.Body.String(), w.Header().Get("Grpc-Status"), tc.body, tc.grpc)
			}
		})
	}
}

// FuzzCheckEnvelopes: any body is accepted or refused without a panic,
// and an accepted one is whole frames.
func FuzzCheckEnvelopes(f *testing.F) {
	for _, s := range []string{"", envelope("abc"), envelope("") + envelope("x"), "\x00\x00\x40\x00\x00", "\x00\x00", "\x01\xff\xff\xff\xffabc"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkEnvelopes(b) != nil {
			return
		}
		for rest := b; len(rest) > 0; {
			if rest[0] != 0 {
				t.Fatalf("accepted %q: a message with flags 0x%02x", b, rest[0])
			}
			n := int(binary.BigEndian.Uint32(rest[1:5]))
			rest = rest[5+n:]
		}
	})
}

// TestCheckEnvelopes: uncompressed messages are accepted; a compressed
// flag (which vanguard answered INTERNAL) and other flags are refused.
func TestCheckEnvelopes(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		ok   bool
	}{
		{"one message", envelope("abc"), true},
		{"empty message", envelope(""), true},
		{"empty body", "", true},
		{"compressed flag", "\x01" + envelope("abc")[1:], false},
		{"end-stream flag", "\x02" + envelope("abc")[1:], false},
		{"trailer flag", "\x80" + envelope("abc")[1:], false},
		{"two messages", envelope("a") + envelope("b"), true},
		{"second compressed", envelope("a") + "\x01" + envelope("b")[1:], false},
		{"bytes after", envelope("a") + "x", false},
		{"prefix past the body", "\x00\x00\x00\x00\x09abc", false},
	} {
		if err := checkEnvelopes([]byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestBatchChargedPerMessage: a JSON-RPC batch is charged StreamCost for
// each of its messages, as that many requests are: with places for two
// requests (and their bodies), a batch of two is served and a batch of
// three is refused 429
// (the thirteenth hostile pass: batches of 64 tools/list were charged as
// one request).
func TestBatchChargedPerMessage(t *testing.T) {
	served := 0
	g := Guard{MaxBody: 1 << 20, CheckBody: CheckMCPBody, Budget: NewBudget(64*StreamCost, 2*StreamCost+4096), Messages: MCPMessages,
		Refuse: RefuseMCP}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tc := range []struct {
		body string
		code int
	}{
		{msg, 200},
		{"[" + msg + "," + msg + "]", 200},
		{"[" + msg + "," + msg + "," + msg + "]", http.StatusTooManyRequests},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%d messages: %d %s, want %d", MCPMessages([]byte(tc.body)), rec.Code, rec.Body.String(), tc.code)
		}
	}
	if served != 2 {
		t.Errorf("served %d, want 2", served)
	}
	if g.Budget.Used() != 0 {
		t.Errorf("%d bytes still charged", g.Budget.Used())
	}
}

// TestRequestEncoding: a body compression other than identity is named
// (and refused 415 by the guard); Content-Encoding's identity in any
// case is none, while Grpc-Encoding and Connect-Content-Encoding name
// compressors as spelled ("Identity" was answered 501 by the transcoder).
func TestRequestEncoding(t *testing.T) {
	for _, tc := range []struct {
		header, value string
		refused       bool
	}{
		{"Content-Encoding", "identity", false},
		{"Content-Encoding", "Identity", false},
		{"Content-Encoding", "gzip", true},
		{"Content-Encoding", "identity, gzip", true},
		{"Grpc-Encoding", "identity", false},
		{"Grpc-Encoding", "Identity", true},
		{"Connect-Content-Encoding", "IDENTITY", true},
		{"Connect-Content-Encoding", " identity ", false},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		name, e := requestEncoding(h)
		if (name != "") != tc.refused {
			t.Errorf("%s: %q: named %q %q, want refused %v", tc.header, tc.value, name, e, tc.refused)
		}
	}
}
