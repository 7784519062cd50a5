package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/testdaemon"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testgrpc"
)

// These tests cover issue #17 (operations) through the real daemon on a
// real socket: metrics scraped over HTTP, TLS and mTLS with certificates
// made here, bearer tokens, session ownership and quotas, admission under
// overload, status codes, shutdown and file limits.

// opsDaemon starts classifierd with args (which must include --listen
// addr) and waits until a health check over dial answers SERVING.
func opsDaemon(t *testing.T, addr string, dial []grpc.DialOption, args ...string) (*daemon, *grpc.ClientConn) {
	t.Helper()
	binaries(t)
	return serving(t, addr, testdaemon.Start(t, append(testdaemon.Args(t, addr), args...)...), 60*time.Second, dial...)
}

var insecureDial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s: code %v (%v), want %v", what, got, err, want)
	}
}

// scrapeClient opens a connection for each scrape: the daemon answers
// at most listeners.MetricsScrapesPerSecond scrapes a second on one
// connection (after a burst), and tests sample far faster than a
// Prometheus server does.
var scrapeClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// scrape fetches /metrics and returns the value of every sample line.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// rawCodec sends its []byte as the request, whatever the method expects.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

func TestOpsMetricsAndStatusCodes(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	maddr := freeAddr(t)
	_, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--metrics-listen", maddr)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const calls = 5
	for i := range calls {
		// Distinct texts: the daemon's vector cache would embed a
		// repeated one once.
		if _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: fmt.Sprintf("check my github notifications %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Route(ctx, &pb.RouteRequest{Query: "list the files in my home folder"}); err != nil {
		t.Fatal(err)
	}
	// A request that is not protobuf (field 1 of wire type 7 does not
	// exist) is the client's fault: InvalidArgument, not Internal.
	bad := []byte{0x0f, 0xff, 0xff}
	var out []byte
	err := conn.Invoke(ctx, "/classifier.v1.ClassifierService/Classify", &bad, &out, grpc.ForceCodec(rawCodec{}))
	wantCode(t, "unparseable Classify", err, codes.InvalidArgument)
	// The daemon still answers afterwards.
	if _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "read a file"}); err != nil {
		t.Fatal(err)
	}

	m := scrape(t, maddr)
	checks := []struct {
		series string
		min    float64
	}{
		{`classifierd_rpc_requests_total{code="OK",method="/classifier.v1.ClassifierService/Classify"}`, calls + 1},
		{`classifierd_rpc_requests_total{code="InvalidArgument",method="/classifier.v1.ClassifierService/Classify"}`, 1},
		{`classifierd_rpc_duration_seconds_count{method="/classifier.v1.ClassifierService/Route"}`, 1},
		{`classifierd_embed_duration_seconds_count`, calls + 2},
		{`classifierd_admitted_call_seconds_count`, calls + 2},
		{`classifierd_admission_wait_seconds_count`, calls + 2},
		{`classifierd_embed_batch_texts_count`, calls + 2},
		{`classifierd_answers_total{method="Classify"}`, calls + 1},
		{`classifierd_top_confidence_count{method="Classify"}`, calls + 1},
		{`classifierd_top_confidence_count{method="Route"}`, 1},
		{`classifierd_index_generation`, 1},
		{`classifierd_index_vectors`, 1},
		{`classifierd_index_file_bytes`, 1},
		{`classifierd_index_labels{kind="category"}`, 1},
		{`process_resident_memory_bytes`, 1},
	}
	for _, ck := range checks {
		if got, ok := m[ck.series]; !ok || got < ck.min {
			t.Errorf("%s = %v (present %v), want at least %v", ck.series, got, ok, ck.min)
		}
	}
	for _, s := range []string{"classifierd_admission_queue_depth", "classifierd_admission_in_flight", "classifierd_admission_overloaded",
		"classifierd_admission_expected_wait_seconds", "classifierd_admission_wait_scale", "classifierd_admission_return_margin_seconds",
		"classifierd_admission_callers", "classifierd_sessions_active"} {
		if _, ok := m[s]; !ok {
			t.Errorf("%s missing", s)
		}
	}
	// Every series the Grafana dashboard plots exists. Labelled counters
	// appear once first counted; this run counts no rejection or denial.
	dash, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "grafana", "classifierd.json"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{"classifierd_admission_rejected_total": true, "classifierd_auth_denied_total": true, "classifierd_abstained_total": true}
	for series := range m {
		name, _, _ := strings.Cut(series, "{")
		names[name] = true
	}
	used := regexp.MustCompile(`(?:classifierd|process)_[a-z_]+`).FindAllString(string(dash), -1)
	if len(used) < 10 {
		t.Fatalf("dashboard names %d series, want the metrics it plots", len(used))
	}
	for _, u := range used {
		if !names[u] {
			t.Errorf("dashboard plots %s, which /metrics does not export", u)
		}
	}
}

