package listeners

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/rapidreset"
	"github.com/classifierd/classifierd/mcpserver"
)

// TestMCPRefusedPastRateCloses: an MCP request its admission refuses past
// the caller's rate (rapidreset.RefusedPastRate, as server.Admission
// marks it) closes its HTTP/1.1 connection, with what was pipelined
// behind it, as on --http-listen, although the SDK runs the request on a
// context of its session's, not the HTTP request's (the seventeenth
// hostile pass: 1,609 tools/list refused, no connection closed).
func TestMCPRefusedPastRateCloses(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	var lists atomic.Int64
	admit := func(ctx context.Context, method, _ string, _ int) (context.Context, func(), error) {
		if method == "tools/list" && lists.Add(1) > 2 {
			rapidreset.RefusedPastRate(ctx)
			return ctx, nil, status.Error(codes.ResourceExhausted, "server overloaded")
		}
		return ctx, func() {}, nil
	}
	s := mcpserver.NewBare(mcpserver.Config{Logger: log, Admit: admit})
	hs := &http.Server{Handler: MCPHandler(func(*http.Request) *mcp.Server { return s }, 1<<20, time.Minute, log, nil),
		ReadHeaderTimeout: 10 * time.Second}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = serveOn(hs, lis, rapidreset.New()) }()
	t.Cleanup(func() { _ = hs.Close() })
	addr := lis.Addr().String()

	post := func(body, sid string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+MCPPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s: %s", body, resp.Status)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	sid := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, "")
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)

	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	var batch strings.Builder
	for id := 10; id < 14; id++ {
		b := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{}}`, id)
		fmt.Fprintf(&batch, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"Mcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", MCPPath, addr, sid, len(b), b)
	}
	if _, err := io.WriteString(nc, batch.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	var got []string
	for range 4 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break // closed
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		kind := "ok"
		if strings.Contains(string(body), fmt.Sprint(mcpserver.CodeResourceExhausted)) {
			kind = "refused"
		}
		if resp.Close {
			kind += "+close"
		}
		got = append(got, kind)
	}
	if want := "ok ok refused+close"; strings.Join(got, " ") != want {
		t.Fatalf("4 pipelined tools/list, the third refused past the rate: got %q; want %q, then the connection closed", got, want)
	}
}
