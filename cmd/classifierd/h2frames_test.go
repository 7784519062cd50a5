package main

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/internal/rapidreset"
)

// TestH2TinyDataFramesClosed: the nineteenth hostile pass's request
// bodies in DATA frames of one byte, with no token, over TLS (h2tiny19):
// each request was refused from its headers and every frame after that
// read and answered, at 6.6 times the client's CPU on --http-listen and
// 3 on gRPC, the connection never closed. Now a connection sending more
// DATA frames than its streams and bytes account for is closed, on the
// gRPC, HTTP/JSON and MCP listeners, and counted; an honest client's
// large body, sent in frames of its writes, is still answered.
func TestH2TinyDataFramesClosed(t *testing.T) {
	grpcAddr, httpAddr, mcpAddr, maddr, client := h2DaemonGRPC(t)
	for _, tc := range []struct{ name, addr, path, ctype, alpn string }{
		{"http", httpAddr, "/classifier.v1.ClassifierService/Route", "application/json", "h2"},
		{"mcp", mcpAddr, "/mcp", "application/json", "h2"},
		{"grpc", grpcAddr, "/classifier.v1.ClassifierService/Route", "application/grpc", "h2"},
		// HTTP/1.1 negotiated, then HTTP/2's preface: net/http serves
		// it as HTTP/2 too.
		{"http, ALPN http/1.1", httpAddr, "/classifier.v1.ClassifierService/Route", "application/json", "http/1.1"},
	} {
		sent, closed := tinyFrames(t, tc.addr, tc.path, tc.ctype, tc.alpn, 100_000)
		t.Logf("%s: %d one-byte DATA frames sent, connection closed %v", tc.name, sent, closed)
		if !closed {
			t.Errorf("%s: the connection was not closed after %d one-byte DATA frames", tc.name, sent)
		}
	}
	// Every flood is counted at once, when its connection is closed.
	if got := scrape(t, maddr)["classifierd_http2_data_flood_closes_total"]; got < 4 {
		t.Errorf("classifierd_http2_data_flood_closes_total %v, want 4", got)
	}
	// An honest client's body of 180 KB (Go's HTTP/2 client writes it
	// in frames of up to 16 KiB).
	prompt := strings.Repeat("list my open pull requests and the reviews they wait for ", 3000)
	req, err := http.NewRequest(http.MethodPost, "https://"+httpAddr+"/classifier.v1.ClassifierService/Route", strings.NewReader(`{"query":"`+prompt+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Errorf("an honest 180 KB Route over HTTP/2: %d %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
}

// tinyFrames opens one HTTP/2 connection over TLS to addr (offering
// alpn), starts a POST
// of path with no token, and sends up to max DATA frames of one byte on
// it, a hundred at a time, while reading what comes back; it returns the
// frames sent and whether the server closed the connection.
func tinyFrames(t *testing.T, addr, path, ctype, alpn string, max int) (sent int, closed bool) {
	t.Helper()
	nc, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "localhost"},
		{"content-type", ctype}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	// Settings and their acknowledgement are written by the server
	// before it reads the stream; the reader above ignores them (the
	// frames sent here fit the default windows).
	var frames bytes.Buffer
	fw := http2.NewFramer(&frames, nil)
	for range 100 {
		_ = fw.WriteData(1, false, []byte{'x'})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for sent < max {
		select {
		case <-done:
			return sent, true
		default:
		}
		if _, err := nc.Write(frames.Bytes()); err != nil {
			break
		}
		sent += 100
		if sent%rapidreset.DataFramesSlack == 0 {
			time.Sleep(time.Millisecond) // let the server read
		}
	}
	select {
	case <-done:
		return sent, true
	case <-time.After(10 * time.Second):
		return sent, false
	}
}
