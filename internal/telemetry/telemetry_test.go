package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestOffBuildsNothing: without an endpoint Open builds nothing, and the
// nil tracer adds no option, no middleware work, and shuts down cleanly.
func TestOffBuildsNothing(t *testing.T) {
	tr, err := Open(context.Background(), Config{SampleRatio: 1, ServiceName: "x"}, "0", slog.New(slog.DiscardHandler))
	if err != nil || tr != nil {
		t.Fatalf("Open without an endpoint = %v, %v; want nil, nil", tr, err)
	}
	if tr.ServerOptions() != nil || tr.Shutdown(time.Second) != nil {
		t.Fatal("a nil tracer must add no server option and shut down cleanly")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg     Config
		wantErr string
	}{
		{Config{SampleRatio: 1}, ""},
		{Config{Endpoint: "127.0.0.1:4317", SampleRatio: 0.5, ServiceName: "classifierd"}, ""},
		{Config{SampleRatio: 2}, "--otel-sample-ratio"},
		{Config{Endpoint: "https://c:4317", SampleRatio: 1, ServiceName: "x"}, "no scheme"},
		{Config{Endpoint: "c", SampleRatio: 1, ServiceName: "x"}, "not HOST:PORT"},
		{Config{Endpoint: "c:1", SampleRatio: 1, ServiceName: " "}, "--otel-service-name"},
	} {
		err := tc.cfg.Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.wantErr)
		}
	}
}

// TestExportErrorLogIsRateLimited: a collector that is down logs one line
// per interval, with the count of the errors not logged.
func TestExportErrorLogIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	h := newExportErrorLog(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for range 5 {
		h.Handle(errors.New("connection refused"))
	}
	if n := strings.Count(buf.String(), "spans not exported"); n != 1 {
		t.Fatalf("%d lines for 5 errors in one interval, want 1:\n%s", n, buf.String())
	}
	h.last = time.Now().Add(-2 * time.Hour)
	h.Handle(errors.New("connection refused"))
	if !strings.Contains(buf.String(), "errors_not_logged=4") {
		t.Fatalf("the next line does not count the 4 not logged:\n%s", buf.String())
	}
}
