package rpcid

import "testing"

func TestLeading(t *testing.T) {
	for _, c := range []struct {
		name, head string
		answer     bool
		id         string // "" when none is found
		request    bool
	}{
		{"Go SDK request", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, false, `7`, false},
		{"TypeScript SDK request, id last", `{"method":"tools/list","params":{},"jsonrpc":"2.0","id":"a-1"}`, false, `"a-1"`, false},
		{"string id with escapes", `{"id":"x\"y","method":"ping"}`, false, `"x\"y"`, false},
		{"negative and fractional", `{"id":-3.5}`, false, `-3.5`, false},
		{"key case as encoding/json matches it", `{"ID":4,"method":"ping"}`, false, `4`, false},
		{"the first id counts", `{"id":1,"id":2}`, false, `1`, false},
		{"head cut after the id", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"arguments":{"q":"aaaa`, false, `12`, false},
		{"head cut before the id", `{"method":"tools/call","params":{"arguments":{"q":"aaaa`, false, "", false},
		{"cut inside the id", `{"jsonrpc":"2.0","id":"abc`, false, "", false},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, "", false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, false, "", false},
		{"object id", `{"id":{"a":1},"method":"ping"}`, false, "", false},
		{"boolean id", `{"id":true,"method":"ping"}`, false, "", false},
		{"array id", `{"id":[1],"method":"ping"}`, false, "", false},
		{"a batch is no message", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false, "", false},
		{"not JSON", `id: 1`, false, "", false},
		{"empty", ``, false, "", false},
		{"answer, id first", `{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"aaaa`, true, `3`, false},
		{"answer, id last (TypeScript)", `{"result":{},"jsonrpc":"2.0","id":9}`, true, `9`, false},
		{"answer cut before its id", `{"result":{"content":[{"text":"aaaa`, true, "", false},
		{"a server's request, id first", `{"jsonrpc":"2.0","id":5,"method":"roots/list"}`, true, "", true},
		{"a server's request, method first", `{"method":"sampling/createMessage","id":5}`, true, "", true},
		{"a request read as one has its id", `{"jsonrpc":"2.0","id":5,"method":"roots/list"}`, false, `5`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, found, request := Leading([]byte(c.head), c.answer)
			if found != (c.id != "") || string(id) != c.id || request != c.request {
				t.Fatalf("Leading(%q, %v) = %q, %v, %v; want %q, %v, %v", c.head, c.answer, id, found, request, c.id, c.id != "", c.request)
			}
		})
	}
}

func TestValid(t *testing.T) {
	for raw, want := range map[string]bool{`1`: true, `-1`: true, `1e3`: true, `"a"`: true, `""`: true,
		`null`: false, `true`: false, `{}`: false, `[]`: false, `"a`: false, `01`: false, ``: false, `-`: false} {
		if got := Valid([]byte(raw)); got != want {
			t.Errorf("Valid(%q) = %v, want %v", raw, got, want)
		}
	}
}
