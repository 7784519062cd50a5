package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// rawBytesCodec sends a *[]byte as the message's bytes, whatever they
// hold, and reads the answer's bytes into a *[]byte.
type rawBytesCodec struct{}

func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}

func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

func (rawBytesCodec) Name() string { return "proto" }

// TestHostileManyValuesRefusedBeforeDecoding reproduces the tenth hostile
// pass's MED finding through the real daemon on --http-listen: a Route
// body just under --max-recv-bytes (4 MiB) holding 1.4 million empty
// messages ({} each in JSON, 2 bytes each in protobuf). Before, it was
// decoded whole and then refused "1398070 messages, limit 64": 470 MB
// and 7.6 s of CPU for one JSON body, +1.5 GB for three at once by one
// identity (the body budget's share), +350 MB for one over gRPC-Web. Now
// the body's values are counted before it is decoded and it is refused
// 400 (httpguard.MaxElements), with the daemon's peak memory rising by
// less than 150 MB for three JSON, three gRPC-Web and three MCP bodies
// at once (it
// rose by over 1 GB on main). The same on --mcp-listen, a route tool
// call's arguments of 1.4 million empty messages: 135 MB each before (the
// proxy's listener the same: three at once +405 MB). And on --listen,
// a native gRPC Route of 2 million: three at once +1.6 GB before.
func TestHostileManyValuesRefusedBeforeDecoding(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("hog route "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, mcpAddr := freeAddr(t), freeAddr(t)
	d, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--auth-token-file", tokens, "--http-listen", httpAddr,
		"--mcp-listen", mcpAddr,
		// Room for all twelve bodies at once, so each is refused for its
		// values, never 429 for the budget.
		"--max-body-bytes-in-flight", strconv.Itoa(128<<20), "--max-body-bytes-in-flight-per-client", strconv.Itoa(64<<20),
		// And for all nine HTTP bodies refused in the same second
		// (TestBadBodiesHeldToRate has the rate).
		"--refused-body-burst", strconv.Itoa(64<<20))
	const limit = 4<<20 - 64

	n := (limit - 30) / 3
	jsonBody := append([]byte(`{"query":"x","messages":[`), bytes.Repeat([]byte(`{},`), n)...)
	jsonBody = append(jsonBody[:len(jsonBody)-1], "]}"...)
	msg := append([]byte("\x0a\x01x"), bytes.Repeat([]byte("\x12\x00"), (limit-16)/2)...)
	webBody := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(webBody[1:], uint32(len(msg)))
	webBody = append(webBody, msg...)

	mcpSession := ""
	mcpBody := append([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"route","arguments":{"query":"x","messages":[`),
		bytes.Repeat([]byte(`{},`), n-40)...)
	mcpBody = append(mcpBody[:len(mcpBody)-1], "]}}}"...)
	post := func(ct string, body []byte) (int, string, string) {
		url := "http://" + httpAddr + "/classifier.v1.ClassifierService/Route"
		if ct == "mcp" {
			url, ct = "http://"+mcpAddr+"/mcp", "application/json"
		}
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Accept", "application/json, text/event-stream")
		if mcpSession != "" {
			req.Header.Set("Mcp-Session-Id", mcpSession)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			mcpSession = s
		}
		return resp.StatusCode, string(b), resp.Header.Get("Grpc-Message")
	}
	// A small Route passes, so the refusal below is the count's.
	if code, body, _ := post("application/json", []byte(`{"query":"open a pull request, then {merge} it [now]","messages":[{"role":"user","content":"a, b"}]}`)); code != http.StatusOK {
		t.Fatalf("a small Route: %d %s", code, body)
	}
	if code, body, _ := post("mcp", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)); code != http.StatusOK || mcpSession == "" {
		t.Fatalf("MCP initialize: %d %s", code, body)
	}

	meter := startPeakMeter(t, d.cmd.Process.Pid)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(4)
		go func() {
			defer wg.Done()
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+aliceToken)
			var out []byte
			err := conn.Invoke(ctx, "/classifier.v1.ClassifierService/Route", &msg, &out,
				grpc.ForceCodecV2(rawBytesCodec{}), grpc.MaxCallSendMsgSize(8<<20))
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "values") {
				t.Errorf("gRPC Route of %d empty messages: %v; want INVALID_ARGUMENT counting its values", len(msg)/2, err)
			}
		}()
		go func() {
			defer wg.Done()
			code, body, _ := post("mcp", bytes.Replace(mcpBody, []byte(`"id":7`), []byte(`"id":`+strconv.Itoa(10+i)), 1))
			if code != http.StatusBadRequest || !strings.Contains(body, "values") {
				t.Errorf("MCP route call of %d empty messages: %d %.200s; want 400 counting its values", n, code, body)
			}
		}()
		go func() {
			defer wg.Done()
			code, body, _ := post("application/json", jsonBody)
			if code != http.StatusBadRequest || !strings.Contains(body, "values") {
				t.Errorf("JSON Route of %d empty messages: %d %.200s; want 400 counting its values", n, code, body)
			}
		}()
		go func() {
			defer wg.Done()
			code, body, gm := post("application/grpc-web+proto", webBody)
			if !strings.Contains(gm, "values") {
				t.Errorf("gRPC-Web Route of %d empty messages: %d %.200s grpc-message %q; want refused counting its values", len(msg)/2, code, body, gm)
			}
		}()
	}
	wg.Wait()
	grew, how := meter.growth()
	t.Logf("3 JSON, 3 gRPC-Web, 3 MCP and 3 gRPC requests of 4 MiB at once: peak +%d MB (%s)", grew>>20, how)
	if grew > 150<<20 {
		t.Errorf("peak memory rose by %d MB for twelve 4 MiB requests (%s); want under 150 MB", grew>>20, how)
	}
}
