package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/security"
	"github.com/classifierd/classifierd/mcpserver"
	"github.com/classifierd/classifierd/server/auth"
)

// These tests cover TLS on the HTTP/JSON and MCP listeners: the same
// certificate and client CA as gRPC, identity from client certificates
// over HTTP/JSON (through the gRPC interceptors) and MCP (mcpClientCert,
// mcpCaller), and --plaintext-listeners.

func TestPlaintextListenersFlag(t *testing.T) {
	base := []string{"--model", "m", "--index", "x.idx"}
	tlsArgs := []string{"--tls-cert", "c.pem", "--tls-key", "c.key"}
	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string
		http, mcp bool
	}{
		{"default", tlsArgs, "", false, false},
		{"http", append(slices.Clone(tlsArgs), "--plaintext-listeners", "http"), "", true, false},
		{"both", append(slices.Clone(tlsArgs), "--plaintext-listeners", "mcp, http"), "", true, true},
		{"without TLS", []string{"--plaintext-listeners", "http"}, "--plaintext-listeners needs --tls-cert", false, false},
		{"grpc", append(slices.Clone(tlsArgs), "--plaintext-listeners", "grpc"), `"grpc" is not http or mcp`, false, false},
		{"unknown", append(slices.Clone(tlsArgs), "--plaintext-listeners", "metrics"), `"metrics" is not http or mcp`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseFlags(append(slices.Clone(base), tc.args...), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Ops.PlainHTTP != tc.http || cfg.Ops.PlainMCP != tc.mcp {
				t.Fatalf("plain http %v mcp %v, want %v %v", cfg.Ops.PlainHTTP, cfg.Ops.PlainMCP, tc.http, tc.mcp)
			}
		})
	}
}

// TestMCPClientCertHeader checks the MCP listener's middleware: the
// identity header holds the verified client certificate's common name and
// nothing a client sent.
func TestMCPClientCertHeader(t *testing.T) {
	pki := newCerts(t)
	hub, _ := pki.issue(t, "hub", pki.ca, pki.caKey, false)
	for _, tc := range []struct {
		name   string
		tls    *tls.ConnectionState
		spoof  []string
		want   []string
		wantOK bool
	}{
		{"plain text", nil, nil, nil, false},
		{"plain text, spoofed", nil, []string{"cert:admin"}, nil, false},
		{"TLS without a client certificate, spoofed", &tls.ConnectionState{}, []string{"admin"}, nil, false},
		{"unverified certificate, spoofed", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{hub}}, []string{"admin"}, nil, false},
		{"verified certificate", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{hub, pki.ca}}}, nil, []string{"hub"}, true},
		{"verified certificate, spoofed twice", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{hub, pki.ca}}}, []string{"admin", "root"}, []string{"hub"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodPost, "/mcp", nil)
			if err != nil {
				t.Fatal(err)
			}
			r.TLS = tc.tls
			for _, v := range tc.spoof {
				r.Header.Add("x-classifierd-client-cert-cn", v)
			}
			var got []string
			var ok bool
			security.ClientCertHeader(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, ok = r.Header[security.CertHeader]
			})).ServeHTTP(nil, r)
			if ok != tc.wantOK || !slices.Equal(got, tc.want) {
				t.Fatalf("header %v (set %v), want %v (set %v)", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestMCPCallerFollowsGRPCRules checks mcpCaller against the rules of
// server.AuthConfig: tokens win over certificates, a certificate names the
// caller only without tokens, stdio is the owner.
func TestMCPCallerFollowsGRPCRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("alice route,sessions "+aliceToken+"\nterm terminal "+routerToken+"\ncaller route,call "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	mtls := &tls.Config{ClientCAs: x509.NewCertPool()}
	cert := http.Header{security.CertHeader: {"hub"}}
	bearerAlice := http.Header{"Authorization": {"Bearer " + aliceToken}}
	bearerCaller := http.Header{"Authorization": {"Bearer " + carolToken}}
	both := http.Header{"Authorization": {"Bearer " + aliceToken}, security.CertHeader: {"hub"}}
	for _, tc := range []struct {
		name     string
		op       *security.Security
		header   http.Header
		tool     string
		want     string
		wantCode codes.Code
	}{
		{"anonymous daemon", &security.Security{}, http.Header{}, "route", "anonymous", codes.OK},
		{"server TLS only, certificate header ignored", &security.Security{TLS: &tls.Config{}}, cert, "route", "anonymous", codes.OK},
		{"mTLS: certificate", &security.Security{TLS: mtls}, cert, "route", "cert:hub", codes.OK},
		{"mTLS: certificate, terminal tool", &security.Security{TLS: mtls}, cert, "track_input_event", "cert:hub", codes.OK},
		{"mTLS: empty common name names no one", &security.Security{TLS: mtls}, http.Header{security.CertHeader: {""}}, "route", "", codes.Unauthenticated},
		{"mTLS: no certificate", &security.Security{TLS: mtls}, http.Header{}, "route", "", codes.Unauthenticated},
		{"mTLS: a bearer token is no certificate", &security.Security{TLS: mtls}, bearerAlice, "route", "", codes.Unauthenticated},
		{"mTLS: stdio", &security.Security{TLS: mtls}, nil, "route", "anonymous", codes.OK},
		{"tokens: token", &security.Security{Tokens: tokens}, bearerAlice, "route", "alice", codes.OK},
		{"tokens: no token", &security.Security{Tokens: tokens}, http.Header{}, "route", "", codes.Unauthenticated},
		{"tokens and mTLS: the token wins", &security.Security{Tokens: tokens, TLS: mtls}, both, "route", "alice", codes.OK},
		{"tokens and mTLS: a certificate is no token", &security.Security{Tokens: tokens, TLS: mtls}, cert, "route", "", codes.Unauthenticated},
		{"tokens and mTLS: scope", &security.Security{Tokens: tokens, TLS: mtls}, both, "track_input_event", "", codes.PermissionDenied},
		{"tokens: call_tool needs the call scope", &security.Security{Tokens: tokens}, bearerAlice, "call_tool", "", codes.PermissionDenied},
		{"tokens: call_tool with the call scope", &security.Security{Tokens: tokens}, bearerCaller, "call_tool", "caller", codes.OK},
		{"mTLS: a certificate may call_tool", &security.Security{TLS: mtls}, cert, "call_tool", "cert:hub", codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.op.MCPCaller(tc.tool, tc.header)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code %v (%v), want %v", got, err, tc.wantCode)
			}
			if c.Name != tc.want {
				t.Fatalf("caller %q, want %q", c.Name, tc.want)
			}
		})
	}
}

