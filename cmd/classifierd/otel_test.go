package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/listeners"
	"github.com/classifierd/classifierd/internal/telemetry"
)

// collector is a real OTLP/gRPC trace receiver on a loopback socket: what
// the daemon's exporter talks to, as it would to an OpenTelemetry
// Collector, Jaeger or Tempo.
type collector struct {
	collectorpb.UnimplementedTraceServiceServer
	addr string
	mu   sync.Mutex
	raw  [][]byte // every export request as received on the wire
	got  []*tracepb.Span
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: lis.Addr().String()}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, c)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return c
}

func (c *collector) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, b)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.got = append(c.got, ss.GetSpans()...)
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// wait returns the spans received once ok holds for them, or fails after
// 30 s.
func (c *collector) wait(t *testing.T, what string, ok func([]*tracepb.Span) bool) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		spans := slices.Clone(c.got)
		c.mu.Unlock()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector: %s not received after 30s; got %d spans: %v", what, len(spans), spanNames(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return out
}

func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// children are the spans whose parent is p.
func children(spans []*tracepb.Span, p *tracepb.Span) map[string][]*tracepb.Span {
	out := map[string][]*tracepb.Span{}
	for _, s := range spans {
		if bytes.Equal(s.GetParentSpanId(), p.GetSpanId()) && bytes.Equal(s.GetTraceId(), p.GetTraceId()) {
			out[s.GetName()] = append(out[s.GetName()], s)
		}
	}
	return out
}

// serverSpan finds the span named name of trace traceID.
func serverSpan(spans []*tracepb.Span, name string, traceID []byte) *tracepb.Span {
	for _, s := range spans {
		if s.GetName() == name && bytes.Equal(s.GetTraceId(), traceID) {
			return s
		}
	}
	return nil
}

// traceparent is a W3C traceparent for a new sampled trace, as a hub's
// own tracing would send.
func traceparent(n byte) (header string, traceID, spanID []byte) {
	traceID = bytes.Repeat([]byte{0xa0 + n}, 16)
	spanID = bytes.Repeat([]byte{0xb0 + n}, 8)
	return fmt.Sprintf("00-%s-%s-01", hex.EncodeToString(traceID), hex.EncodeToString(spanID)), traceID, spanID
}

// The secret of the prompts: it must reach no span, attribute or event.
const (
	otelSecret = "sk-live-4f9c2e7a1b3d5f6e8a0c"
	// otelPrompt is a routable request carrying the secret, with a second
	// need so the request is split into parts (two embed calls).
	otelPrompt = "Check my GitHub notifications with token " + otelSecret + " and then read config.json from my home directory"
)

