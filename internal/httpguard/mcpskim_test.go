package httpguard

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// refFields is what encoding/json decodes of a message's method, name and
// uri (the SDK's reading, and this guard's before skimMCP).
func refFields(t testing.TB, body []byte) ([]mcpFields, bool) {
	type msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	var msgs []msg
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(b, &msgs) != nil {
			return nil, false
		}
	} else {
		var m msg
		if json.Unmarshal(b, &m) != nil {
			return nil, false
		}
		msgs = append(msgs, m)
	}
	var out []mcpFields
	for _, m := range msgs {
		out = append(out, mcpFields{method: len(m.Method), name: len(m.Params.Name), uri: len(m.Params.URI)})
	}
	return out, true
}

// TestSkimMCPAgreesWithEncodingJSON: on messages that give each key once,
// skimMCP reads the lengths encoding/json decodes, whatever surrounds
// them (escapes, folded keys, strings holding braces and quotes, the same
// names inside arguments).
func TestSkimMCPAgreesWithEncodingJSON(t *testing.T) {
	long := strings.Repeat("x", 700)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"q":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"name":"` + long + `","uri":"` + long + `"},"name":"s"}}`,
		`{"method":"resources/read","params":{"uri":"file:///` + long + `"}}`,
		`{"METHOD":"x","Params":{"NAME":"` + long + `"}}`,
		`{"\u006dethod":"` + long[:200] + `","params":{"n\u0061me":"y"}}`,
		`{"method":"a\"}{[","params":{"name":"\u00e9\u00e9\ud83d\ude80","x":[1,{"y":"}"}],"uri":"u"}}`,
		`{"method":"` + strings.Repeat(`\u00e9`, 100) + `"}`,  // 600 raw bytes, 200 decoded
		"{\"method\":\"" + strings.Repeat("\xff", 50) + "\"}", // invalid bytes: U+FFFD each
		`{"params":"not an object","method":"m"}`,
		`{"params":{"name":123,"uri":null},"method":"m"}`,
		` [ {"method":"a"} , {"method":"` + long + `"}, 7, "s", {"params":{"name":"n"}} ] `,
		`[]`,
		`{}`,
		`{"paramſ":{"name":"` + long + `"}}`, // a long s: encoding/json folds it to params
	} {
		want, wok := refFields(t, []byte(body))
		got, n, _, ok := skimMCP([]byte(body))
		if !wok {
			continue // not JSON encoding/json reads: the SDK answers
		}
		if !ok || n != len(want) {
			t.Errorf("skimMCP(%.80q): ok %v, %d messages; encoding/json read %d", body, ok, n, len(want))
			continue
		}
		for i := range want {
			if g := got[i]; g.method != want[i].method || g.name != want[i].name || g.uri != want[i].uri {
				t.Errorf("skimMCP(%.80q) message %d: %+v, encoding/json %+v", body, i, got[i], want[i])
			}
		}
	}
}

// TestCheckMCPBodyDuplicateKeys: a key given twice is checked at its
// longest (encoding/json keeps the last; an SDK keeping the first must
// not pass a long one either).
func TestCheckMCPBodyDuplicateKeys(t *testing.T) {
	long := strings.Repeat("m", 300)
	for _, body := range []string{
		`{"method":"` + long + `","method":"tools/list"}`,
		`{"method":"tools/list","Method":"` + long + `"}`,
	} {
		if CheckMCPBody([]byte(body)) == nil {
			t.Errorf("CheckMCPBody(%.60q) passed a %d-byte method", body, len(long))
		}
	}
}

// FuzzSkimMCP: whatever encoding/json refuses past a bound, skimMCP
// refuses too, and it never panics.
func FuzzSkimMCP(f *testing.F) {
	for _, s := range []string{
		`{"method":"tools/call","params":{"name":"x","arguments":{}}}`,
		`[{"method":"a"},{"params":{"uri":"u"}}]`,
		`{"method":"\ud83d\ude80\"\\","params":{"name":"\u0000"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		skimMCP(body)
		want, ok := refFields(t, body)
		if !ok {
			return
		}
		over := false
		for _, m := range want {
			over = over || m.method > maxMCPMethod || m.name > maxMCPName || m.uri > maxMCPURI
		}
		if (over || len(want) > maxMCPBatch && body[len(body)-len(bytes.TrimLeft(body, " \t\r\n"))] == '[') && CheckMCPBody(body) == nil {
			t.Errorf("CheckMCPBody passed %.100q, which encoding/json reads past a bound", body)
		}
	})
}

// BenchmarkCheckMCPBody: a 1.5 MB tools/call.
func BenchmarkCheckMCPBody(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"text":"` + strings.Repeat("lorem ipsum ", 1<<17) + `"}}}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := CheckMCPBody(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckMCPBodyKeys: an object key anywhere in a message (a tool
// call's argument names, at any depth) is bounded; keys' look-alikes in
// strings are not keys.
func TestCheckMCPBodyKeys(t *testing.T) {
	long := strings.Repeat("k", maxMCPKey+1)
	esc := strings.Repeat(`\u00e9`, maxMCPKey/2+1) // 6 raw bytes, 2 decoded each
	for _, tc := range []struct {
		body    string
		refused bool
	}{
		{`{"method":"tools/call","params":{"name":"t","arguments":{"` + long + `":1}}}`, true},
		{`{"method":"tools/call","params":{"name":"t","arguments":{"a":[{"b":{"` + long + `" :"x"}}]}}}`, true},
		{`{"method":"tools/call","params":{"name":"t","arguments":{"` + esc + `":1}}}`, true},
		{`{"method":"tools/call","` + long + `":1}`, true},
		{`{"method":"tools/call","params":{"name":"t","arguments":{"a":"` + long + `","b":["` + long + `"]}}}`, false},     // long values
		{`{"method":"tools/call","params":{"name":"t","arguments":{"` + strings.Repeat(`\n`, maxMCPKey) + `":1}}}`, false}, // 2 KiB raw, 1 KiB decoded
	} {
		if err := CheckMCPBody([]byte(tc.body)); (err != nil) != tc.refused {
			t.Errorf("CheckMCPBody(%.70q...): %v, want refused %v", tc.body, err, tc.refused)
		}
	}
}

// TestCheckMCPBodyMeta: params._meta is bounded as sent (maxMCPMeta),
// in a message and in each message of a batch; a progress token and a
// few keys pass, as does a long _meta outside params (not the SDK's).
func TestCheckMCPBodyMeta(t *testing.T) {
	zeros := "[" + strings.Repeat("0,", 32700) + "0]"
	for body, bad := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":"abc","traceparent":"00-x-y-01"}}}`:                  false,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":` + zeros + `}}`:                                                      true,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_META":{"a":` + zeros + `}}}`:                                                true,
		`[{"method":"ping"},{"method":"ping","params":{"_meta":` + zeros + `}}]`:                                                         true,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"_meta":"` + strings.Repeat("a", 8000) + `"}}}`: false,
	} {
		if err := CheckMCPBody([]byte(body)); (err != nil) != bad {
			t.Errorf("CheckMCPBody(%.70q) = %v, want refused %v", body, err, bad)
		}
	}
}
