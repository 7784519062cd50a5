package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/listeners"
)

// startHTTPDaemon runs the daemon with --http-listen on the default
// catalog and returns the base URL of its HTTP listener.
func startHTTPDaemon(t *testing.T) (string, *daemon) {
	t.Helper()
	addr := freeAddr(t)
	d, _ := startDaemon(t, genIndex(t, defaultCatalog(t)), "--http-listen", addr)
	return "http://" + addr, d
}

// do sends one HTTP request and decodes a JSON object answer.
func do(t *testing.T, method, u, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d, body not a JSON object: %v\n%s", method, u, resp.StatusCode, err, b)
	}
	return resp.StatusCode, out
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func wantKeys(t *testing.T, what string, m any, want ...string) map[string]any {
	t.Helper()
	obj, ok := m.(map[string]any)
	if !ok {
		t.Fatalf("%s = %T %v, want an object", what, m, m)
	}
	slices.Sort(want)
	if got := keys(obj); !slices.Equal(got, want) {
		t.Fatalf("%s keys = %v, want %v", what, got, want)
	}
	return obj
}

func TestHTTPConnectJSON(t *testing.T) {
	base, _ := startHTTPDaemon(t)
	routeURL := base + "/classifier.v1.ClassifierService/Route"

	t.Run("curl-style Route", func(t *testing.T) {
		code, out := do(t, "POST", routeURL, "application/json", `{"query":"Check my GitHub notifications","maxTools":3}`)
		if code != 200 {
			t.Fatalf("status %d: %v", code, out)
		}
		servers, _ := out["servers"].([]any)
		if len(servers) == 0 || servers[0].(map[string]any)["id"] != "github" {
			t.Fatalf("servers = %v, want github first", out["servers"])
		}
		cat := out["categories"].([]any)[0].(map[string]any)
		parts := wantKeys(t, "evidenceParts", cat["evidenceParts"], "dense", "nearest", "lexical", "pattern", "via", "learned")
		if cat["id"] != "github" || parts["lexical"] != `keyword "github"` || parts["dense"].(float64) <= 0 {
			t.Fatalf("top category %v, want github with its keyword and a dense match", cat)
		}
		tools, _ := out["tools"].([]any)
		if len(tools) == 0 || len(tools) > 3 {
			t.Fatalf("%d tools, want 1..3 (maxTools)", len(tools))
		}
		stats := wantKeys(t, "stats", out["stats"], "totalTools", "selectedTools", "reductionPercent", "originalCount",
			"returnedCount", "tokensTotal", "tokensReturned")
		if stats["totalTools"].(float64) <= stats["selectedTools"].(float64) {
			t.Fatalf("stats = %v, want fewer tools selected than in the catalog", stats)
		}
	})

	t.Run("Connect protocol header", func(t *testing.T) {
		req, _ := http.NewRequest("POST", routeURL, strings.NewReader(`{"query":`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Protocol-Version", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct{ Code, Message string }
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 400 || e.Code != "invalid_argument" {
			t.Fatalf("bad JSON over Connect = %d %+v, want 400 invalid_argument", resp.StatusCode, e)
		}
	})

	for _, tc := range []struct{ name, method, path, ct, body string }{
		{"truncated JSON", "POST", "/classifier.v1.ClassifierService/Route", "application/json", `{"query":`},
		{"wrong type", "POST", "/classifier.v1.ClassifierService/Route", "application/json", `{"query":5}`},
		{"array body", "POST", "/classifier.v1.ClassifierService/Classify", "application/json", `[]`},
		{"empty query", "POST", "/classifier.v1.ClassifierService/Route", "application/json", `{}`},
		{"unknown policy", "POST", "/classifier.v1.ClassifierService/Route", "application/json", `{"query":"x","onNoMatch":99}`},
		{"text too long", "POST", "/classifier.v1.ClassifierService/Classify", "application/json", `{"text":"` + strings.Repeat("a ", 150<<10) + `"}`},
		{"query not UTF-8", "GET", "/tools?context=%ff%fe", "", ""},
		{"body not UTF-8", "POST", "/classifier.v1.ClassifierService/Route", "application/json", "\xff\xfe"},
		{"string not UTF-8", "POST", "/classifier.v1.ClassifierService/Route", "application/json", "{\"query\":\"\xff\"}"},
		{"unknown category", "GET", "/tools?category=no-such-category", "", ""},
		{"query param without a name", "GET", "/tools?=x&context=github", "", ""},
		{"bad percent-encoding", "GET", "/tools?context=%zz", "", ""},
	} {
		t.Run("400 "+tc.name, func(t *testing.T) {
			code, out := do(t, tc.method, base+tc.path, tc.ct, tc.body)
			if code != 400 || out["code"] != float64(3) {
				t.Fatalf("status %d %v, want 400 with code 3 (INVALID_ARGUMENT)", code, out)
			}
		})
	}

	t.Run("400 does not echo a huge value", func(t *testing.T) {
		// The tenth hostile pass: a 3 MB number came back whole in the
		// message of its 400.
		body := `{"query":"x","maxTools":` + strings.Repeat("9", 1<<20) + `}`
		code, out := do(t, "POST", base+"/classifier.v1.ClassifierService/Route", "application/json", body)
		msg, _ := out["message"].(string)
		if code != 400 || out["code"] != float64(3) || len(msg) > 600 || !strings.HasPrefix(msg, "request body: ") {
			t.Fatalf("status %d, code %v, message of %d bytes (%.80q), want 400 with code 3 and a short message", code, out["code"], len(msg), msg)
		}
	})

	t.Run("body past --max-recv-bytes is 413", func(t *testing.T) {
		body := `{"texts":["` + strings.Repeat("a ", 5<<19) + `"]}` // 5 MiB, limit 4 MiB
		code, out := do(t, "POST", base+"/classifier.v1.ClassifierService/Embed", "application/json", body)
		if code != 413 || out["code"] != float64(8) {
			t.Fatalf("status %d %v, want 413 with code 8 (RESOURCE_EXHAUSTED)", code, out)
		}
	})

	t.Run("bodiless POST is the empty message", func(t *testing.T) {
		code, out := do(t, "POST", base+"/classifier.v1.ClassifierService/GetIndexInfo", "application/json", "")
		if code != 200 || out["categories"] != float64(17) {
			t.Fatalf("GetIndexInfo = %d %v, want 200 with 17 categories", code, out)
		}
		cals, _ := out["calibration"].([]any)
		for _, c := range cals {
			c := c.(map[string]any)
			if bins, _ := c["reliability"].([]any); len(bins) == 0 {
				t.Errorf("calibration %v has no reliability bins", c["target"])
			}
		}
	})
}

func TestHTTPHubRESTShape(t *testing.T) {
	base, _ := startHTTPDaemon(t)
	code, _ := do(t, "POST", base+"/tools/metrics/reset", "application/json", "")
	if code != 200 {
		t.Fatalf("reset = %d, want 200", code)
	}

	ctxText := "check my github pull requests and notifications"
	code, out := do(t, "GET", base+"/tools?"+url.Values{"context": {ctxText}, "userId": {"u1"}}.Encode(), "", "")
	if code != 200 {
		t.Fatalf("GET /tools = %d %v", code, out)
	}
	wantKeys(t, "/tools", out, "tools", "metadata", "reason")
	meta := wantKeys(t, "metadata", out["metadata"], "timestamp", "requestId", "filtered", "originalCount",
		"returnedCount", "reductionPercent", "appliedContext")
	tools := out["tools"].([]any)
	if meta["filtered"] != true || !slices.Contains(toStrings(meta["appliedContext"]), "github") || len(tools) == 0 {
		t.Fatalf("metadata = %v with %d tools, want filtered to github", meta, len(tools))
	}
	if meta["returnedCount"] != float64(len(tools)) || meta["originalCount"].(float64) <= float64(len(tools)) {
		t.Fatalf("metadata = %v with %d tools", meta, len(tools))
	}
	tool := wantKeys(t, "tool", tools[0], "name", "description", "inputSchema", "contexts", "categories", "server")
	if _, ok := tool["inputSchema"].(map[string]any); !ok {
		t.Fatalf("inputSchema = %T, want a JSON object", tool["inputSchema"])
	}
	if _, err := time.Parse(time.RFC3339Nano, meta["timestamp"].(string)); err != nil {
		t.Fatalf("timestamp: %v", err)
	}

	code, out = do(t, "GET", base+"/tools?context=hello%20there", "", "")
	if code != 200 {
		t.Fatalf("GET /tools no context = %d %v", code, out)
	}
	if tools, ok := out["tools"].([]any); !ok || len(tools) != 0 || out["reason"] != "no_context_detected" ||
		out["metadata"].(map[string]any)["filtered"] != false {
		t.Fatalf("no context = %v, want tools [], filtered false, reason no_context_detected", out)
	}

	code, out = do(t, "GET", base+"/tools?category=github", "", "")
	if code != 200 || len(out["tools"].([]any)) == 0 {
		t.Fatalf("GET /tools?category=github = %d %v", code, out)
	}

	code, out = do(t, "GET", base+"/tools/metrics", "", "")
	if code != 200 {
		t.Fatalf("GET /tools/metrics = %d %v", code, out)
	}
	wantKeys(t, "metrics", out, "baseline", "filtered", "reduction")
	bl := wantKeys(t, "baseline", out["baseline"], "requests", "totalTokens", "avgTokensPerRequest", "since")
	fl := wantKeys(t, "filtered", out["filtered"], "requests", "totalTokens", "avgTokensPerRequest", "since")
	if bl["requests"] != float64(2) || fl["requests"] != float64(2) {
		t.Fatalf("requests = %v / %v, want 2 (two filtered answers since the reset)", bl["requests"], fl["requests"])
	}
	if fl["totalTokens"].(float64) >= bl["totalTokens"].(float64) || !strings.HasSuffix(out["reduction"].(string), "%") {
		t.Fatalf("metrics = %v, want fewer filtered tokens and a reduction like \"40%%\"", out)
	}

	code, _ = do(t, "POST", base+"/tools/metrics/reset", "application/json", "")
	if code != 200 {
		t.Fatalf("reset = %d", code)
	}
	_, out = do(t, "GET", base+"/tools/metrics", "", "")
	if out["baseline"].(map[string]any)["requests"] != float64(0) || out["reduction"] != "0%" {
		t.Fatalf("after reset = %v, want zero counters", out)
	}
}

func TestHTTPServesExplainPage(t *testing.T) {
	base, d := startHTTPDaemon(t)
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/", "<title>classifierd", 200},
		{"/explain.js", "ClassifierService", 200},
		{"/nope.html", "", 404},
	} {
		resp, err := http.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !bytes.Contains(b, []byte(tc.want)) {
			t.Fatalf("GET %s = %d, want %d containing %q", tc.path, resp.StatusCode, tc.code, tc.want)
		}
	}
	// SIGTERM stops the HTTP listener with the gRPC one, within the one
	// --shutdown-wait budget.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		d.done <- err // for cleanup
		if err != nil || !strings.Contains(d.stderr.String(), "stopped") {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, d.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop within 20s of SIGTERM")
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Fatal("HTTP still answers after the daemon stopped")
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestServerErrorLogQuietsHandshakeFailures speaks plain HTTP to a real
// TLS listener: the failed handshake is logged at debug level, anything
// else net/http reports at warning level.
func TestServerErrorLogQuietsHandshakeFailures(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = listeners.ErrorLog(log)
	srv.StartTLS()
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n")
	_, _ = io.ReadAll(conn) // the server answers 400 and closes
	conn.Close()
	srv.Config.ErrorLog.Print("http: something else went wrong")
	var levels = map[string]string{}
	for deadline := time.Now().Add(5 * time.Second); len(levels) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var rec struct{ Level, Msg string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
				levels[strings.Fields(rec.Msg)[1]] = rec.Level
			}
		}
	}
	if got := levels["TLS"]; got != "DEBUG" {
		t.Errorf("handshake failure logged at %q, want DEBUG (log: %s)", got, buf.String())
	}
	if got := levels["something"]; got != "WARN" {
		t.Errorf("other server error logged at %q, want WARN (log: %s)", got, buf.String())
	}
}
