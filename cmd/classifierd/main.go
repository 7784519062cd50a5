// Command classifierd is the classifierd gRPC daemon: it loads one
// sentence-embedding model and one index built by gen-index, and answers
// classification and routing requests in milliseconds with no network.
//
//	classifierd --index FILE --model DIR --listen HOST:PORT [--ort-lib PATH]
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
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
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
