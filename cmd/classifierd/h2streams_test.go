package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/internal/httpguard"
)

// These tests are the ninth hostile pass's HTTP/2 probes made
// repeatable, against the real daemon over TLS (the plain listeners do
// not speak h2c): clients that announce a stream window of 0 so that no
// answer can be sent, and clients that send 1 byte of each declared
// body. Before, a request the guard refused (401, no token) or answered
// was held until its answer was sent, which it never was (15,141
// goroutines, RSS +300 MB for 60 connections of 250 streams, held past
// --idle-timeout), and a held body was charged about 1 KiB, so one
// identity held 16,384 streams (heap +975 MB).

// h2Attack opens conns HTTP/2 connections over TLS to addr, announcing
// SETTINGS_INITIAL_WINDOW_SIZE window, and starts streams POSTs of path on
// each with body declared in Content-Length, of which it sends send bytes
// (-1: all of it, and ends the stream), holding everything open and
// reading every frame without ever opening a window. The returned func
// reports each stream's outcome so far (":status", or the RST_STREAM
// code), and close ends the connections.
func h2Attack(t *testing.T, addr, path, token string, body []byte, conns, streams int, window uint32, send int) (outcomes func() map[string]int, closeAll func()) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	var ncs []net.Conn
	for range conns {
		nc, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		ncs = append(ncs, nc)
		if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(nc, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
		var wmu sync.Mutex
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					return
				}
				var ack func()
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						ack = func() { _ = fr.WriteSettingsAck() }
					}
				case *http2.PingFrame:
					if !f.IsAck() {
						data := f.Data
						ack = func() { _ = fr.WritePing(true, data) }
					}
				case *http2.MetaHeadersFrame:
					if st := f.PseudoValue("status"); st != "" {
						mu.Lock()
						seen["status "+st]++
						mu.Unlock()
					}
				case *http2.RSTStreamFrame:
					mu.Lock()
					seen["rst "+f.ErrCode.String()]++
					mu.Unlock()
				}
				if ack != nil {
					wmu.Lock()
					ack()
					wmu.Unlock()
				}
			}
		}()
		go func() {
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			for s := range streams {
				id := uint32(2*s + 1)
				hb.Reset()
				for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", path}, {":authority", "localhost"},
					{"content-type", "application/json"}, {"accept", "application/json, text/event-stream"},
					{"content-length", strconv.Itoa(len(body))}, {"authorization", "Bearer " + token}} {
					_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
				}
				wmu.Lock()
				err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
				if err == nil {
					if send < 0 {
						err = fr.WriteData(id, true, body)
					} else {
						err = fr.WriteData(id, false, body[:send])
					}
				}
				wmu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	var once sync.Once
	closeAll = func() {
		once.Do(func() {
			for _, nc := range ncs {
				nc.Close()
			}
		})
	}
	t.Cleanup(closeAll)
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}, closeAll
}

// h2Daemon starts the daemon over TLS with a token file of alice (the
// hog) and bob (the victim), route scope, serving --http-listen and
// --mcp-listen; it returns their addresses, the metrics address, and an
// HTTPS client that trusts the daemon's certificate.
func h2Daemon(t *testing.T) (httpAddr, mcpAddr, maddr string, client *http.Client) {
	t.Helper()
	_, httpAddr, mcpAddr, maddr, client = h2DaemonGRPC(t)
	return httpAddr, mcpAddr, maddr, client
}

// h2DaemonGRPC is h2Daemon, with the gRPC listener's address too.
func h2DaemonGRPC(t *testing.T) (grpcAddr, httpAddr, mcpAddr, maddr string, client *http.Client) {
	t.Helper()
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "localhost")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route "+aliceToken+"\nbob route "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, mcpAddr, maddr = freeAddr(t), freeAddr(t), freeAddr(t)
	pool := x509.NewCertPool()
	pool.AddCert(pki.ca)
	tconf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	grpcAddr = freeAddr(t)
	opsDaemon(t, grpcAddr, pki.dial(nil), "--index", genIndex(t, "testdata/mini.json"),
		"--tls-cert", serverCert, "--tls-key", serverCert+".key", "--auth-token-file", tokens,
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr, "--metrics-listen", maddr)
	client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tconf, ForceAttemptHTTP2: true}}
	return grpcAddr, httpAddr, mcpAddr, maddr, client
}