// httpsClient trusts the test CA and presents client (if set); HTTP/2 is
// tried first, as browsers and Connect clients do.
func (c *certs) httpsClient(client *tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(c.ca)
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client != nil {
		conf.Certificates = []tls.Certificate{*client}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}}
}

// postJSON posts body to u and decodes a JSON object answer; err is the
// transport's.
func postJSON(t *testing.T, c *http.Client, u, body string, header http.Header) (code int, proto string, out map[string]any, err error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", nil, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s: %d, body not a JSON object: %v\n%s", u, resp.StatusCode, err, b)
	}
	return resp.StatusCode, resp.Proto, out, nil
}

// withHeader adds header to every request of base.
type withHeader struct {
	base   http.RoundTripper
	header http.Header
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.header {
		r.Header[k] = vs
	}
	return h.base.RoundTrip(r)
}

// wantServedCert fails the test unless the TLS listener at addr serves
// want (dialled with conf).
func wantServedCert(t *testing.T, addr string, conf *tls.Config, want *x509.Certificate) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf)
	if err != nil {
		t.Fatalf("TLS to %s after SIGHUP: %v", addr, err)
	}
	got := c.ConnectionState().PeerCertificates[0].SerialNumber
	c.Close()
	if got.Cmp(want.SerialNumber) != 0 {
		t.Errorf("%s serves certificate %v after SIGHUP, want the new one %v", addr, got, want.SerialNumber)
	}
}

// bearerClient sends token as a bearer token with every request.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: withHeader{http.DefaultTransport, bearer(token)}}
}

