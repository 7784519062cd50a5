package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/listeners"
)

// These tests are the hostile-client probe of issue 27 made repeatable:
// the real daemon (--http-listen, --mcp-listen) and the real proxy
// (--mcp-listen), each with a token file, attacked over real sockets with
// requests written byte by byte, so that nothing in a client library
// tidies them up. The daemon's memory is read from /proc.

// hostileLimit is --max-recv-bytes's default, the body limit of every
// HTTP surface under test (the proxy's is the same 4 MiB).
const hostileLimit = 4 << 20

var (
	bombOnce sync.Once
	bomb     []byte
)

// gzipBomb is about 200 KB of gzip that inflates to 200 MB of JSON.
func gzipBomb(t *testing.T) []byte {
	t.Helper()
	bombOnce.Do(func() {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			panic(err)
		}
		_, _ = zw.Write([]byte(`{"query":"`))
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for range 200 {
			_, _ = zw.Write(chunk)
		}
		_, _ = zw.Write([]byte(`"}`))
		if err := zw.Close(); err != nil {
			panic(err)
		}
		bomb = buf.Bytes()
	})
	return bomb
}

// rawRequest is one HTTP/1.1 request as written on the wire.
type rawRequest struct {
	method, path string
	header       map[string]string
	body         []byte
	// declare is the Content-Length written: 0 for len(body), -1 for a
	// chunked body; a declared length may differ from what is sent.
	declare int64
}

// write sends the request on conn: the head, then the body (a write error
// is not one: the server may answer and close before the body is read).
func (rq rawRequest) write(conn net.Conn, host string) {
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", rq.method, rq.path, host)
	for k, v := range rq.header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	switch {
	case rq.declare == -1:
		head.WriteString("Transfer-Encoding: chunked\r\n")
	case rq.declare > 0:
		fmt.Fprintf(&head, "Content-Length: %d\r\n", rq.declare)
	default:
		fmt.Fprintf(&head, "Content-Length: %d\r\n", len(rq.body))
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		return
	}
	if rq.declare != -1 {
		_, _ = conn.Write(rq.body)
		return
	}
	for b := rq.body; len(b) > 0; {
		n := min(len(b), 64<<10)
		if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", n, b[:n]); err != nil {
			return
		}
		b = b[n:]
	}
	_, _ = io.WriteString(conn, "0\r\n\r\n")
}

// do sends rq on a new connection to addr and returns the answer's status,
// its headers and the first 4 KB of its body.
func (rq rawRequest) do(t *testing.T, addr string) (int, http.Header, string) {
	t.Helper()
	return rq.doAs(t, addr, addr)
}

// doAs is do with the Host header host.
func (rq rawRequest) doAs(t *testing.T, addr, host string) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go rq.write(conn, host)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, resp.Header, string(b)
}

// procMem is a process's resident set now and at its peak, in bytes.
func procMem(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n << 10
		case "VmHWM:":
			hwm = n << 10
		}
	}
	return rss, hwm
}

// peakMeter measures how far a process's resident set rises above where
// it stood when the meter started: the kernel's peak (VmHWM, reset to the
// current figure by writing 5 to clear_refs), or where that cannot be
// reset, the highest of samples taken every 10ms.
type peakMeter struct {
	t          *testing.T
	pid        int
	base       int64
	hwmReset   bool
	stop, done chan struct{}
	sampled    int64
}

func startPeakMeter(t *testing.T, pid int) *peakMeter {
	m := &peakMeter{t: t, pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	m.hwmReset = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	m.base, _ = procMem(t, pid)
	m.sampled = m.base
	go func() {
		defer close(m.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				if err != nil {
					continue
				}
				if i := bytes.Index(b, []byte("VmRSS:")); i >= 0 {
					f := strings.Fields(string(b[i+6:]))
					if n, err := strconv.ParseInt(f[0], 10, 64); err == nil && n<<10 > m.sampled {
						m.sampled = n << 10
					}
				}
			}
		}
	}()
	return m
}

// growth stops the meter and returns the rise of the peak over the base,
// and the figures behind it (for the log).
func (m *peakMeter) growth() (int64, string) {
	close(m.stop)
	<-m.done
	rss, hwm := procMem(m.t, m.pid)
	peak := m.sampled
	how := "sampled VmRSS"
	if m.hwmReset {
		peak, how = max(hwm, m.sampled), "VmHWM after clear_refs"
	}
	return peak - m.base, fmt.Sprintf("RSS before %d MB, peak %d MB (%s), RSS after %d MB", m.base>>20, peak>>20, how, rss>>20)
}