// TestTracingExportsSpans runs the daemon with --otel-endpoint at a real
// OTLP receiver and checks the spans of gRPC, HTTP/JSON and MCP calls:
// the server span continues the caller's trace, embed/score/calibrate are
// its children with sizes and outcomes, and the prompt's secret is in no
// exported byte.
func TestTracingExportsSpans(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50 ms, not 5 s (the SDK reads it)
	col := startCollector(t)
	idx := genIndex(t, "testdata/mini.json")
	httpAddr, mcpAddr := freeAddr(t), freeAddr(t)
	d, conn := startDaemon(t, idx, "--otel-endpoint", col.addr, "--otel-insecure", "--otel-service-name", "classifierd-test",
		"--http-listen", httpAddr, "--mcp-listen", mcpAddr)
	c := pb.NewClassifierServiceClient(conn)

	// gRPC: Route, Classify and AnalyzePrompt, each in a trace of its own.
	calls := []struct {
		method string
		call   func(ctx context.Context) error
	}{
		{"Route", func(ctx context.Context) error {
			r, err := c.Route(ctx, &pb.RouteRequest{Query: otelPrompt})
			if err == nil && (len(r.GetServers()) == 0 || r.GetServers()[0].GetId() != "github") {
				err = fmt.Errorf("servers %v, want github first", r.GetServers())
			}
			return err
		}},
		{"Classify", func(ctx context.Context) error {
			_, err := c.Classify(ctx, &pb.ClassifyRequest{Text: otelPrompt})
			return err
		}},
		{"AnalyzePrompt", func(ctx context.Context) error {
			_, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: otelPrompt, Context: "earlier: " + otelSecret})
			return err
		}},
	}
	for i, call := range calls {
		tp, traceID, spanID := traceparent(byte(i))
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "traceparent", tp), 30*time.Second)
		if err := call.call(ctx); err != nil {
			cancel()
			t.Fatalf("%s: %v", call.method, err)
		}
		cancel()
		name := "classifier.v1.ClassifierService/" + call.method
		spans := col.wait(t, name+" with embed, score and calibrate", func(spans []*tracepb.Span) bool {
			s := serverSpan(spans, name, traceID)
			if s == nil {
				return false
			}
			ch := children(spans, s)
			// AnalyzePrompt describes the servers for learning from use
			// from its own pass (Router.DescribeTurns): one score and one
			// calibrate span, as the others.
			return len(ch["embed"]) > 0 && len(ch["score"]) == 1 && len(ch["calibrate"]) == 1
		})
		s := serverSpan(spans, name, traceID)
		t.Run(call.method, func(t *testing.T) {
			if s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("server span kind %v, want SERVER", s.GetKind())
			}
			if !bytes.Equal(s.GetParentSpanId(), spanID) {
				t.Errorf("server span parent %x, want the client's span %x", s.GetParentSpanId(), spanID)
			}
			if v := attr(s, "classifierd.index.generation"); v.GetIntValue() != 1 {
				t.Errorf("classifierd.index.generation = %v, want 1", v)
			}
			if v := attr(s, "classifierd.request.text_bytes"); v.GetIntValue() < int64(len(otelPrompt)) {
				t.Errorf("classifierd.request.text_bytes = %v, want at least %d", v, len(otelPrompt))
			}
			if attr(s, "classifierd.abstained") == nil || attr(s, "classifierd.top_confidence") == nil {
				t.Errorf("server span lacks abstained/top_confidence: %v", s.GetAttributes())
			}
			if v := attr(s, "rpc.response.status_code"); v.GetStringValue() != "OK" {
				t.Errorf("rpc.response.status_code = %v, want OK", v)
			}
			ch := children(spans, s)
			tokens := int64(0)
			for _, e := range ch["embed"] {
				tokens += attr(e, "classifierd.embed.tokens").GetIntValue()
				if attr(e, "classifierd.embed.texts").GetIntValue() < 1 || attr(e, "classifierd.model").GetStringValue() == "" {
					t.Errorf("embed span attributes %v, want texts and model", e.GetAttributes())
				}
				if len(e.GetEvents()) == 0 || e.GetEvents()[0].GetName() != "model run" {
					t.Errorf("embed span events %v, want the model run with its queue wait", e.GetEvents())
				}
			}
			if tokens < 10 {
				t.Errorf("embed spans count %d tokens, want the prompt's (at least 10)", tokens)
			}
			if call.method == "Route" && len(ch["embed"]) != 2 {
				t.Errorf("Route of a two-need prompt: %d embed spans, want 2 (the request, its parts)", len(ch["embed"]))
			}
			if v := attr(ch["score"][0], "classifierd.index.vectors"); v.GetIntValue() < 1 {
				t.Errorf("score span classifierd.index.vectors = %v", v)
			}
			sc, ca := ch["score"][0], ch["calibrate"][0]
			if ca.GetStartTimeUnixNano() < sc.GetEndTimeUnixNano() {
				t.Errorf("calibrate starts before score ends")
			}
		})
	}

	// HTTP/JSON (vanguard over the same grpc.Server): traceparent header.
	tp, traceID, spanID := traceparent(7)
	req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/classifier.v1.ClassifierService/Route",
		strings.NewReader(`{"query": "`+otelPrompt+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", tp)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP Route: %d %s", resp.StatusCode, body)
	}
	spans := col.wait(t, "the HTTP/JSON Route's spans", func(spans []*tracepb.Span) bool {
		s := serverSpan(spans, "classifier.v1.ClassifierService/Route", traceID)
		return s != nil && len(children(spans, s)["calibrate"]) == 1
	})
	if s := serverSpan(spans, "classifier.v1.ClassifierService/Route", traceID); !bytes.Equal(s.GetParentSpanId(), spanID) {
		t.Errorf("HTTP Route span parent %x, want the traceparent's %x", s.GetParentSpanId(), spanID)
	}

	// MCP over streamable HTTP: a span per request, traceparent header.
	tp, traceID, _ = traceparent(8)
	hc := &http.Client{Transport: headerTransport{"traceparent": tp}}
	cs := mcpClient(t, &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + listeners.MCPPath, HTTPClient: hc}, nil)
	callToolResult(t, cs, "route", map[string]any{"query": otelPrompt})
	spans = col.wait(t, "the MCP route call's spans", func(spans []*tracepb.Span) bool {
		s := serverSpan(spans, "tools/call route", traceID)
		return s != nil && len(children(spans, s)["calibrate"]) == 1 && len(children(spans, s)["embed"]) > 0
	})
	if s := serverSpan(spans, "tools/call route", traceID); attr(s, "classifierd.abstained") == nil {
		t.Errorf("MCP route span lacks the answer's attributes: %v", s.GetAttributes())
	}

	for _, s := range spans {
		if strings.HasPrefix(s.GetName(), "grpc.health.v1.Health/") {
			t.Errorf("health check traced: %s", s.GetName())
		}
	}
	// Nothing of the prompt in any byte the collector got: names,
	// attributes, events, status messages, resource.
	col.mu.Lock()
	var services []string
	for _, b := range col.raw {
		for _, needle := range []string{otelSecret, "config.json", "notifications with token"} {
			if bytes.Contains(b, []byte(needle)) {
				t.Errorf("an exported request holds %q", needle)
			}
		}
		var req collectorpb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services = append(services, kv.GetValue().GetStringValue())
				}
			}
		}
	}
	col.mu.Unlock()
	if len(services) == 0 || slices.ContainsFunc(services, func(s string) bool { return s != "classifierd-test" }) {
		t.Errorf("service.name of the exports %v, want classifierd-test (--otel-service-name)", services)
	}
	if strings.Contains(d.stderr.String(), otelSecret) {
		t.Errorf("the daemon's log holds the secret")
	}
}

