package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
)

// sdkLogKeySession is the attribute under which the SDK's server logs a
// session's id.
const sdkLogKeySession = "session_id"

// sdkLog is the log the SDK's server writes to. The SDK logs at INFO once
// or more for every session (connecting, connected, initialized,
// disconnected), the id of each: a flood any client can cause, and on an
// MCP listener without authentication a session's id is all another client
// needs to use the session. So its INFO lines are DEBUG here, and a session
// id is logged as a short hash, enough to match a session's lines; its
// warnings and errors keep their level.
func sdkLog(log *slog.Logger) *slog.Logger {
	return slog.New(sdkHandler{log.Handler()})
}

type sdkHandler struct{ next slog.Handler }

// demote is the level an SDK line is logged at.
func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, demote(l))
}

func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, demote(r.Level), r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(hideSessionID(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h sdkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	hidden := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		hidden[i] = hideSessionID(a)
	}
	return sdkHandler{h.next.WithAttrs(hidden)}
}

func (h sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{h.next.WithGroup(name)} }

// hideSessionID replaces a session id with the first 12 hex digits of its
// SHA-256.
func hideSessionID(a slog.Attr) slog.Attr {
	if a.Key != sdkLogKeySession || a.Value.Kind() != slog.KindString || a.Value.String() == "" {
		return a
	}
	sum := sha256.Sum256([]byte(a.Value.String()))
	return slog.String("session_hash", hex.EncodeToString(sum[:6]))
}