// h2Route calls Route over HTTP/JSON with token and returns the status (0
// and the error when there is no answer) and the protocol.
func h2Route(client *http.Client, httpAddr, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, "https://"+httpAddr+"/classifier.v1.ClassifierService/Route", strings.NewReader(`{"query":"list my open pull requests"}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Proto, nil
}

// goroutines is the daemon's go_goroutines.
func goroutines(t *testing.T, maddr string) float64 { return scrape(t, maddr)["go_goroutines"] }

// perConnGoroutines bounds the goroutines an idle HTTP/2 connection
// keeps in the daemon (its serve loop, frame reader, writer).
const perConnGoroutines = 4

// goroutineSlack is what else may come and go in the daemon meanwhile.
const goroutineSlack = 150

// TestH2UnreadAnswersReleased: HTTP/2 clients over TLS that announce a
// stream window of 0 and open 250 streams on each of 20 connections, with
// no token on --http-listen and --mcp-listen (each refused 401 from its
// headers) and with a route token on --http-listen (each a Route whose
// answer cannot be sent), hold no more than their share of the body
// budget while they last (httpguard.StreamCost per request; the rest
// refused with a status line alone, which no window holds back), and a
// refusal left unsent is dropped after httpguard.RefusalWriteWait: with
// the connections still open, the daemon's goroutines are back to those
// of the connections. Another identity's Route is answered throughout.
// On main every stream was held for as long as its connection (5,000
// goroutines per case, for ever).
func TestH2UnreadAnswersReleased(t *testing.T) {
	httpAddr, mcpAddr, maddr, client := h2Daemon(t)
	if code, _, err := h2Route(client, httpAddr, bobToken); code != http.StatusOK {
		t.Fatalf("warm-up Route: %d %v", code, err)
	}
	base := goroutines(t, maddr)
	const conns, streams = 20, 250
	heldMax := float64(httpguard.DefaultBodyBudgetPerClient / httpguard.StreamCost)
	for _, tc := range []struct {
		name, addr, path, token, body string
		// released: every stream is a refusal, dropped after
		// RefusalWriteWait; otherwise answers held up to
		// DefaultWriteWait, bounded by the caller's share.
		released bool
	}{
		{"http no token", httpAddr, "/classifier.v1.ClassifierService/Route", "", `{"query":"x"}`, true},
		{"mcp no token", mcpAddr, "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true},
		{"http route token", httpAddr, "/classifier.v1.ClassifierService/Route", aliceToken, `{"query":"` + strings.Repeat("list my open pull requests ", 40) + `"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The last case's connections are closed: their streams end.
			for deadline := time.Now().Add(30 * time.Second); goroutines(t, maddr) > base+goroutineSlack && time.Now().Before(deadline); {
				time.Sleep(200 * time.Millisecond)
			}
			outcomes, closeAll := h2Attack(t, tc.addr, tc.path, tc.token, []byte(tc.body), conns, streams, 0, -1)
			defer closeAll()
			// Let every stream arrive, and the refusals' write
			// deadline pass.
			time.Sleep(httpguard.RefusalWriteWait + 5*time.Second)
			held := goroutines(t, maddr)
			code, proto, err := h2Route(client, httpAddr, bobToken)
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("%s: goroutines %.0f before, %.0f while %d connections of %d streams are held; outcomes %v; bob's Route %d %s %v; load %s",
				tc.name, base, held, conns, streams, outcomes(), code, proto, err, strings.TrimSpace(string(load)))
			want := base + conns*perConnGoroutines + goroutineSlack
			if !tc.released {
				want += heldMax
			}
			if held > want {
				t.Errorf("%s: %.0f goroutines held (%.0f before), want at most %.0f", tc.name, held, base, want)
			}
			if code != http.StatusOK {
				t.Errorf("bob's Route during the attack: %d %v, want 200", code, err)
			}
			if !tc.released && outcomes()["status 429"] == 0 {
				t.Errorf("outcomes %v: want 429 past the caller's share", outcomes())
			}
			closeAll()
		})
	}
}

