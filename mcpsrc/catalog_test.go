package mcpsrc

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/catalog"
)

func TestCatalogMergesLiveToolsIntoBase(t *testing.T) {
	base, err := catalog.Parse([]byte(`{"categories":[{"id":"github","description":"GitHub work"}],
	 "servers":[{"id":"github","description":"GitHub API","categories":["github"],
	   "tools":[{"name":"search_issues","description":"old","examples":["find bugs"],"keywords":["issue"]},{"name":"gone","description":"removed live"}]},
	  {"id":"static","description":"not in the MCP config","tools":[{"name":"ping","description":"ping"}]}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	snap := Snapshot{Servers: []ServerState{
		{Name: "github", Listed: true, Degraded: true, Tools: []*mcp.Tool{
			{Name: "search_issues", Description: "Search issues", InputSchema: map[string]any{"type": "object"}},
			{Name: "create_pr", Description: "Open a pull request"},
			{Name: "create_pr", Description: "twice"},
			{Name: " ", Description: "blank"},
			{Name: "long", Description: strings.Repeat("é", catalog.MaxTextBytes)}}},
		{Name: "MCP Yahoo Finance", Listed: true, Tools: []*mcp.Tool{{Name: "quote", Title: "Stock quote"}}},
		{Name: "never", Listed: false},
		{Name: "empty", Listed: true},
	}}
	cat, warnings, err := Catalog(base, snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Categories) != 1 || len(cat.Servers) != 3 {
		t.Fatalf("got %d categories, %d servers; want 1 and 3 (github, static, MCP Yahoo Finance)", len(cat.Categories), len(cat.Servers))
	}
	gh := cat.Servers[0]
	var names []string
	for _, tl := range gh.Tools {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); got != "search_issues,create_pr,long" {
		t.Errorf("github tools = %s, want the live ones: search_issues,create_pr,long", got)
	}
	if s := gh.Tools[0]; s.Description != "Search issues" || len(s.Examples) != 1 || len(s.Keywords) != 1 || string(s.InputSchema) != `{"type":"object"}` {
		t.Errorf("search_issues = %+v, want the live description and schema with base's examples and keywords", s)
	}
	if gh.Description != "GitHub API" || len(gh.Categories) != 1 {
		t.Errorf("github server lost base's description or categories: %+v", gh)
	}
	if d := gh.Tools[2].Description; len(d) > MaxDescription {
		t.Errorf("long description is %d bytes, want at most %d", len(d), MaxDescription)
	}
	if y := cat.Servers[2]; y.Name != "MCP Yahoo Finance" || y.ID != "mcp_yahoo_finance" || y.Tools[0].Description != "Stock quote" {
		t.Errorf("new server = %+v, want name kept, derived id, title as description", y)
	}
	if ids := ServerIDs(cat); ids["MCP Yahoo Finance"] != "mcp_yahoo_finance" {
		t.Errorf("ServerIDs = %v", ids)
	}
	if len(base.Servers[0].Tools) != 2 || base.Servers[0].Tools[0].Description != "old" {
		t.Errorf("base was modified: %+v", base.Servers[0].Tools)
	}
	joined := strings.Join(warnings, "\n")
	for _, w := range []string{"listed twice", "blank", "clipped", `server "empty": no tools`} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings %q lack %q", joined, w)
		}
	}
}

func TestCatalogWithNothingListedFails(t *testing.T) {
	if _, _, err := Catalog(nil, Snapshot{Servers: []ServerState{{Name: "down", Degraded: true}}}); err == nil {
		t.Error("a catalog with no servers and no categories was accepted")
	}
}

// TestCatalogBoundsToolsPerServer: a server listing more than
// MaxIndexedTools has its first MaxIndexedTools indexed and a warning
// naming it (a server of 2,000 tools of 1 KB kept the daemon from
// serving: the thirteenth hostile pass).
func TestCatalogBoundsToolsPerServer(t *testing.T) {
	st := ServerState{Name: "big", Listed: true}
	for i := range MaxIndexedTools + 7 {
		st.Tools = append(st.Tools, &mcp.Tool{Name: "t" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + strings.Repeat("0", i/26),
			Description: strings.Repeat("word ", 1000)})
	}
	cat, warnings, err := Catalog(nil, Snapshot{Servers: []ServerState{st}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cat.Servers[0].Tools); n != MaxIndexedTools {
		t.Fatalf("%d tools indexed, want %d", n, MaxIndexedTools)
	}
	if cat.Servers[0].Tools[0].Name != st.Tools[0].Name || len(cat.Servers[0].Tools[0].Description) > MaxDescription {
		t.Fatalf("first tool %q with a description of %d bytes, want %q clipped to %d", cat.Servers[0].Tools[0].Name,
			len(cat.Servers[0].Tools[0].Description), st.Tools[0].Name, MaxDescription)
	}
	if !strings.Contains(strings.Join(warnings, "\n"), `server "big" lists more than 500 tools: the 7 past them are left out`) {
		t.Fatalf("warnings %q", warnings)
	}
}
