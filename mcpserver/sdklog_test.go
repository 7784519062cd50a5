package mcpserver

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSDKLog(t *testing.T) {
	const id = "SECRETSESSIONID0123456789"
	for _, tc := range []struct {
		name    string
		level   slog.Level
		log     func(*slog.Logger)
		want    string // "": nothing logged
		notWant string
	}{
		{"INFO is hidden at the default level", slog.LevelInfo,
			func(l *slog.Logger) { l.Info("server session connected", "session_id", id) }, "", ""},
		{"INFO is DEBUG, its session id hashed", slog.LevelDebug,
			func(l *slog.Logger) { l.Info("server session connected", "session_id", id) }, "level=DEBUG msg=\"server session connected\" session_hash=", id},
		{"a session id given to With is hashed", slog.LevelDebug,
			func(l *slog.Logger) { l.With("session_id", id).Info("x") }, "session_hash=", id},
		{"a warning keeps its level", slog.LevelInfo,
			func(l *slog.Logger) { l.Warn("keepalive ping failed", "error", "eof") }, "level=WARN msg=\"keepalive ping failed\" error=eof", ""},
		{"an error keeps its level", slog.LevelWarn,
			func(l *slog.Logger) { l.Error("server connect error") }, "level=ERROR", ""},
		{"other attributes are kept", slog.LevelDebug,
			func(l *slog.Logger) { l.Info("client log level set", "level", "info") }, "level=info", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(sdkLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))))
			got := buf.String()
			if tc.want == "" && got != "" {
				t.Fatalf("got %q, want nothing logged", got)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want it to hold %q", got, tc.want)
			}
			if tc.notWant != "" && strings.Contains(got, tc.notWant) {
				t.Fatalf("got %q, want no %q", got, tc.notWant)
			}
		})
	}
}

// TestSDKLogSession checks a whole session of the real SDK server: at the
// default level (INFO) it logs nothing.
func TestSDKLogSession(t *testing.T) {
	var buf bytes.Buffer
	s := NewBare(Config{Version: "test", Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
	_ = ss.Wait()
	if got := buf.String(); got != "" {
		t.Fatalf("a session logged %q at INFO, want nothing", got)
	}
}
