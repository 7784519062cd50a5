// Package telemetry is --otel-*: OpenTelemetry tracing of the daemon, off
// unless an endpoint is given. It builds the tracer provider and its OTLP
// exporter (none when off), the otelgrpc stats handler, the MCP tracing
// middleware, and flushes within a bound at exit. The child spans of a
// call's stages are internal/tracing's.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/internal/tracing"
)

// Config is --otel-*: OpenTelemetry tracing, off unless an endpoint is
// given (docs/operations.md, "Tracing").
type Config struct {
	Endpoint    string
	Insecure    bool
	SampleRatio float64
	ServiceName string
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("--otel-sample-ratio %v is not between 0 and 1", c.SampleRatio)
	}
	if c.Endpoint == "" {
		return nil
	}
	if strings.Contains(c.Endpoint, "://") {
		return fmt.Errorf("--otel-endpoint %q: give HOST:PORT, no scheme (--otel-insecure for plain gRPC)", c.Endpoint)
	}
	if host, port, err := net.SplitHostPort(c.Endpoint); err != nil || host == "" || port == "" {
		return fmt.Errorf("--otel-endpoint %q is not HOST:PORT", c.Endpoint)
	}
	if strings.TrimSpace(c.ServiceName) == "" {
		return errors.New("--otel-service-name must not be empty")
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"} {
		if v := os.Getenv(k); v != "" && v != "none" {
			return fmt.Errorf("%s=%s: the daemon sends traces uncompressed (it refuses compressed gRPC messages, and has no compressor to send them); unset it", k, v)
		}
	}
	return nil
}

// FlushWait bounds how long shutdown waits for the last spans to
// reach the collector.
const FlushWait = 5 * time.Second

// Tracer is what --otel-endpoint opens: the SDK's tracer provider with a
// batching OTLP/gRPC exporter, and the W3C trace-context propagator. A nil
// *Tracer is tracing off; every method is then a no-op.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	prop propagation.TextMapPropagator
}

// Open builds the tracer provider when cfg.Endpoint is set; with no
// endpoint it returns nil and builds nothing (no exporter, no connection,
// no global state touched). The exporter connects lazily: an unreachable
// collector does not stop the daemon from starting, and spans to it are
// queued in a bounded buffer and dropped when it is full, never waited for.
func Open(ctx context.Context, cfg Config, version string, log *slog.Logger) (*Tracer, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	// The flags win over OTEL_EXPORTER_OTLP_{ENDPOINT,INSECURE}: an https
	// URL is TLS with the system roots (or OTEL_EXPORTER_OTLP_CERTIFICATE),
	// --otel-insecure plain gRPC whatever the environment says.
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL("https://" + cfg.Endpoint)}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithTLSCredentials(insecure.NewCredentials()))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--otel-endpoint: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceName), attribute.String("service.version", version)))
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	// Export errors (a collector down) go to the daemon's log, at most one
	// line a minute; the SDK reports them through its one global hook.
	otel.SetErrorHandler(newExportErrorLog(log, time.Minute))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp), // bounded queue (2048 spans by default), drops rather than blocks
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	log.Info("tracing on", "otel_endpoint", cfg.Endpoint, "insecure", cfg.Insecure, "sample_ratio", cfg.SampleRatio,
		"service_name", cfg.ServiceName)
	return &Tracer{tp: tp, prop: propagation.TraceContext{}}, nil
}

// ServerOptions are the gRPC server's tracing options: the otelgrpc stats
// handler starts one server span per call (health checks and reflection
// excepted), continuing the caller's trace from its traceparent metadata.
// HTTP/JSON calls run on the same grpc.Server (vanguard), so they get the
// same spans, their traceparent header read the same way.
func (t *Tracer) ServerOptions() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.tp),
		otelgrpc.WithPropagators(t.prop),
		otelgrpc.WithFilter(filters.None(filters.HealthCheck(), filters.ServicePrefix("grpc.reflection."))),
	))}
}

// MCPMiddleware starts one server span per MCP request (notifications
// excepted), named for the method and the tool called, and continues the
// trace of a traceparent header on MCP over HTTP. The tool handlers call
// the same server.Server methods as gRPC, whose embed/score/calibrate
// spans become its children. The session id is not recorded.
func (t *Tracer) MCPMiddleware() mcp.Middleware {
	tr := t.tp.Tracer(tracing.Scope)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			if ex := req.GetExtra(); ex != nil && ex.Header != nil {
				ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(ex.Header))
			}
			name := method
			attrs := []attribute.KeyValue{attribute.String("mcp.method.name", method)}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
				tool := clip.String(p.Name, 64) // the client's word: bounded
				name += " " + tool
				attrs = append(attrs, attribute.String("gen_ai.tool.name", tool))
			}
			ctx, sp := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer sp.End()
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
				sp.SetAttributes(attribute.String("error.type", "tool_error"))
				sp.SetStatus(codes.Error, "tool error") // the result's text may quote the request: not recorded
			}
			if err != nil {
				sp.SetStatus(codes.Error, "mcp error")
			}
			return res, err
		}
	}
}

// Shutdown flushes the spans still queued and stops the exporter, waiting
// at most wait (a collector that is down costs that much at exit, once).
func (t *Tracer) Shutdown(wait time.Duration) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// exportErrorLog logs the SDK's errors at warn level, at most once per
// interval, with how many were not logged.
type exportErrorLog struct {
	log      *slog.Logger
	interval time.Duration
	mu       sync.Mutex
	last     time.Time
	skipped  int
}

func newExportErrorLog(log *slog.Logger, interval time.Duration) *exportErrorLog {
	return &exportErrorLog{log: log, interval: interval}
}

// Handle implements otel.ErrorHandler.
func (h *exportErrorLog) Handle(err error) {
	h.mu.Lock()
	if !h.last.IsZero() && time.Since(h.last) < h.interval {
		h.skipped++
		h.mu.Unlock()
		return
	}
	skipped := h.skipped
	h.last, h.skipped = time.Now(), 0
	h.mu.Unlock()
	h.log.Warn("tracing: spans not exported", "err", err, "errors_not_logged", skipped)
}