// mustConnect is mcpConnect for a session the test needs.
func mustConnect(t *testing.T, endpoint string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	cs, err := mcpConnect(t, endpoint, hc)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

// mcpConnect opens an MCP session with the SDK's streamable client.
func mcpConnect(t *testing.T, endpoint string, hc *http.Client) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "classifierd-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// mcpCallErr calls a tool; a tool error is an error with its text.
func mcpCallErr(cs *mcp.ClientSession, tool string, args any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err == nil && res.IsError {
		err = errors.New(resultText(res))
	}
	return err
}

// spoofed is a client's try at the identity header mcpClientCert owns.
var spoofed = http.Header{"X-Classifierd-Client-Cert-Cn": {"hub"}}

// TestTLSOnEveryListener runs the daemon with mTLS and no token file, and
// --http-listen and --mcp-listen: both serve TLS with the gRPC listener's
// certificate (reloaded on SIGHUP) and client CA, and on both the client
// certificate is the caller, as on gRPC.
func TestTLSOnEveryListener(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd")
	_, hubCert := pki.leaf(t, "hub")
	_, otherCert := pki.leaf(t, "other")
	addr, httpAddr, mcpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, conn := opsDaemon(t, addr, pki.dial(&hubCert), "--index", idx,
		"--tls-cert", serverCert, "--tls-key", serverCert+".key", "--tls-client-ca", filepath.Join(pki.dir, "ca.pem"),
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr)
	waitFor(t, d, "classifierd serving MCP over streamable HTTP")
	waitFor(t, d, "classifierd serving HTTP/JSON")
	if log := d.stderr.String(); !strings.Contains(log, `msg="listeners serving TLS" tls=grpc,http,mcp plaintext="" client_certificates=true`) {
		t.Fatalf("no startup line naming the TLS listeners:\n%s", log)
	}
	hub, other, noCert := pki.httpsClient(&hubCert), pki.httpsClient(&otherCert), pki.httpsClient(nil)
	api := "https://" + httpAddr + "/classifier.v1.ClassifierService/"
	endpoint := "https://" + mcpAddr + listeners.MCPPath
	route := `{"query":"Check my GitHub notifications","maxTools":3}`

	t.Run("plain HTTP is not served", func(t *testing.T) {
		plain := &http.Client{Timeout: 30 * time.Second}
		for _, u := range []string{"http://" + httpAddr + "/classifier.v1.ClassifierService/Route", "http://" + mcpAddr + listeners.MCPPath} {
			resp, err := plain.Post(u, "application/json", strings.NewReader(route))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("plain POST %s: %s, want 400 (an HTTP request to an HTTPS server) or no answer", u, resp.Status)
				}
			}
		}
		if _, err := mcpConnect(t, "http://"+mcpAddr+listeners.MCPPath, plain); err == nil {
			t.Error("a plain text MCP client connected")
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		if _, _, out, err := postJSON(t, noCert, api+"Route", route, nil); err == nil {
			t.Errorf("HTTP/JSON without a client certificate answered %v, want a refused handshake", out)
		}
		if _, err := mcpConnect(t, endpoint, noCert); err == nil {
			t.Error("an MCP client without a client certificate connected")
		}
		// The identity header does not stand in for a certificate.
		spoof := &http.Client{Transport: withHeader{noCert.Transport, spoofed}}
		if _, err := mcpConnect(t, endpoint, spoof); err == nil {
			t.Error("an MCP client without a client certificate but with the identity header connected")
		}
	})
	t.Run("a client certificate without a common name names no one", func(t *testing.T) {
		// Were it "cert:", every such certificate (SPIFFE's name their
		// holder only in a URI SAN) would be one caller, sharing sessions.
		cert, key := pki.issue(t, "", pki.ca, pki.caKey, false)
		p := pki.write(t, "no-cn.pem", cert, key)
		noCN, err := tls.LoadX509KeyPair(p, p+".key")
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(addr, pki.dial(&noCN)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = pb.NewClassifierServiceClient(cc).CreateSession(ctx, &pb.CreateSessionRequest{})
		wantCode(t, "gRPC with a certificate without a common name", err, codes.Unauthenticated)
		if code, _, out, err := postJSON(t, pki.httpsClient(&noCN), api+"Route", route, nil); err != nil || code != http.StatusUnauthorized {
			t.Errorf("HTTP/JSON with a certificate without a common name: %d %v %v, want 401", code, out, err)
		}
		if _, err := mcpConnect(t, endpoint, pki.httpsClient(&noCN)); err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
			t.Errorf("MCP with a certificate without a common name: %v, want UNAUTHENTICATED", err)
		}
	})
	t.Run("HTTP/JSON over HTTPS", func(t *testing.T) {
		code, proto, out, err := postJSON(t, hub, api+"Route", route, nil)
		if err != nil || code != 200 {
			t.Fatalf("Route over HTTPS: %d %v %v", code, out, err)
		}
		if proto != "HTTP/2.0" {
			t.Errorf("protocol %s, want HTTP/2.0 (ALPN h2, as Connect and gRPC-web clients use)", proto)
		}
		if servers, _ := out["servers"].([]any); len(servers) == 0 || servers[0].(map[string]any)["id"] != "github" {
			t.Fatalf("servers = %v, want github first", out["servers"])
		}
	})
	t.Run("HTTP/JSON callers are their client certificates", func(t *testing.T) {
		// Made over HTTP/JSON by the certificate hub: cert:hub owns it on
		// every listener, and cert:other on none.
		if code, _, out, err := postJSON(t, hub, api+"CreateSession", `{"sessionId":"hub-1"}`, nil); err != nil || code != 200 {
			t.Fatalf("CreateSession over HTTPS: %d %v %v", code, out, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pb.NewClassifierServiceClient(conn).GetSession(ctx, &pb.GetSessionRequest{SessionId: "hub-1"}); err != nil {
			t.Fatalf("hub over gRPC, its session made over HTTP: %v", err)
		}
		oc, err := grpc.NewClient(addr, pki.dial(&otherCert)...)
		if err != nil {
			t.Fatal(err)
		}
		defer oc.Close()
		_, err = pb.NewClassifierServiceClient(oc).GetSession(ctx, &pb.GetSessionRequest{SessionId: "hub-1"})
		// Session ids are per caller: hub's "hub-1" is not other's.
		wantCode(t, "other over gRPC, hub's session", err, codes.NotFound)
		if code, _, out, err := postJSON(t, other, api+"GetSession", `{"sessionId":"hub-1"}`, nil); err != nil || code != http.StatusNotFound {
			t.Fatalf("other over HTTPS, hub's session: %d %v %v, want 404", code, out, err)
		}
		if code, _, out, err := postJSON(t, hub, api+"GetSession", `{"sessionId":"hub-1"}`, nil); err != nil || code != 200 {
			t.Fatalf("hub over HTTPS, its session: %d %v %v", code, out, err)
		}
	})
	t.Run("MCP callers are their client certificates", func(t *testing.T) {
		hubMCP, err := mcpConnect(t, endpoint, hub)
		if err != nil {
			t.Fatalf("MCP over HTTPS with a client certificate: %v", err)
		}
		var st mcpserver.SearchToolsOutput
		callTool(t, hubMCP, "search_tools", map[string]any{"query": "show my unread GitHub notifications", "k": 1}, &st)
		if len(st.Tools) != 1 || st.Tools[0].Name != "list_notifications" {
			t.Fatalf("search_tools: %+v, want list_notifications", st.Tools)
		}
		prompt := map[string]any{"prompt": "write the report to disk as report.md", "session_id": "hub-1"}
		otherMCP, err := mcpConnect(t, endpoint, other)
		if err != nil {
			t.Fatal(err)
		}
		if err := mcpCallErr(otherMCP, "analyze_prompt", prompt); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
			t.Errorf("other over MCP, hub's session: %v, want NOT_FOUND", err)
		}
		// The certificate other with the identity header claiming hub is
		// still other.
		spoof := &http.Client{Transport: withHeader{other.Transport, spoofed}}
		spoofMCP, err := mcpConnect(t, endpoint, spoof)
		if err != nil {
			t.Fatal(err)
		}
		if err := mcpCallErr(spoofMCP, "analyze_prompt", prompt); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
			t.Errorf("other claiming hub in the identity header, hub's session: %v, want NOT_FOUND", err)
		}
		var an mcpserver.AnalyzePromptOutput
		callTool(t, hubMCP, "analyze_prompt", prompt, &an)
		if !an.Changed || !slices.Contains(an.Added, "filesystem") {
			t.Fatalf("hub over MCP, its session: %+v, want filesystem added", an)
		}
	})
	t.Run("HTTP/1.1 over TLS", func(t *testing.T) {
		// The listener makes the TLS handshake itself and counts an
		// HTTP/1.1 connection's head lines above TLS (the eleventh
		// hostile pass: heads of thousands of tiny fields over TLS were
		// held whole): the client certificate still names the caller,
		// and a head of more than 256 fields is 431.
		h1 := func(c *http.Client) *http.Client {
			tr := c.Transport.(*http.Transport).Clone()
			tr.ForceAttemptHTTP2 = false
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
			return &http.Client{Timeout: 30 * time.Second, Transport: tr}
		}
		hub1, other1 := h1(hub), h1(other)
		code, proto, out, err := postJSON(t, hub1, api+"GetSession", `{"sessionId":"hub-1"}`, nil)
		if err != nil || code != 200 || proto != "HTTP/1.1" {
			t.Fatalf("hub over HTTP/1.1, its session: %d %s %v %v, want 200 over HTTP/1.1", code, proto, out, err)
		}
		if code, _, out, err := postJSON(t, other1, api+"GetSession", `{"sessionId":"hub-1"}`, nil); err != nil || code != http.StatusNotFound {
			t.Fatalf("other over HTTP/1.1, hub's session: %d %v %v, want 404", code, out, err)
		}
		if _, err := mcpConnect(t, endpoint, hub1); err != nil {
			t.Fatalf("MCP over HTTP/1.1 and TLS with a client certificate: %v", err)
		}
		for _, a := range []struct{ name, addr, url string }{{"HTTP/JSON", httpAddr, api + "Route"}, {"MCP", mcpAddr, endpoint}} {
			req, _ := http.NewRequest(http.MethodPost, a.url, strings.NewReader(route))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tinyFields(200) {
				req.Header.Set(k, v)
			}
			resp, err := hub1.Do(req)
			if err != nil || resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("%s over HTTP/1.1 and TLS, 200 header fields: %v %v, want served", a.name, resp, err)
			} else {
				resp.Body.Close()
			}
			// A head of 6,500 fields that never ends is refused as it
			// arrives, not held until ReadHeaderTimeout.
			conf := hub1.Transport.(*http.Transport).TLSClientConfig.Clone()
			tc, err := tls.Dial("tcp", a.addr, conf)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString("POST / HTTP/1.1\r\nHost: x\r\n")
			for i := range 6500 {
				fmt.Fprintf(&b, "h%d: a\r\n", i)
			}
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = tc.Write([]byte(b.String()))
			got, _ := io.ReadAll(tc)
			tc.Close()
			if !strings.HasPrefix(string(got), "HTTP/1.1 431 ") {
				t.Errorf("%s over HTTP/1.1 and TLS, a never-ended head of 6,500 fields: read %.80q in 5 s, want a 431 at once", a.name, got)
			}
		}
	})
	t.Run("SIGHUP swaps the certificate of every listener", func(t *testing.T) {
		_, renewed := pki.leaf(t, "classifierd") // the same files, a new certificate
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, d, `msg=reloaded what="TLS certificate"`)
		conf := hub.Transport.(*http.Transport).TLSClientConfig.Clone()
		conf.NextProtos = []string{"h2"} // gRPC's listener requires ALPN h2
		for _, a := range []string{addr, httpAddr, mcpAddr} {
			wantServedCert(t, a, conf, renewed.Leaf)
		}
	})
	if strings.Contains(d.stderr.String(), "panic") {
		t.Fatalf("daemon log has a panic:\n%s", d.stderr.String())
	}
}

