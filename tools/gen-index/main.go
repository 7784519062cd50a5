// Command gen-index embeds a catalog into an index file for classifierd.
//
//	gen-index --catalog FILE --model DIR --out FILE [--ort-lib PATH]
//	gen-index eval --catalog FILE --queries FILE --model DIR [--json FILE]
//	gen-index fit-fusion --model DIR [--write models]
//
// It is the only program that runs the model in bulk; run it again whenever
// the catalog or the model changes. A malformed catalog exits non-zero with
// a message naming the offending entry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-index:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "eval" {
		return runEval(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "fit-fusion" {
		return runFitFusion(ctx, args[1:], stdout, stderr)
	}
	return runBuild(ctx, args, stdout, stderr)
}
