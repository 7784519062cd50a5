package main

import (
	"bytes"
	"context"
	"crypto/tls"

	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/rapidreset"
)

// TestH2CheapFramesThrottled: the nineteenth hostile pass's request
// bodies in DATA frames of one byte, with no token, over TLS (h2tiny19),
// and the next pass's WINDOW_UPDATE floods: each frame was read and
// handled (after a 401, each DATA frame answered with a RST_STREAM of its
// own), at 6.6 times the client's CPU on --http-listen and 20-45 for
// control frames. Now the frames that carry no request or large body are
// held to a connection's rapidreset.FrameBurst and FrameRate, and what
// its peer has left of PeerFrameRate, on the gRPC, HTTP/JSON and MCP
// listeners: the server answers at most that many
// (counted here by the RST_STREAMs it sends), and the reads it held back
// are counted. An honest client writing its body a hundred bytes at a
// time, and one sending 180 KB at once, are answered.
func TestH2CheapFramesThrottled(t *testing.T) {
	grpcAddr, httpAddr, mcpAddr, maddr, client := h2DaemonGRPC(t)
	throttled := func() float64 { return scrape(t, maddr)["classifierd_http2_throttled_reads_total"] }
	for _, tc := range []struct {
		name, addr, path, ctype, alpn string
		window                        bool // WINDOW_UPDATE frames, not DATA
		rsts                          bool // the server answers each DATA frame with a RST_STREAM
	}{
		{"http", httpAddr, "/classifier.v1.ClassifierService/Route", "application/json", "h2", false, true},
		{"mcp", mcpAddr, "/mcp", "application/json", "h2", false, true},
		{"grpc", grpcAddr, "/classifier.v1.ClassifierService/Route", "application/grpc", "h2", false, false},
		{"http WINDOW_UPDATE", httpAddr, "/classifier.v1.ClassifierService/Route", "application/json", "h2", true, false},
		// HTTP/1.1 negotiated, then HTTP/2's preface: net/http serves
		// it as HTTP/2 too.
		{"http, ALPN http/1.1", httpAddr, "/classifier.v1.ClassifierService/Route", "application/json", "http/1.1", false, true},
	} {
		before := throttled()
		sent, rsts, took := cheapFrames(t, tc.addr, tc.path, tc.ctype, tc.alpn, tc.window, 1, 200_000, 6*time.Second)
		after := throttled()
		t.Logf("%s: %d frames sent, %d RST_STREAM answered in %v; throttled reads %v → %v", tc.name, sent, rsts, took, before, after)
		if after <= before {
			t.Errorf("%s: no read held back after %d cheap frames", tc.name, sent)
		}
		// What one read hands on is handled before the next waits: a
		// TLS record of 16 KiB holds 1,638 frames of one byte.
		if most := rapidreset.FrameBurst + rapidreset.FramesPerRequest + rapidreset.PeerFrameBurst + int64((rapidreset.FrameRate+rapidreset.PeerFrameRate)*took.Seconds()) + 1640; tc.rsts && rsts > most {
			t.Errorf("%s: %d frames answered in %v, want at most %d", tc.name, rsts, took, most)
		}
	}

	route := func(body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "https://"+httpAddr+"/classifier.v1.ClassifierService/Route", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bobToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Logf("answer: %.300s", answer)
		}
		return resp.StatusCode, resp.Proto
	}
	// An honest client's body of 180 KB (Go's HTTP/2 client writes it
	// in frames of up to 16 KiB).
	prompt := strings.Repeat("list my open pull requests and the reviews they wait for ", 3000)
	if code, proto := route(strings.NewReader(`{"query":"` + prompt + `"}`)); code != http.StatusOK || proto != "HTTP/2.0" {
		t.Errorf("an honest 180 KB Route over HTTP/2: %d %s, want 200 over HTTP/2", code, proto)
	}
	// A body written a hundred bytes at a time (a frame each), 2,000
	// pieces: past its own budget, from its peer's or at its own rate
	// (slowed, never cut).
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, `{"query":"list my open pull requests`)
		piece := strings.Repeat("and the reviews they wait for ", 4)[:100]
		for range 2000 {
			if _, err := io.WriteString(pw, piece); err != nil {
				return
			}
		}
		_, _ = io.WriteString(pw, `"}`)
		pw.Close()
	}()
	start := time.Now()
	if code, proto := route(pr); code != http.StatusOK || proto != "HTTP/2.0" {
		t.Errorf("a body in 2,000 pieces of 100 bytes over HTTP/2: %d %s, want 200", code, proto)
	}
	t.Logf("a body in 2,000 pieces of 100 bytes answered in %v", time.Since(start))
}

