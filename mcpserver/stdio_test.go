package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// readFrames runs input through a frameReader limited to max bytes and
// returns the lines it hands the SDK and the error answers it writes.
func readFrames(t testing.TB, input []byte, max int) (passed, answers []string) {
	var out bytes.Buffer
	r := &frameReader{in: bufio.NewReaderSize(bytes.NewReader(input), 64<<10), c: io.NopCloser(nil), out: &lineWriter{w: &out}, max: max}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	for _, l := range strings.SplitAfter(string(got), "\n") {
		if l != "" {
			passed = append(passed, l)
		}
	}
	for _, l := range strings.SplitAfter(out.String(), "\n") {
		if l != "" {
			answers = append(answers, l)
		}
	}
	return passed, answers
}

func TestFrameReader(t *testing.T) {
	const max = 64
	for _, tc := range []struct {
		name    string
		input   string
		passed  []string
		answers []string // error codes and ids, "code id"
	}{
		{"good lines pass, trimmed", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}  \r\n\n  \n", []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"}, nil},
		{"a last line without a newline", `{"jsonrpc":"2.0","method":"x"}`, []string{`{"jsonrpc":"2.0","method":"x"}` + "\n"}, nil},
		{"not JSON", "\x00\xff\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n", []string{`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"}, []string{"-32700 null"}},
		{"too deep", strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1) + "\n", nil, []string{"-32600 null"}},
		{"as deep as allowed is no JSON-RPC message either", strings.Repeat("[", 3) + strings.Repeat("]", 3) + "\n", nil, []string{"-32600 null"}},
		{"brackets in strings do not nest", `{"jsonrpc":"2.0","id":"[[[[","method":"ping"}` + "\n", []string{`{"jsonrpc":"2.0","id":"[[[[","method":"ping"}` + "\n"}, nil},
		{"too long, then good", strings.Repeat("a", max+1) + "\n" + `{"jsonrpc":"2.0","id":3,"method":"p"}` + "\n", []string{`{"jsonrpc":"2.0","id":3,"method":"p"}` + "\n"}, []string{"-32600 null"}},
		{"too long far past the read buffer", strings.Repeat("a", 200<<10) + "\n", nil, []string{"-32600 null"}},
		{"exactly the limit", `{"jsonrpc":"2.0","id":4,"method":"` + strings.Repeat("m", max-36) + `"}` + "\n", []string{`{"jsonrpc":"2.0","id":4,"method":"` + strings.Repeat("m", max-36) + `"}` + "\n"}, nil},
		{"one past the limit", `{"jsonrpc":"2.0","id":4,"method":"` + strings.Repeat("m", max-35) + `"}` + "\n", nil, []string{"-32600 null"}},
		{"not a message, id kept", `{"jsonrpc":"2.0","id":"x","method":1}` + "\n", nil, []string{`-32600 "x"`}},
		{"an id that is not one", `{"jsonrpc":"2.0","id":{},"method":1}` + "\n", nil, []string{`-32600 null`}},
		{"a batch before initialize", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n", nil, []string{"-32600 null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			passed, answers := readFrames(t, []byte(tc.input), max)
			if strings.Join(passed, "") != strings.Join(tc.passed, "") {
				t.Errorf("passed %q, want %q", passed, tc.passed)
			}
			var got []string
			for _, a := range answers {
				var m struct {
					ID    json.RawMessage `json:"id"`
					Error struct{ Code int64 }
				}
				if err := json.Unmarshal([]byte(a), &m); err != nil {
					t.Fatalf("answer %q: %v", a, err)
				}
				got = append(got, strings.TrimSpace(string(json.RawMessage(jsonNumber(m.Error.Code))))+" "+string(m.ID))
			}
			if strings.Join(got, ";") != strings.Join(tc.answers, ";") {
				t.Errorf("answers %q, want %q", got, tc.answers)
			}
		})
	}
}

func jsonNumber(n int64) []byte { b, _ := json.Marshal(n); return b }

func TestFrameReaderBatches(t *testing.T) {
	init := func(v string) string {
		return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + v + `"}}` + "\n"
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]` + "\n"
	for _, tc := range []struct {
		name    string
		input   string
		batches int // batches passed
	}{
		{"2025-03-26 batches", init("2025-03-26") + batch, 1},
		{"2025-06-18 dropped them", init("2025-06-18") + batch, 0},
		{"an unknown version is negotiated to the latest", init("2024-01-01") + batch, 0},
		{"an id batched twice", init("2025-03-26") + batch + batch, 1},
		{"an id twice in one batch", init("2025-03-26") + `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]` + "\n", 0},
		{"a string and a number are two ids", init("2025-03-26") + `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":"1","method":"b"}]` + "\n", 1},
		{"an element that is no message", init("2025-03-26") + `[{"jsonrpc":"2.0","id":1,"method":"a"},{"x":1}]` + "\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			passed, _ := readFrames(t, []byte(tc.input), 1<<20)
			n := 0
			for _, l := range passed {
				if strings.HasPrefix(l, "[") {
					n++
				}
			}
			if n != tc.batches {
				t.Errorf("%d batches passed, want %d: %q", n, tc.batches, passed)
			}
		})
	}
}

// FuzzFrameReader checks that whatever comes in, every line the SDK gets
// is within the limit and decodes as the SDK decodes it (so its reader
// never ends the session), and every answer is a JSON-RPC error.
func FuzzFrameReader(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "\x00\xff", "[[[]]]", `{"jsonrpc":"2.0","id":"a"}`, `[]`, `42`,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}` + "\n" + `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1e999,"method":"x"}`, "\"\\\"[\"", `{"jsonrpc":"2.0","id":1,"method":"x"} {"a":1}`,
	} {
		f.Add([]byte(s))
	}
	const max = 256
	f.Fuzz(func(t *testing.T, input []byte) {
		passed, answers := readFrames(t, input, max)
		for _, l := range passed {
			if len(l) > max+1 || !strings.HasSuffix(l, "\n") {
				t.Fatalf("passed %q: over the limit or without its newline", l)
			}
			line := []byte(strings.TrimSuffix(l, "\n"))
			// The SDK's reader: one JSON value, then the newline.
			dec := json.NewDecoder(bytes.NewReader([]byte(l)))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatalf("passed %q: the SDK's decoder fails: %v", l, err)
			}
			if rest, _ := io.ReadAll(dec.Buffered()); len(rest) == 0 || rest[0] != '\n' {
				t.Fatalf("passed %q: trailing data %q", l, rest)
			}
			if line[0] == '[' {
				var raws []json.RawMessage
				if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
					t.Fatalf("passed batch %q: %v", l, err)
				}
				for _, r := range raws {
					if _, err := jsonrpc.DecodeMessage(r); err != nil {
						t.Fatalf("passed batch %q: %v", l, err)
					}
				}
			} else if _, err := jsonrpc.DecodeMessage(line); err != nil {
				t.Fatalf("passed %q: %v", l, err)
			}
		}
		for _, a := range answers {
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct{ Code int64 }
			}
			if err := json.Unmarshal([]byte(a), &m); err != nil || m.JSONRPC != "2.0" || m.Error == nil || len(m.ID) == 0 {
				t.Fatalf("answer %q is not a JSON-RPC error (%v)", a, err)
			}
		}
	})
}