// TestTLSPlaintextListeners runs the daemon with mTLS on gRPC and
// --plaintext-listeners http,mcp, as behind a TLS-terminating proxy: both
// serve plain text, where no call carries a client certificate, so none is
// anyone, whatever the identity header claims.
func TestTLSPlaintextListeners(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd")
	_, hubCert := pki.leaf(t, "hub")
	addr, httpAddr, mcpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, _ := opsDaemon(t, addr, pki.dial(&hubCert), "--index", idx,
		"--tls-cert", serverCert, "--tls-key", serverCert+".key", "--tls-client-ca", filepath.Join(pki.dir, "ca.pem"),
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr, "--plaintext-listeners", "http,mcp")
	waitFor(t, d, "classifierd serving MCP over streamable HTTP")
	waitFor(t, d, "classifierd serving HTTP/JSON")
	log := d.stderr.String()
	if !strings.Contains(log, `msg="listeners serving TLS" tls=grpc plaintext=http,mcp client_certificates=true`) ||
		!strings.Contains(log, "no call on a plain text listener can authenticate") {
		t.Fatalf("no startup lines naming the plain listeners and warning:\n%s", log)
	}
	plain := &http.Client{Timeout: 30 * time.Second}
	for _, h := range []http.Header{nil, spoofed} {
		code, _, out, err := postJSON(t, plain, "http://"+httpAddr+"/classifier.v1.ClassifierService/Route", `{"query":"check github"}`, h)
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("plain HTTP/JSON (header %v): %d %v %v, want 401", h, code, out, err)
		}
	}
	for _, h := range []http.Header{nil, spoofed} {
		// No session opens: the listener checks every request.
		_, err := mcpConnect(t, "http://"+mcpAddr+listeners.MCPPath, &http.Client{Transport: withHeader{http.DefaultTransport, h}})
		if err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
			t.Errorf("plain MCP connect (header %v): %v, want UNAUTHENTICATED", h, err)
		}
	}
	// The gRPC listener has no opt-out.
	cc, err := grpc.NewClient(addr, insecureDial...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pb.NewClassifierServiceClient(cc).GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	wantCode(t, "plaintext gRPC", err, codes.Unavailable)
}
