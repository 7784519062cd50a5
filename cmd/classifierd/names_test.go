package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/testenv"
)

// namesCatalog has the names real MCP servers use: spaces, dots, slashes,
// capitals and non-ASCII.
const namesCatalog = `{"categories":[
  {"id":"finance","description":"Stocks, markets and events"},
  {"id":"weather","description":"Weather forecasts"}],
 "servers":[
 {"id":"MCP Yahoo Finance","categories":["finance"],"description":"Stock quotes, market news and live events near you",
  "tools":[
   {"name":"Songkick concert","description":"Find upcoming concerts and gigs by artist or city, with dates and ticket links","inputSchema":{"type":"object"}},
   {"name":"stock.quote","description":"Get the latest price of a stock ticker","inputSchema":{"type":"object"}}]},
 {"id":"météo/forecast","categories":["weather"],"description":"Weather forecasts",
  "tools":[{"name":"get forecast","description":"Weather forecast for a city for the next days","inputSchema":{"type":"object"}}]}]}`

// TestNamesVerbatimThroughGenIndexAndDaemon builds an index from a catalog
// with such names and checks that gen-index reports each derived id and
// that Route and ListTools return the names verbatim.
func TestNamesVerbatimThroughGenIndexAndDaemon(t *testing.T) {
	_, gi := binaries(t)
	cat := filepath.Join(t.TempDir(), "names.json")
	if err := os.WriteFile(cat, []byte(namesCatalog), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "names.idx")
	out, err := exec.Command(gi, "--catalog", cat, "--model", testenv.ModelDir(), "--out", idx, "--ort-lib", testenv.ORTLib()).CombinedOutput()
	if err != nil {
		t.Fatalf("gen-index: %v\n%s", err, out)
	}
	for _, want := range []string{
		`warning: server "MCP Yahoo Finance": id "mcp_yahoo_finance"`,
		`warning: tool "Songkick concert" on server "MCP Yahoo Finance": id "mcp_yahoo_finance/songkick_concert"`,
		`warning: server "météo/forecast": id "m_t_o_forecast"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("gen-index output does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), `tool "stock.quote"`) {
		t.Errorf("stock.quote is a safe id, yet gen-index reports it:\n%s", out)
	}

	_, conn := startDaemon(t, idx)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resp, err := c.Route(ctx, &pb.RouteRequest{Query: "find me a concert by Radiohead in London next month"})
	if err != nil {
		t.Fatal(err)
	}
	tools := resp.GetTools()
	if len(tools) == 0 || tools[0].GetName() != "Songkick concert" || tools[0].GetServer() != "mcp_yahoo_finance" ||
		tools[0].GetServerName() != "MCP Yahoo Finance" {
		t.Fatalf("got tools %v, want Songkick concert on mcp_yahoo_finance (MCP Yahoo Finance) first", tools)
	}
	if s := resp.GetServers(); len(s) == 0 || s[0].GetId() != "mcp_yahoo_finance" || s[0].GetName() != "MCP Yahoo Finance" {
		t.Fatalf("got servers %v, want mcp_yahoo_finance named MCP Yahoo Finance first", s)
	}

	if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "names", DefaultExposure: "all"}); err != nil {
		t.Fatal(err)
	}
	lt, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "names"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range lt.GetTools() {
		got[tl.GetName()] = tl.GetServer()
		if tl.GetName() == "Songkick concert" && tl.GetServerName() != "MCP Yahoo Finance" {
			t.Errorf("ListTools: Songkick concert's server_name %q", tl.GetServerName())
		}
		if tl.GetName() == "stock.quote" && tl.GetServerName() != "MCP Yahoo Finance" {
			t.Errorf("ListTools: stock.quote's server_name %q", tl.GetServerName())
		}
	}
	want := map[string]string{"Songkick concert": "mcp_yahoo_finance", "stock.quote": "mcp_yahoo_finance", "get forecast": "m_t_o_forecast"}
	for name, srv := range want {
		if got[name] != srv {
			t.Errorf("ListTools: tool %q on %q, want on %q (all: %v)", name, got[name], srv, got)
		}
	}
}
