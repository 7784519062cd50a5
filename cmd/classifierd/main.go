// Command classifierd is the classifierd gRPC daemon: it loads one
// sentence-embedding model and one index built by gen-index, and answers
// classification and routing requests in milliseconds with no network.
//
//	classifierd --index FILE --model DIR --listen HOST:PORT [--ort-lib PATH] [--mcp-listen HOST:PORT]
//	classifierd mcp --index FILE --model DIR [flags]     MCP over stdio (mcp.go)
//	classifierd proxy --config mcp.json --model DIR      MCP filtering proxy (proxy.go)
//
// It refuses to start (non-zero exit, one-line reason) when the model or
// index cannot be read or do not match.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	args, sub := os.Args[1:], ""
	if len(args) > 0 && (args[0] == "mcp" || args[0] == "proxy") {
		sub, args = args[0], args[1:]
	}
	if sub == "proxy" {
		os.Exit(proxyMain(args))
	}
	cfg, err := parseFlags(args, os.Stderr)
	cfg.MCPStdio = sub == "mcp"
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "classifierd:", err)
		os.Exit(2)
	}
	log := newLogger(cfg.LogFormat, cfg.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg, log)
	stop()
	if err != nil {
		log.Error("classifierd stopped", "err", err)
		fmt.Fprintln(os.Stderr, "classifierd:", err)
		os.Exit(1)
	}
}

func newLogger(format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
