// Command server is an MCP server for tests, built with the official Go SDK.
// It serves the tools listed in a JSON file ([{"name","description"}]) and
// watches that file: when it changes, the tool list changes and the SDK
// sends notifications/tools/list_changed. Every tool answers its own name,
// but one with "env": true answers its process's environment, a NAME=value
// a line (as npm's server-everything get-env does), and one with "bytes": N
// a text of N bytes.
//
//	server --tools FILE             serve over stdio
//	server --tools FILE --http ADDR serve streamable HTTP; the URL is written to --url-file
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type toolDef struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Fail        bool   `json:"fail"`  // every call answers isError
	Env         bool   `json:"env"`   // answers the process's environment
	Bytes       int    `json:"bytes"` // answers a text of this many bytes
}

func main() {
	tools := flag.String("tools", "", "JSON file of the tools to serve (watched)")
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	urlFile := flag.String("url-file", "", "with --http: write the server's URL here")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *tools, *httpAddr, *urlFile); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "testmcp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, toolsPath, httpAddr, urlFile string) error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "testmcp", Version: "v0"},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	var served []string
	load := func() error {
		data, err := os.ReadFile(toolsPath)
		if err != nil {
			return err
		}
		var defs []toolDef
		if err := json.Unmarshal(data, &defs); err != nil {
			return err
		}
		var names []string
		for _, d := range defs {
			names = append(names, d.Name)
			name, fail, env, size := d.Name, d.Fail, d.Env, d.Bytes
			srv.AddTool(&mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					text := name
					if env {
						text = strings.Join(os.Environ(), "\n")
					}
					if size > 0 {
						text = strings.Repeat("x", size)
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: fail}, nil
				})
		}
		var gone []string
		for _, n := range served {
			if !slices.Contains(names, n) {
				gone = append(gone, n)
			}
		}
		if len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		served = names
		return nil
	}
	if err := load(); err != nil {
		return err
	}
	go func() {
		st, _ := os.Stat(toolsPath)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			now, err := os.Stat(toolsPath)
			if err != nil || st != nil && now.ModTime().Equal(st.ModTime()) && now.Size() == st.Size() {
				continue
			}
			st = now
			if err := load(); err != nil {
				fmt.Fprintln(os.Stderr, "testmcp: reload:", err)
			}
		}
	}()
	if httpAddr == "" {
		return srv.Run(ctx, &mcp.StdioTransport{})
	}
	lis, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	url := "http://" + lis.Addr().String() + "/mcp"
	if urlFile != "" {
		if err := os.WriteFile(urlFile+".tmp", []byte(url), 0o600); err != nil {
			return err
		}
		if err := os.Rename(urlFile+".tmp", urlFile); err != nil {
			return err
		}
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = hs.Close() }()
	return hs.Serve(lis)
}
