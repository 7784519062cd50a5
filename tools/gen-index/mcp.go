package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/mcpsrc"
)

// mcpCatalog connects to every server of the MCP client config at path,
// lists their tools once and merges them into base (nil for none), as the
// daemon's --mcp-config does. A server that fails is reported and left
// out; a catalog with nothing at all is an error.
func mcpCatalog(ctx context.Context, path string, base *catalog.Catalog, timeout time.Duration, stderr io.Writer) (*catalog.Catalog, error) {
	cfg, err := mcpsrc.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	pool := mcpsrc.Open(cfg, mcpsrc.Options{Timeout: timeout})
	defer pool.Close()
	// Every server gets one attempt: connecting and listing, each bounded
	// by timeout.
	wctx, cancel := context.WithTimeout(ctx, 2*timeout+time.Second)
	defer cancel()
	snap, err := pool.WaitReady(wctx)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, st := range snap.Servers {
		switch {
		case st.Listed:
			fmt.Fprintf(stderr, "mcp server %q: %d tools\n", st.Name, len(st.Tools))
		case st.LastError != "":
			fmt.Fprintf(stderr, "warning: mcp server %q: not indexed: %s\n", st.Name, st.LastError)
		default:
			fmt.Fprintf(stderr, "warning: mcp server %q: not indexed: no answer within %v\n", st.Name, 2*timeout)
		}
	}
	cat, warnings, err := mcpsrc.Catalog(base, snap)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cat, nil
}