// cheapFrames opens one HTTP/2 connection over TLS to addr (offering
// alpn), starts a POST of path with no token, and sends on it up to max
// DATA frames of size bytes (WINDOW_UPDATE frames with window), a
// hundred per write, for at most d; it returns the frames sent, the
// RST_STREAM frames the server sent back, and the time taken.
func cheapFrames(t *testing.T, addr, path, ctype, alpn string, window bool, size, max int, d time.Duration) (sent int, rsts int64, took time.Duration) {
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
	var rst atomic.Int64
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.RSTStreamFrame); ok {
				rst.Add(1)
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "localhost"},
		{"content-type", ctype}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	// The frames fit the default windows: the reader above need not
	// open any (and the server's SETTINGS are acknowledged by nothing:
	// it does not wait for that).
	var frames bytes.Buffer
	fw := http2.NewFramer(&frames, nil)
	for range 100 {
		if window {
			_ = fw.WriteWindowUpdate(0, 1)
		} else {
			_ = fw.WriteData(1, false, bytes.Repeat([]byte{'x'}, size))
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = nc.SetWriteDeadline(start.Add(d))
	for sent < max {
		if _, err := nc.Write(frames.Bytes()); err != nil {
			break
		}
		sent += 100
	}
	if rest := d - time.Since(start); rest > 0 {
		time.Sleep(rest) // what the server answers in d
	}
	took = time.Since(start)
	return sent, rst.Load(), took
}

// TestH2RefusedBodyCharged: a request refused 401 from its headers (no
// token), its body going on in DATA frames of 1 KiB, which are not cheap
// (the MED left after the twentieth hostile pass's re-check: 2.5-4.2
// times the client's CPU over 64 connections, another identity's Route
// p99 114-350 ms). net/http read each frame, buffered or discarded it,
// and answered each one on the closed stream with a RST_STREAM. Now
// every DATA frame is charged to the connection's rapidreset.FrameBudget
// (a frame a KiB of its size), each KiB of body a handler reads credits
// one back, and each RST_STREAM
// the server writes is charged as well: the server answers at most about
// the budget's worth of them, on --http-listen and --mcp-listen, while
// an honest body written a KiB at a time (a DATA frame each, all read)
// is answered 200.
func TestH2RefusedBodyCharged(t *testing.T) {
	_, httpAddr, mcpAddr, maddr, client := h2DaemonGRPC(t)
	throttled := func() float64 { return scrape(t, maddr)["classifierd_http2_throttled_reads_total"] }
	for _, tc := range []struct {
		name, addr, path string
		kib              int // the DATA frames' size
	}{
		{"http", httpAddr, "/classifier.v1.ClassifierService/Route", 1},
		{"mcp", mcpAddr, "/mcp", 1},
		// Charged by their size: a frame of 16 KiB is 16 frames' worth.
		{"http, frames of 16 KiB", httpAddr, "/classifier.v1.ClassifierService/Route", 16},
	} {
		before := throttled()
		sent, rsts, took := cheapFrames(t, tc.addr, tc.path, "application/json", "h2", false, tc.kib*rapidreset.DataFrameBytes, 200_000, 6*time.Second)
		after := throttled()
		t.Logf("%s: %d DATA frames of %d KiB sent, %d RST_STREAM answered in %v; throttled reads %v → %v", tc.name, sent, tc.kib, rsts, took, before, after)
		if after <= before {
			t.Errorf("%s: no read held back after %d DATA frames no handler read", tc.name, sent)
		}
		// A TLS record of 16 KiB holds 15 frames of 1 KiB, handled
		// before the next read waits.
		budget := rapidreset.FrameBurst + rapidreset.FramesPerRequest + rapidreset.PeerFrameBurst + int64((rapidreset.FrameRate+rapidreset.PeerFrameRate)*took.Seconds())
		if most := budget/int64(tc.kib) + 16; rsts > most {
			t.Errorf("%s: %d frames answered in %v, want at most %d", tc.name, rsts, took, most)
		}
	}

	// An honest body of 180 KB written a KiB at a time: each piece a
	// DATA frame of 1 KiB, charged, and read by the handler, credited.
	prompt := strings.Repeat("list my open pull requests and the reviews they wait for ", 3000)
	body := []byte(`{"query":"` + prompt + `"}`)
	pr, pw := io.Pipe()
	go func() {
		for rest := body; len(rest) > 0; {
			n := min(len(rest), rapidreset.DataFrameBytes)
			if _, err := pw.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, "https://"+httpAddr+"/classifier.v1.ClassifierService/Route", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" {
		t.Errorf("an honest body of %d bytes in pieces of 1 KiB: %d %s (%.300s), want 200 over HTTP/2", len(body), resp.StatusCode, resp.Proto, answer)
	}
	t.Logf("an honest body of %d bytes in pieces of 1 KiB answered in %v", len(body), time.Since(start))
}

// TestTLS12OnlyAEAD: over TLS 1.2 the listeners offer only the cipher
// suites HTTP/2 allows (net/http no longer checks them itself, serving
// HTTP/2 on connections it does not see as TLS); a client offering only
// CBC suites fails its handshake, one offering GCM is served.
func TestTLS12OnlyAEAD(t *testing.T) {
	grpcAddr, httpAddr, mcpAddr, _, _ := h2DaemonGRPC(t)
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}
	gcm := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
	for _, addr := range []string{grpcAddr, httpAddr, mcpAddr} {
		for _, tc := range []struct {
			suites []uint16
			ok     bool
		}{{cbc, false}, {gcm, true}} {
			c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12, CipherSuites: tc.suites, NextProtos: []string{"h2"}})
			if c != nil {
				c.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("%s, TLS 1.2 with %v: handshake error %v, want success %v", addr, tls.CipherSuiteName(tc.suites[0]), err, tc.ok)
			}
		}
	}
}