// certs is a test PKI: a CA, a server certificate for 127.0.0.1, and
// client certificates.
type certs struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	c := &certs{dir: t.TempDir(), serial: 1}
	c.ca, c.caKey = c.issue(t, "test CA", nil, nil, true)
	c.write(t, "ca.pem", c.ca, nil)
	return c
}

func (c *certs) issue(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(c.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func (c *certs) write(t *testing.T, name string, cert *x509.Certificate, key *ecdsa.PrivateKey) string {
	t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if key != nil {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// leaf issues a certificate signed by the CA and writes it; it returns
// the tls.Certificate a client presents.
func (c *certs) leaf(t *testing.T, cn string) (string, tls.Certificate) {
	t.Helper()
	cert, key := c.issue(t, cn, c.ca, c.caKey, false)
	p := c.write(t, cn+".pem", cert, key)
	pair, err := tls.LoadX509KeyPair(p, p+".key")
	if err != nil {
		t.Fatal(err)
	}
	return p, pair
}

func (c *certs) dial(client *tls.Certificate) []grpc.DialOption {
	pool := x509.NewCertPool()
	pool.AddCert(c.ca)
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client != nil {
		conf.Certificates = []tls.Certificate{*client}
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(conf))}
}

func bearerCtx(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

const (
	aliceToken  = "alice-0123456789abcdef"
	bobToken    = "bob-0123456789abcdef00"
	routerToken = "router-0123456789abcdef"
	carolToken  = "carol-0123456789abcdef"
)

func TestOpsTLSTokensAndSessionOwners(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	pki := newCerts(t)
	serverCert, _ := pki.leaf(t, "classifierd")
	_, hubCert := pki.leaf(t, "hub")
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeTokens := func(extra string) {
		content := "# name scopes token\nalice route,sessions " + aliceToken + "\nbob route,sessions " + bobToken +
			"\nrouter route " + routerToken + "\n" + extra
		if err := os.WriteFile(tokens, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("")
	addr, httpAddr, mcpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	d, conn := opsDaemon(t, addr, pki.dial(&hubCert), "--index", idx,
		"--tls-cert", serverCert, "--tls-key", serverCert+".key", "--tls-client-ca", filepath.Join(pki.dir, "ca.pem"),
		"--auth-token-file", tokens, "--max-sessions-per-client", "2", "--http-listen", httpAddr, "--mcp-listen", mcpAddr)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice, bob, router := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken), bearerCtx(ctx, routerToken)

	t.Run("transport", func(t *testing.T) {
		try := func(dial []grpc.DialOption) error {
			cc, err := grpc.NewClient(addr, dial...)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			cctx, ccancel := context.WithTimeout(alice, 5*time.Second)
			defer ccancel()
			_, err = pb.NewClassifierServiceClient(cc).GetIndexInfo(cctx, &pb.GetIndexInfoRequest{})
			return err
		}
		wantCode(t, "plaintext client", try(insecureDial), codes.Unavailable)
		wantCode(t, "TLS without a client certificate", try(pki.dial(nil)), codes.Unavailable)
		other := newCerts(t)
		_, stranger := other.leaf(t, "stranger")
		// Trusts our CA but presents a certificate of another one.
		dial := pki.dial(&stranger)
		wantCode(t, "client certificate of another CA", try(dial), codes.Unavailable)
		if err := try(pki.dial(&hubCert)); err != nil {
			t.Fatalf("mTLS client with a token: %v", err)
		}
	})
	t.Run("tokens and scopes", func(t *testing.T) {
		_, err := c.Route(ctx, &pb.RouteRequest{Query: "check github"})
		wantCode(t, "no token", err, codes.Unauthenticated)
		_, err = c.Route(bearerCtx(ctx, "alice-0123456789abcdeX"), &pb.RouteRequest{Query: "check github"})
		wantCode(t, "wrong token", err, codes.Unauthenticated)
		if _, err := c.Route(router, &pb.RouteRequest{Query: "check github"}); err != nil {
			t.Fatalf("route scope: %v", err)
		}
		_, err = c.CreateSession(router, &pb.CreateSessionRequest{})
		wantCode(t, "CreateSession with route scope only", err, codes.PermissionDenied)
		_, err = c.GetStats(alice, &pb.GetStatsRequest{})
		wantCode(t, "GetStats without admin", err, codes.PermissionDenied)
		_, err = c.AnalyzePrompt(router, &pb.AnalyzePromptRequest{Prompt: "check github", SessionId: "x"})
		wantCode(t, "AnalyzePrompt on a session with route scope only", err, codes.PermissionDenied)
		// Health answers probes without a token.
		hr, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health without token: %v %v", hr, err)
		}
	})
	t.Run("HTTP/JSON and MCP over mTLS need a token too", func(t *testing.T) {
		// As on gRPC: with a token file the token is the caller, and a
		// client certificate only opens the connection.
		waitFor(t, d, "classifierd serving HTTP/JSON")
		hub := pki.httpsClient(&hubCert)
		route := "https://" + httpAddr + "/classifier.v1.ClassifierService/Route"
		for _, tc := range []struct {
			name   string
			header http.Header
			want   int
		}{
			{"certificate only", nil, http.StatusUnauthorized},
			{"certificate and identity header", spoofed, http.StatusUnauthorized},
			{"certificate and token", http.Header{"Authorization": {"Bearer " + routerToken}}, http.StatusOK},
		} {
			if code, _, out, err := postJSON(t, hub, route, `{"query":"check github"}`, tc.header); err != nil || code != tc.want {
				t.Errorf("HTTP/JSON, %s: %d %v %v, want %d", tc.name, code, out, err, tc.want)
			}
		}
		endpoint := "https://" + mcpAddr + listeners.MCPPath
		query := map[string]any{"query": "check github", "k": 1}
		for _, tc := range []struct {
			name   string
			header http.Header
			want   string // "" for success
		}{
			{"certificate only", nil, "UNAUTHENTICATED"},
			{"certificate and identity header", spoofed, "UNAUTHENTICATED"},
			{"certificate and token", http.Header{"Authorization": {"Bearer " + routerToken}}, ""},
		} {
			// Without a token the session does not open (the listener
			// checks every request before the SDK reads it).
			cs, err := mcpConnect(t, endpoint, &http.Client{Transport: withHeader{hub.Transport, tc.header}})
			if err == nil {
				err = mcpCallErr(cs, "search_tools", query)
			}
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("MCP, %s: %v, want %q", tc.name, err, tc.want)
			}
		}
	})
	t.Run("sessions belong to their creator", func(t *testing.T) {
		s, err := c.CreateSession(alice, &pb.CreateSessionRequest{SessionId: "alice-1"})
		if err != nil {
			t.Fatal(err)
		}
		id := s.GetSession().GetId()
		// Session ids are per caller: to bob, alice's id names no
		// session, exactly as an id no one uses.
		if _, err := c.GetSession(alice, &pb.GetSessionRequest{SessionId: id}); err != nil {
			t.Fatalf("owner GetSession: %v", err)
		}
		_, err = c.GetSession(bob, &pb.GetSessionRequest{SessionId: id})
		wantCode(t, "GetSession by another", err, codes.NotFound)
		_, err = c.UpdateExposure(bob, &pb.UpdateExposureRequest{SessionId: id, Categories: []string{"github"}})
		wantCode(t, "UpdateExposure by another", err, codes.NotFound)
		_, err = c.ListTools(bob, &pb.ListToolsRequest{SessionId: id})
		wantCode(t, "ListTools by another", err, codes.NotFound)
		_, err = c.DeleteSession(bob, &pb.DeleteSessionRequest{SessionId: id})
		wantCode(t, "DeleteSession by another", err, codes.NotFound)
		_, err = c.AnalyzePrompt(bob, &pb.AnalyzePromptRequest{Prompt: "check github", SessionId: id})
		wantCode(t, "AnalyzePrompt on another's session", err, codes.NotFound)
		w, err := c.WatchExposure(bob, &pb.WatchExposureRequest{SessionId: id})
		if err == nil {
			_, err = w.Recv()
		}
		wantCode(t, "WatchExposure by another", err, codes.NotFound)
		if _, err := c.GetSession(alice, &pb.GetSessionRequest{SessionId: id}); err != nil {
			t.Fatalf("owner's session changed by others' attempts: %v", err)
		}
		// CreateSession cannot probe ids either: bob's "alice-1" is a
		// session of his own, and ALREADY_EXISTS is only ever the
		// caller's own session.
		if bs, err := c.CreateSession(bob, &pb.CreateSessionRequest{SessionId: id, DefaultExposure: "all"}); err != nil || bs.GetSession().GetId() != id {
			t.Fatalf("bob's CreateSession with alice's id: %v %v, want a session of his own with that id", bs, err)
		}
		_, err = c.CreateSession(alice, &pb.CreateSessionRequest{SessionId: id})
		wantCode(t, "alice's CreateSession with her own id", err, codes.AlreadyExists)
		if as, err := c.GetSession(alice, &pb.GetSessionRequest{SessionId: id}); err != nil || slices.Contains(as.GetSession().GetExposedCategories(), "github") {
			t.Fatalf("alice's session after bob made his: %v %v, want hers unchanged (meta-only)", as, err)
		}
	})
	t.Run("per-client session quota", func(t *testing.T) {
		if _, err := c.CreateSession(alice, &pb.CreateSessionRequest{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.CreateSession(alice, &pb.CreateSessionRequest{})
		wantCode(t, "third session of alice (quota 2)", err, codes.ResourceExhausted)
		if _, err := c.CreateSession(bob, &pb.CreateSessionRequest{}); err != nil {
			t.Fatalf("bob is not limited by alice's sessions: %v", err)
		}
	})
	t.Run("SIGHUP reloads tokens", func(t *testing.T) {
		carol := bearerCtx(ctx, carolToken)
		_, err := c.Route(carol, &pb.RouteRequest{Query: "check github"})
		wantCode(t, "carol before reload", err, codes.Unauthenticated)
		writeTokens("carol route " + carolToken + "\n")
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := c.Route(carol, &pb.RouteRequest{Query: "check github"})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("carol after SIGHUP: %v\n%s", err, d.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		// A broken file on reload keeps the tokens in use.
		if err := os.WriteFile(tokens, []byte("garbage\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, d, "reload failed")
		if _, err := c.Route(carol, &pb.RouteRequest{Query: "check github"}); err != nil {
			t.Fatalf("tokens lost after a failed reload: %v", err)
		}
	})
	if strings.Contains(d.stderr.String(), aliceToken) || strings.Contains(d.stderr.String(), carolToken) {
		t.Fatalf("a token reached the log:\n%s", d.stderr.String())
	}
}

// waitFor waits until the daemon's log contains s.
func waitFor(t *testing.T, d *daemon, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("log has no %q after 10s:\n%s", s, d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOpsUnixSocket(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	dir, err := os.MkdirTemp("", "cd-sock-") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "classifierd.sock")
	_, conn := opsDaemon(t, "unix://"+sock, insecureDial, "--index", idx, "--max-sessions-per-client", "1")
	st, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", st.Mode())
	}
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "check my github notifications"}); err != nil {
		t.Fatal(err)
	}
	// Anonymous callers share one identity (any may use any session, as
	// before authentication existed) but the quota still applies per peer.
	s, err := c.CreateSession(ctx, &pb.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSession(ctx, &pb.CreateSessionRequest{})
	wantCode(t, "second session of the same peer (quota 1)", err, codes.ResourceExhausted)
	if _, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: s.GetSession().GetId()}); err != nil {
		t.Fatal(err)
	}
}

func TestOpsOverloadAnswersAtOnce(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	maddr := freeAddr(t)
	_, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--metrics-listen", maddr,
		"--concurrency", "1", "--max-inflight", "1", "--max-waiting", "2")
	c := pb.NewClassifierServiceClient(conn)
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	long := strings.Repeat("please check the open pull requests of my github repositories and list them ", 40)

	const clients = 48
	var mu sync.Mutex
	var rejected []time.Duration
	var ok, other int
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var healthOK, healthCalls int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
			r, err := hc.Check(hctx, &healthpb.HealthCheckRequest{})
			hcancel()
			mu.Lock()
			healthCalls++
			if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				healthOK++
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	var calls sync.WaitGroup
	for range clients {
		calls.Go(func() {
			start := time.Now()
			_, err := c.Route(ctx, &pb.RouteRequest{Query: long})
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			switch status.Code(err) {
			case codes.OK:
				ok++
			case codes.ResourceExhausted:
				rejected = append(rejected, took)
			default:
				other++
				t.Errorf("Route under load: %v", err)
			}
		})
	}
	calls.Wait()
	close(stop)
	wg.Wait()
	if len(rejected) == 0 || ok == 0 {
		t.Fatalf("%d answered, %d rejected: want both under %d concurrent calls with 1 in flight and 2 queued", ok, len(rejected), clients)
	}
	if healthCalls == 0 || healthOK != healthCalls {
		t.Fatalf("health answered SERVING %d of %d checks under saturation", healthOK, healthCalls)
	}
	slices.Sort(rejected)
	t.Logf("%d clients: %d answered, %d RESOURCE_EXHAUSTED (client-side time p50 %v, max %v); health %d/%d SERVING",
		clients, ok, len(rejected), rejected[len(rejected)/2], rejected[len(rejected)-1], healthOK, healthCalls)
	m := scrape(t, maddr)
	if got := m[`classifierd_admission_rejected_total{method="/classifier.v1.ClassifierService/Route"}`]; int(got) != len(rejected) {
		t.Errorf("classifierd_admission_rejected_total = %v, want %d", got, len(rejected))
	}
	// A call whose deadline has nearly passed is refused before any work.
	dctx, dcancel := context.WithTimeout(ctx, time.Millisecond)
	defer dcancel()
	_, err := c.Route(dctx, &pb.RouteRequest{Query: long})
	wantCode(t, "Route with 1ms deadline", err, codes.DeadlineExceeded)
}

func TestOpsShutdownEndsStreams(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	d, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--shutdown-wait", "30s")
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hw, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := hw.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch first message: %v %v", r, err)
	}
	s, err := c.CreateSession(ctx, &pb.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ew, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: s.GetSession().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	// The watch is registered some time after the call returns: change
	// the exposure until the watch sees a change.
	if _, err := testgrpc.FirstChange(ctx, c, s.GetSession().GetId(), ew, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = ew.Recv()
	}
	wantCode(t, "WatchExposure at shutdown", err, codes.Unavailable)
	var last healthpb.HealthCheckResponse_ServingStatus
	for {
		r, err := hw.Recv()
		if err != nil {
			wantCode(t, "health Watch at shutdown", err, codes.Unavailable)
			break
		}
		last = r.GetStatus()
	}
	if last != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health watch's last status %v, want NOT_SERVING", last)
	}
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("daemon exit: %v\n%s", err, d.stderr.String())
		}
	case <-time.After(25 * time.Second):
		t.Fatalf("daemon still running 25s after SIGTERM\n%s", d.stderr.String())
	}
	if strings.Contains(d.stderr.String(), "graceful stop timed out") {
		t.Fatalf("open streams held graceful stop until its deadline:\n%s", d.stderr.String())
	}
	t.Logf("stopped %v after SIGTERM with a health watch and an exposure watch open", time.Since(start).Round(time.Millisecond))
}

func TestOpsRefusesUnboundedFiles(t *testing.T) {
	bin, _ := binaries(t)
	idx := genIndex(t, "testdata/mini.json")
	st, err := os.Stat(idx)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"device", []string{"--index", "/dev/zero"}, "not a regular file"},
		{"too large", []string{"--index", idx, "--max-index-bytes", strconv.FormatInt(st.Size()-1, 10)}, "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(), "--listen", freeAddr(t)}, tc.args...)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("classifierd still reading after 30s")
			}
			if err == nil || !strings.Contains(lastLine(string(out)), tc.want) {
				t.Fatalf("err %v, last line %q: want a failure saying %q", err, lastLine(string(out)), tc.want)
			}
		})
	}
}