// hostileSurface is one HTTP listener under attack.
type hostileSurface struct {
	name, addr, path string
	contentType      string
	good             []byte // a small request the surface answers 200
	token            string // holds a scope the surface serves
	pid              int
}

func (s hostileSurface) request(token string, body []byte, declare int64, extra map[string]string) rawRequest {
	h := map[string]string{"Content-Type": s.contentType, "Accept": "application/json, text/event-stream"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	for k, v := range extra {
		h[k] = v
	}
	return rawRequest{method: http.MethodPost, path: s.path, header: h, body: body, declare: declare}
}

// hostileSetup runs the daemon (HTTP/JSON, MCP) and the proxy (MCP), each
// with a token file, and returns their surfaces and the daemon's gRPC
// connection.
func hostileSetup(t *testing.T) (rest, mcpd, proxy hostileSurface, conn *grpc.ClientConn, metrics string) {
	t.Helper()
	dir := t.TempDir()
	daemonTokens, proxyTokens := filepath.Join(dir, "daemon-tokens"), filepath.Join(dir, "proxy-tokens")
	// term may call the daemon's terminal tools but not Route; admin no
	// daemon MCP tool; on the proxy, term holds none of its scopes.
	if err := os.WriteFile(daemonTokens, []byte("alice route,sessions "+aliceToken+"\nbob route,sessions "+bobToken+
		"\nterm terminal "+routerToken+"\nadmin sessions,admin "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(proxyTokens, []byte("alice route,call "+aliceToken+"\nbob route,call "+bobToken+
		"\nterm terminal,sessions,admin "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr, mcpAddr, proxyAddr, metrics := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	d, conn := startDaemon(t, genIndex(t, "testdata/mini.json"), "--auth-token-file", daemonTokens,
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr, "--metrics-listen", metrics)
	waitFor(t, d, "classifierd serving HTTP/JSON")
	config, _ := proxySetup(t)
	px := startProxyHTTP(t, config, proxyAddr, "--auth-token-file", proxyTokens)
	rest = hostileSurface{name: "HTTP/JSON", addr: httpAddr, path: "/classifier.v1.ClassifierService/Route",
		contentType: "application/json", good: []byte(`{"query":"check my github notifications"}`), token: aliceToken, pid: d.cmd.Process.Pid}
	mcpd = hostileSurface{name: "daemon MCP", addr: mcpAddr, path: listeners.MCPPath, contentType: "application/json",
		good: []byte(initializeBody), token: aliceToken, pid: d.cmd.Process.Pid}
	proxy = hostileSurface{name: "proxy MCP", addr: proxyAddr, path: listeners.MCPPath, contentType: "application/json",
		good: []byte(initializeBody), token: aliceToken, pid: px.cmd.Process.Pid}
	return rest, mcpd, proxy, conn, metrics
}

// TestHostileHTTPBodies: on every HTTP surface a request is authenticated
// before its body is read (401, 403), a body over the limit is 413 whether
// declared or sent chunked, a compressed body is 415 and is never
// inflated, a length prefix cannot claim what was not sent; 400 clients
// that declare 4 MiB and send a byte, and gzip bombs with and without a
// token, raise the memory of the daemon and of the proxy by at most 50 MB
// while another client's small Route is answered.
func TestHostileHTTPBodies(t *testing.T) {
	rest, mcpd, proxy, conn, metrics := hostileSetup(t)
	bomb := gzipBomb(t)
	t.Logf("gzip bomb: %d KB inflating to 200 MB", len(bomb)>>10)
	big := append(append([]byte(`{"query":"`), bytes.Repeat([]byte("a"), hostileLimit+(1<<20))...), '"', '}')
	gz := map[string]string{"Content-Encoding": "gzip"}

	t.Run("status codes", func(t *testing.T) {
		type row struct {
			name string
			rq   rawRequest
			want int
			body string // in the answer
		}
		var rows []row
		for _, s := range []hostileSurface{rest, mcpd, proxy} {
			// The reason each surface gives: google.rpc.Status on
			// HTTP/JSON, a JSON-RPC error on MCP.
			noScope, unauthenticated, denied := carolToken, "UNAUTHENTICATED", "PERMISSION_DENIED" // carol: admin on the daemon (no MCP tool's scope), term on the proxy
			if s.name == rest.name {
				noScope, unauthenticated, denied = routerToken, `"code":16`, `"code":7` // term: no Route
			}
			rows = append(rows,
				row{s.name + ": no token", s.request("", s.good, 0, nil), 401, unauthenticated},
				row{s.name + ": no token, a body over the limit", s.request("", big, 0, nil), 401, unauthenticated},
				row{s.name + ": no token, a gzip bomb", s.request("", bomb, 0, gz), 401, unauthenticated},
				row{s.name + ": unknown token, 4 MiB declared", s.request("nobody-0123456789abcdef", s.good[:1], hostileLimit, nil), 401, unauthenticated},
				row{s.name + ": a token without the scope, a body over the limit", s.request(noScope, big, 0, nil), 403, denied},
				row{s.name + ": over the limit by Content-Length", s.request(s.token, s.good, hostileLimit+1, nil), 413, "over the limit of 4194304 bytes"},
				row{s.name + ": over the limit, chunked", s.request(s.token, big, -1, nil), 413, "over the limit of 4194304 bytes"},
				row{s.name + ": a gzip bomb", s.request(s.token, bomb, 0, gz), 415, `gzip`},
				row{s.name + ": deflate", s.request(s.token, s.good, 0, map[string]string{"Content-Encoding": "deflate"}), 415, "send the request body uncompressed"},
				row{s.name + ": a small request", s.request(s.token, s.good, 0, nil), 200, ""},
			)
		}
		grpcWeb := map[string]string{"Content-Type": "application/grpc-web+proto", "Authorization": "Bearer " + aliceToken}
		claim4MiB := []byte{0, 0, 0x40, 0, 0} // a message prefix declaring 4 MiB, and nothing after it
		rows = append(rows,
			row{"HTTP/JSON: Connect, over the limit", rest.request(aliceToken, big, 0, map[string]string{"Connect-Protocol-Version": "1"}), 413, `"code":"resource_exhausted"`},
			row{"HTTP/JSON: Connect, no token", rest.request("", big, 0, map[string]string{"Connect-Protocol-Version": "1"}), 401, `"code":"unauthenticated"`},
			row{"HTTP/JSON: gRPC-Web, a prefix claiming 4 MiB", rawRequest{method: "POST", path: rest.path, header: grpcWeb, body: claim4MiB}, 400, ""},
			row{"HTTP/JSON: gRPC-Web, gzip", rawRequest{method: "POST", path: rest.path, header: map[string]string{"Content-Type": "application/grpc-web+proto",
				"Authorization": "Bearer " + aliceToken, "Grpc-Encoding": "gzip"}, body: []byte{1, 0, 0, 0, 0}}, 415, ""},
			row{"HTTP/JSON: Connect streaming, gzip", rawRequest{method: "POST", path: "/classifier.v1.ClassifierService/WatchExposure", header: map[string]string{
				"Content-Type": "application/connect+json", "Authorization": "Bearer " + aliceToken, "Connect-Content-Encoding": "gzip"}, body: []byte{1, 0, 0, 0, 0}}, 415, ""},
			row{"HTTP/JSON: health needs no token", rawRequest{method: "POST", path: "/grpc.health.v1.Health/Check",
				header: map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}, body: []byte("{}")}, 200, "SERVING"},
			row{"HTTP/JSON: the explain page needs no token", rawRequest{method: "GET", path: "/"}, 200, "<title>classifierd"},
		)
		for _, tc := range rows {
			t.Run(tc.name, func(t *testing.T) {
				addr := rest.addr
				switch {
				case strings.HasPrefix(tc.name, mcpd.name):
					addr = mcpd.addr
				case strings.HasPrefix(tc.name, proxy.name):
					addr = proxy.addr
				}
				code, _, body := tc.rq.do(t, addr)
				if code != tc.want || !strings.Contains(body, tc.body) {
					t.Errorf("got %d %.300q, want %d with %q", code, body, tc.want, tc.body)
				}
			})
		}
		// The HTTP/JSON refusals are counted as the gRPC edge counts its
		// own, under the method the path names.
		m := scrape(t, metrics)
		for series, want := range map[string]float64{
			`classifierd_auth_denied_total{code="Unauthenticated",method="/classifier.v1.ClassifierService/Route"}`:  5,
			`classifierd_auth_denied_total{code="PermissionDenied",method="/classifier.v1.ClassifierService/Route"}`: 1,
		} {
			if got := m[series]; got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
	})

	// Another client's small Routes over gRPC, for as long as an attack
	// lasts: every one must be answered.
	c := pb.NewClassifierServiceClient(conn)
	bob := func(ctx context.Context) context.Context { return bearerCtx(ctx, bobToken) }
	for range 3 { // warm the model and the connection
		if _, err := c.Route(bob(context.Background()), &pb.RouteRequest{Query: "check my github notifications"}); err != nil {
			t.Fatal(err)
		}
	}
	routes := func(stop <-chan struct{}) (done func() []time.Duration) {
		var took []time.Duration
		var failed []error
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				ctx, cancel := context.WithTimeout(bob(context.Background()), 10*time.Second)
				start := time.Now()
				_, err := c.Route(ctx, &pb.RouteRequest{Query: "read config.json in my home directory"})
				cancel()
				took = append(took, time.Since(start))
				if err != nil {
					failed = append(failed, err)
				}
			}
		}()
		return func() []time.Duration {
			<-finished
			if len(failed) > 0 {
				t.Errorf("%d of %d small Routes of another client failed during the attack: %v", len(failed), len(took), failed[0])
			}
			return took
		}
	}

	for _, s := range []hostileSurface{rest, mcpd, proxy} {
		t.Run("memory under attack: "+s.name, func(t *testing.T) {
			meter := startPeakMeter(t, s.pid)
			stop := make(chan struct{})
			routed := routes(stop)
			var wg sync.WaitGroup
			answers := make(chan string, 1024)
			for _, token := range []string{"", "", s.token, s.token} {
				wg.Go(func() {
					code, _, _ := s.request(token, bomb, 0, gz).do(t, s.addr)
					answers <- fmt.Sprintf("bomb token=%v: %d", token != "", code)
				})
			}
			// 400 clients with a token and 400 without declare 4 MiB and
			// send one byte; those with a token are held (reading their
			// body) until they go away.
			var held []net.Conn
			var heldMu sync.Mutex
			for i := range 800 {
				token := ""
				if i%2 == 0 {
					token = s.token
				}
				wg.Go(func() {
					conn, err := net.Dial("tcp", s.addr)
					if err != nil {
						answers <- "dial: " + err.Error()
						return
					}
					s.request(token, s.good[:1], hostileLimit, nil).write(conn, s.addr)
					if token != "" {
						heldMu.Lock()
						held = append(held, conn)
						heldMu.Unlock()
						return
					}
					defer conn.Close()
					_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
					code := 0
					if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
						code = resp.StatusCode
						resp.Body.Close()
					}
					if code != 401 {
						answers <- fmt.Sprintf("declared 4 MiB, no token: %d", code)
					}
				})
			}
			wg.Wait()
			time.Sleep(2 * time.Second) // the held bodies are being read
			stillHeld := 0
			for _, conn := range held {
				_ = conn.SetReadDeadline(time.Now().Add(time.Millisecond))
				if _, err := conn.Read(make([]byte, 1)); err != nil && os.IsTimeout(err) {
					stillHeld++ // no answer yet: the daemon still waits for the body
				}
			}
			close(stop)
			took := routed()
			growth, figures := meter.growth()
			for _, conn := range held {
				conn.Close()
			}
			close(answers)
			var bombs []string
			for c := range answers {
				if strings.HasPrefix(c, "bomb") {
					bombs = append(bombs, c)
				} else {
					t.Error(c)
				}
			}
			slices.Sort(bombs)
			want := []string{"bomb token=false: 401", "bomb token=false: 401", "bomb token=true: 415", "bomb token=true: 415"}
			if !slices.Equal(bombs, want) {
				t.Errorf("gzip bombs answered %v, want %v", bombs, want)
			}
			slices.Sort(took)
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("%s: 4 gzip bombs (%d KB each, 2 with a token), 400 clients declaring 4 MiB with a token (%d held), 400 without: growth %d MB; %s; "+
				"another client's %d small Routes meanwhile: p50 %v, max %v (load average %s, noisy shared machine)",
				s.name, len(bomb)>>10, stillHeld, growth>>20, figures, len(took), took[len(took)/2], took[len(took)-1], strings.TrimSpace(string(load)))
			if growth > 50<<20 {
				t.Errorf("%s: resident memory rose %d MB under attack, want at most 50 MB (%s)", s.name, growth>>20, figures)
			}
		})
	}
}
