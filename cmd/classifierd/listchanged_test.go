package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/mcpplaces"
)

// analyzeCall is a hub__analyze_prompt call that widens a new session's
// exposure to the weather server (proxySetup's).
const analyzeCall = `{"jsonrpc":"2.0","id":"analyze","method":"tools/call","params":{"name":"hub__analyze_prompt","arguments":{"prompt":"What is the weather forecast for Paris tomorrow?"}}}`

// TestProxyListChangedPrecedesResult reads the proxy's wire, stdio frames
// and the streamable HTTP response's event stream, and checks that
// hub__analyze_prompt's notifications/tools/list_changed comes before the
// call's result (issue 25): a host that acts on the result at once has
// already dropped its stale tool list. The change is announced once.
func TestProxyListChangedPrecedesResult(t *testing.T) {
	config, _ := proxySetup(t)

	t.Run("stdio", func(t *testing.T) {
		p := startStdioPeer(t, proxyArgs(config)...)
		p.initialize()
		p.send([]byte(analyzeCall))
		before, a := p.until(`"analyze"`)
		if a.Error != nil || !strings.Contains(string(a.Result), "weather") {
			t.Fatalf("hub__analyze_prompt: %s %+v", a.Result, a.Error)
		}
		if !slices.Contains(before, "notifications/tools/list_changed") {
			t.Fatalf("messages before the result: %v, want notifications/tools/list_changed", before)
		}
		// The SDK's own debounced notification (10ms later) is not sent
		// as well: a ping's answer comes with no list_changed before it.
		time.Sleep(200 * time.Millisecond)
		p.send([]byte(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`))
		if before, _ := p.until(`"ping"`); slices.Contains(before, "notifications/tools/list_changed") {
			t.Fatalf("a second list_changed for one change: %v", before)
		}
	})

	t.Run("streamable HTTP", func(t *testing.T) {
		addr := freeAddr(t)
		startProxyHTTP(t, config, addr)
		endpoint := "http://" + addr + listeners.MCPPath
		post := func(id, body string) (*http.Response, string) {
			t.Helper()
			req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if id != "" {
				req.Header.Set(mcpplaces.SessionHeader, id)
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			t.Cleanup(cancel)
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return resp, resp.Header.Get(mcpplaces.SessionHeader)
		}
		resp, id := post("", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wire","version":"0"}}}`)
		if resp.StatusCode != http.StatusOK || id == "" {
			t.Fatalf("initialize: %s, session %q", resp.Status, id)
		}
		if resp, _ := post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("initialized: %s", resp.Status)
		}
		resp, _ = post(id, analyzeCall)
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("tools/call answered %s, want an event stream", ct)
		}
		// The call's own event stream, in order, up to its response.
		var before []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m rpcAnswer
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if m.Method != "" {
				before = append(before, m.Method)
				continue
			}
			if string(m.ID) != `"analyze"` || m.Error != nil || !strings.Contains(string(m.Result), "weather") {
				t.Fatalf("hub__analyze_prompt: %s", data)
			}
			if !slices.Contains(before, "notifications/tools/list_changed") {
				t.Fatalf("events before the result on its stream: %v, want notifications/tools/list_changed", before)
			}
			return
		}
		t.Fatalf("the event stream ended without the result (%v); before it: %v", sc.Err(), before)
	})
}

// until reads the server's messages up to the response with id and
// returns the methods of the messages before it, in order, and the
// response.
func (r *stdioPeer) until(id string) ([]string, rpcAnswer) {
	r.t.Helper()
	var before []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("the server closed stdout (it exited: %v)", r.exited())
			}
			var a rpcAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				r.t.Fatalf("the server wrote a line that is not JSON: %q", line)
			}
			if a.Method != "" {
				before = append(before, a.Method)
				continue
			}
			if string(a.ID) == id {
				return before, a
			}
		case <-timeout:
			r.t.Fatalf("no answer %s in 60s (it exited: %v)", id, r.exited())
		}
	}
}