// TestHTTPPageRate: the explain page is served with no token, so the
// twenty-first hostile pass asked for it over HTTP/2 as fast as the
// streams allowed (82,520 answers in 10 s on 4 connections, the daemon
// 4.75 times the client's CPU). Now a peer gets listeners.PagesBurst of
// its files and then PagesPerSecond a second; past that a request is
// refused 429 with Retry-After, and its connection sent GOAWAY, so the
// next request takes a new one. An API call with a token is not held
// back by the page's rate.
func TestHTTPPageRate(t *testing.T) {
	_, httpAddr, _, _, client := h2DaemonGRPC(t)
	var ok, refused, fresh int
	start := time.Now()
	for range listeners.PagesBurst + 60 {
		var got httptrace.GotConnInfo
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got = i }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+httpAddr+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("the page answered over %s, want HTTP/2", resp.Proto)
		}
		if !got.Reused {
			fresh++
		}
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("a 429 of the page without Retry-After")
			}
		default:
			t.Fatalf("the page answered %d", resp.StatusCode)
		}
	}
	most := listeners.PagesBurst + int(listeners.PagesPerSecond*time.Since(start).Seconds()) + 1
	t.Logf("%d answered, %d refused, %d connections", ok, refused, fresh)
	if ok > most || refused == 0 {
		t.Fatalf("%d of %d page requests answered and %d refused, want at most %d answered", ok, listeners.PagesBurst+60, refused, most)
	}
	if fresh < refused {
		t.Fatalf("%d refusals past the page's rate on %d connections: each should close its own", refused, fresh)
	}
	if st, _, err := h2Route(client, httpAddr, bobToken); err != nil || st != http.StatusOK {
		t.Fatalf("bob's Route beside the page's refusals: %d, %v", st, err)
	}
}