func TestOpsTerminalLogsNoSymlinkNoFIFO(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	state := t.TempDir()
	logs := filepath.Join(state, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(state, "elsewhere.txt")
	if err := os.WriteFile(secret, []byte("[sudo] password for alice: "), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(logs, "link.log")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(logs, "fifo.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logs, "plain.log"), []byte("[sudo] password for alice: "), 0o600); err != nil {
		t.Fatal(err)
	}
	_, conn := opsDaemon(t, freeAddr(t), insecureDial, "--index", idx, "--terminal", "--terminal-logs", logs,
		"--terminal-db", filepath.Join(state, "t.db"))
	c := terminalpb.NewTerminalServiceClient(conn)
	for _, id := range []string{"link", "fifo"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{SessionId: id})
		cancel()
		wantCode(t, id+".log", err, codes.NotFound)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{SessionId: "plain"})
	if err != nil || !r.GetDetected() {
		t.Fatalf("plain log: %v %v", r, err)
	}
}

// TestTerminalHistoryBelongsToItsIdentity checks, through the real daemon
// with a token file, that a terminal session id is no shared key: bob,
// naming alice's session id, neither reads her history nor is suggested
// what she taught, nor deletes it; alice sees her events under the id she
// used.
func TestTerminalHistoryBelongsToItsIdentity(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice terminal "+aliceToken+"\nbob terminal "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, conn := startDaemon(t, idx, "--terminal", "--auth-token-file", tokens)
	c := terminalpb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, bob := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken)
	const prompt = "Overwrite existing backup? (y/n)"
	for i := 0; i < 5; i++ {
		if _, err := c.TrackInputEvent(alice, &terminalpb.TrackInputEventRequest{SessionId: "shared-name", PromptText: prompt,
			InputText: "n", Success: true, InputSource: "user_typed", PromptType: "yes_no"}); err != nil {
			t.Fatal(err)
		}
	}
	learnedBy := func(ctx context.Context) bool {
		r, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: prompt, PromptType: "yes_no", SessionId: "shared-name"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.GetSuggestions() {
			if s.GetSource() == "pattern_learning" {
				return true
			}
		}
		return false
	}
	if !learnedBy(alice) {
		t.Fatal("alice is not suggested what she taught")
	}
	if learnedBy(bob) {
		t.Error("bob is suggested what alice taught under the same session id")
	}
	if h, err := c.GetSessionHistory(bob, &terminalpb.GetSessionHistoryRequest{SessionId: "shared-name"}); err != nil || len(h.GetEvents()) != 0 {
		t.Errorf("bob reads alice's history: %d events, %v", len(h.GetEvents()), err)
	}
	if d, err := c.DeleteSessionHistory(bob, &terminalpb.DeleteSessionHistoryRequest{SessionId: "shared-name"}); err != nil || d.GetDeletedEvents() != 0 {
		t.Errorf("bob deletes alice's history: %v, %v", d, err)
	}
	h, err := c.GetSessionHistory(alice, &terminalpb.GetSessionHistoryRequest{SessionId: "shared-name"})
	if err != nil || len(h.GetEvents()) != 5 || h.GetEvents()[0].GetSessionId() != "shared-name" {
		t.Fatalf("alice's history: %v, %v; want her 5 events under the id she used", h, err)
	}
}