// TestH2HeldBodiesPerIdentity: one identity's HTTP/2 streams over TLS
// that each send 1 byte of a declared 2,000-byte Route body (40
// connections of 64 streams) hold no more than its share of the body
// budget (httpguard.StreamCost per request, 256 at the default share);
// the rest are refused 429 at once, and another identity's Routes are
// answered. Charged about 1 KiB each before, one identity held 16,384
// such streams (heap +975 MB).
func TestH2HeldBodiesPerIdentity(t *testing.T) {
	httpAddr, _, maddr, client := h2Daemon(t)
	if code, _, err := h2Route(client, httpAddr, bobToken); code != http.StatusOK {
		t.Fatalf("warm-up Route: %d %v", code, err)
	}
	base, err := heapNow(maddr)
	if err != nil {
		t.Fatal(err)
	}
	g0 := goroutines(t, maddr)
	const conns, streams = 40, 64
	body := []byte(`{"query":"` + strings.Repeat("a", 1988) + `"}`)
	outcomes, closeAll := h2Attack(t, httpAddr, "/classifier.v1.ClassifierService/Route", aliceToken, body, conns, streams, 65535, 1)
	defer closeAll()
	time.Sleep(5 * time.Second)
	held := goroutines(t, maddr)
	top, err := heapNow(maddr)
	if err != nil {
		t.Fatal(err)
	}
	var fails []string
	for range 5 {
		if code, proto, err := h2Route(client, httpAddr, bobToken); code != http.StatusOK {
			fails = append(fails, fmt.Sprintf("%d %s %v", code, proto, err))
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("goroutines %.0f before, %.0f while %d streams hold bodies; heap in use %.0f MB before, %.0f MB (+%.0f MB); outcomes %v; bob's Routes failed: %v; load %s",
		g0, held, conns*streams, base.inuse/1e6, top.inuse/1e6, (top.inuse-base.inuse)/1e6, outcomes(), fails, strings.TrimSpace(string(load)))
	want := g0 + conns*perConnGoroutines + float64(httpguard.DefaultBodyBudgetPerClient/httpguard.StreamCost) + goroutineSlack
	if held > want {
		t.Errorf("%.0f goroutines held (%.0f before), want at most %.0f: one identity's share of streams", held, g0, want)
	}
	if outcomes()["status 429"] == 0 {
		t.Errorf("outcomes %v: want 429 past the identity's share", outcomes())
	}
	if len(fails) > 0 {
		t.Errorf("bob's Routes while alice holds bodies: %d of 5 failed: %v", len(fails), fails)
	}
	if top.live-base.live > recvSlack {
		t.Errorf("live heap rose by %.0f MB, want at most %.0f MB", (top.live-base.live)/1e6, float64(recvSlack)/1e6)
	}
}

// TestH2ProxyUnreadRefusalsReleased: the proxy's --mcp-listen over TLS,
// the same attack with no token (20 connections of 250 streams announcing
// a window of 0): its refusals are dropped after
// httpguard.RefusalWriteWait, and the proxy's goroutines are back to those
// of the connections while they stay open.
func TestH2ProxyUnreadRefusalsReleased(t *testing.T) {
	config, _ := proxySetup(t)
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd-proxy")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,call "+aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, maddr := freeAddr(t), freeAddr(t)
	d := startProxyHTTP(t, config, addr, "--tls-cert", serverCert, "--tls-key", serverCert+".key",
		"--auth-token-file", tokens, "--metrics-listen", maddr, "--log-level", "info")
	waitFor(t, d, "classifierd serving MCP over streamable HTTP")
	waitMetric(t, maddr, "go_goroutines", 1)
	base := goroutines(t, maddr)
	const conns, streams = 20, 250
	outcomes, closeAll := h2Attack(t, addr, "/mcp", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), conns, streams, 0, -1)
	defer closeAll()
	time.Sleep(httpguard.RefusalWriteWait + 5*time.Second)
	held := goroutines(t, maddr)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("proxy: goroutines %.0f before, %.0f while %d connections of %d streams are held; outcomes %v; load %s",
		base, held, conns, streams, outcomes(), strings.TrimSpace(string(load)))
	if want := base + conns*perConnGoroutines + goroutineSlack; held > want {
		t.Errorf("%.0f goroutines held (%.0f before), want at most %.0f", held, base, want)
	}
}