// headerTransport adds fixed headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestTracingCollectorDown: a collector that cannot be reached (a closed
// port) neither stops the daemon from starting nor fails or holds up its
// calls, and shutdown still ends, with exit status 0, within the shutdown
// wait and the flush bound.
func TestTracingCollectorDown(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export attempts all along the calls
	closed := freeAddr(t)                     // nothing listens there
	idx := genIndex(t, "testdata/mini.json")
	d, conn := startDaemon(t, idx, "--otel-endpoint", closed, "--otel-insecure", "--shutdown-wait", "2s")
	c := pb.NewClassifierServiceClient(conn)
	start := time.Now()
	const n = 50
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Route(ctx, &pb.RouteRequest{Query: fmt.Sprintf("Check my GitHub notifications %d", i)})
		cancel()
		if err != nil {
			t.Fatalf("call %d with the collector down: %v", i, err)
		}
	}
	t.Logf("%d Route calls with the collector down: %v (noisy: shared machine)", n, time.Since(start))
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit with the collector down: %v\n%s", err, d.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no exit 60 s after SIGTERM with the collector down\n%s", d.stderr.String())
	}
	t.Logf("exit %v after SIGTERM (shutdown wait 2s, flush bound %v)", time.Since(stopAt).Round(time.Millisecond), telemetry.FlushWait)
}

func TestOTelFlags(t *testing.T) {
	base := []string{"--model", "m", "--index", "x.idx"}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"--otel-endpoint", "127.0.0.1:4317"}, ""},
		{[]string{"--otel-endpoint", "collector.example:4317", "--otel-sample-ratio", "0.1"}, ""},
		{[]string{"--otel-sample-ratio", "1.5"}, "--otel-sample-ratio"},
		{[]string{"--otel-endpoint", "127.0.0.1:4317", "--otel-sample-ratio", "-0.1"}, "--otel-sample-ratio"},
		{[]string{"--otel-endpoint", "127.0.0.1:4317", "--otel-sample-ratio", "NaN"}, "--otel-sample-ratio"},
		{[]string{"--otel-endpoint", "http://127.0.0.1:4317"}, "no scheme"},
		{[]string{"--otel-endpoint", "collector"}, "not HOST:PORT"},
		{[]string{"--otel-endpoint", "127.0.0.1:4317", "--otel-service-name", " "}, "--otel-service-name"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(append(slices.Clone(base), tc.args...), io.Discard)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error about %s", err, tc.wantErr)
			}
		})
	}
	// Off by default: nothing is built.
	cfg, err := parseFlags(base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := telemetry.Open(context.Background(), cfg.OTel, version, slog.New(slog.DiscardHandler))
	if err != nil || tr != nil {
		t.Fatalf("openTracer without --otel-endpoint = %v, %v; want nil, nil", tr, err)
	}
	if tr.ServerOptions() != nil || tr.Shutdown(time.Second) != nil {
		t.Fatal("a nil tracer must add no server option and shut down cleanly")
	}
}