// TestHostileTerminalLogsBelongToTheirIdentity is the fifth hostile pass's
// finding through the real daemon with a token file: DetectInputPrompt by
// session id read <--terminal-logs>/<id>.log whoever asked, so bob, naming
// the id of alice's session, was answered the line her terminal was on,
// with what she was typing ("mysql -uroot -pHunter2...") and whether the
// session existed. With tokens each identity's logs are now in its own
// directory, <--terminal-logs>/<identity>/<id>.log: alice reads hers, bob
// is NOT_FOUND for the same id whether a file of that name is in alice's
// directory or directly in --terminal-logs.
func TestHostileTerminalLogsBelongToTheirIdentity(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice terminal "+aliceToken+"\nbob terminal "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	const typed = "alice@host:~$ mysql -uroot -pHunter2Zq"
	for _, f := range []string{filepath.Join(logs, "alice", "term-1.log"), filepath.Join(logs, "term-1.log")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("alice@host:~$ ls\nnotes.txt\n"+typed), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, conn := startDaemon(t, idx, "--terminal", "--terminal-logs", logs, "--auth-token-file", tokens)
	c := terminalpb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, bob := bearerCtx(ctx, aliceToken), bearerCtx(ctx, bobToken)
	yes := true
	r, err := c.DetectInputPrompt(alice, &terminalpb.DetectInputPromptRequest{SessionId: "term-1", ReadingInput: &yes})
	if err != nil || r.GetPrompt().GetPromptText() != typed {
		t.Fatalf("alice's own log: %v, %v; want the line %q", r, err, typed)
	}
	for _, id := range []string{"term-1", "nobody-1"} {
		r, err := c.DetectInputPrompt(bob, &terminalpb.DetectInputPromptRequest{SessionId: id, ReadingInput: &yes})
		if status.Code(err) != codes.NotFound {
			t.Errorf("bob's DetectInputPrompt of session %s: %v, %v; want NOT_FOUND", id, r, err)
		}
	}
}

// TestHostileMetricsIdleConnectionsClose is the fifth hostile pass's
// finding: --metrics-listen had no idle timeout, so a keep-alive
// connection that made one scrape (no token needed) was held for ever,
// and 1,024 of them held a peer's whole --max-conns-per-peer on every
// listener at no further cost (on loopback every local client is that
// peer). With --idle-timeout 1s the daemon closes it.
func TestHostileMetricsIdleConnectionsClose(t *testing.T) {
	metricsAddr := freeAddr(t)
	startDaemon(t, genIndex(t, "testdata/mini.json"), "--metrics-listen", metricsAddr, "--idle-timeout", "1s")
	c, err := net.Dial("tcp", metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("scrape: %s, close %v, %v; want 200 on a kept-alive connection", resp.Status, resp.Close, err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(20 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle metrics connection after %v: %v; want it closed by the daemon (EOF)", time.Since(start).Round(time.Millisecond), err)
	}
}

// TestGRPCIdleConnectionsClose: a gRPC connection with no call in flight
// for --idle-timeout is closed by the daemon (its client goes idle and
// reconnects when it next calls).
func TestGRPCIdleConnectionsClose(t *testing.T) {
	d, _ := startDaemon(t, genIndex(t, "testdata/mini.json"), "--idle-timeout", "1s")
	cc, err := grpc.NewClient(d.addr, insecureDial...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := pb.NewClassifierServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if s := cc.GetState(); s != connectivity.Ready {
		t.Fatalf("state after a call: %v, want READY", s)
	}
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	if !cc.WaitForStateChange(wait, connectivity.Ready) {
		t.Fatalf("the connection is still %v 10s after its last call, want it closed after --idle-timeout 1s", cc.GetState())
	}
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); err != nil {
		t.Fatalf("a call after the idle close: %v, want the client to reconnect", err)
	}
	// A connection in use is not idle: a watch outlives the timeout.
	if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "w"}); err != nil {
		t.Fatal(err)
	}
	w, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Header(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "w", Categories: []string{"github"}}); err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Recv(); err != nil || !slices.Contains(ev.GetChange().GetAdded(), "github") {
		t.Fatalf("a watch across --idle-timeout: %v %v, want the change", ev, err)
	}
}
