package mcpproxy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/mcpsrc"
)

// liveTool is one tool of a live server, as the proxy exposes it.
type liveTool struct {
	// Exposed is the name the agent sees: "<server id>__<tool name>".
	Exposed string
	// Server is the server's name in the configuration (what mcpsrc calls).
	Server string
	// ServerID is the server's id in the index (its category too).
	ServerID string
	Tool     *mcp.Tool
}

// buildCatalog turns the servers' live tools into a catalog: one category
// per server (so a session's exposure is a set of servers), described by
// its name and with its tools' descriptions as examples, and the server
// with its tools. Servers without tools are left out. It also returns
// every tool by exposed name. A tool that cannot be indexed (a blank,
// duplicate or over-long name, or not UTF-8) is left out, as the daemon's
// mcpsrc.Catalog leaves it out: one such tool of one backend failed the
// whole index, and every identity's search_tools and call_tool answered
// UNAVAILABLE on every server (the thirteenth hostile pass).
func buildCatalog(snap mcpsrc.Snapshot) (*catalog.Catalog, map[string]liveTool, error) {
	cat := &catalog.Catalog{}
	kept := map[string][]*mcp.Tool{} // by server name, as s.Tools
	for _, st := range snap.Servers {
		s := catalog.Server{ID: st.Name, Name: st.Name, Description: "MCP server " + st.Name}
		seen := map[string]bool{}
		for _, t := range st.Tools {
			if strings.TrimSpace(t.Name) == "" || !utf8.ValidString(t.Name) || len(t.Name) > catalog.MaxNameBytes || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			kept[st.Name] = append(kept[st.Name], t)
			schema, err := json.Marshal(t.InputSchema)
			if err != nil || len(schema) > catalog.MaxSchemaBytes || len(schema) == 0 || schema[0] != '{' {
				schema = nil
			}
			s.Tools = append(s.Tools, catalog.Tool{Name: t.Name, Description: clip.String(t.Description, catalog.MaxTextBytes),
				InputSchema: schema})
		}
		cat.Servers = append(cat.Servers, s)
	}
	// Ids over every configured server, as serverIDs assigns them, then
	// only the servers with tools.
	if err := cat.AssignIDs(); err != nil {
		return nil, nil, err
	}
	cat.Servers = slices.DeleteFunc(cat.Servers, func(s catalog.Server) bool { return len(s.Tools) == 0 })
	if len(cat.Servers) == 0 {
		return nil, nil, errNoTools
	}
	tools := map[string]liveTool{}
	for i := range cat.Servers {
		s := &cat.Servers[i]
		var examples []string
		for _, t := range s.Tools {
			if d := strings.TrimSpace(t.Description); d != "" && len(examples) < catalog.MaxExamples {
				examples = append(examples, d)
			}
		}
		cat.Categories = append(cat.Categories, catalog.Category{ID: s.ID, Description: "tools of the " + s.Name + " MCP server",
			Examples: examples, Keywords: []string{strings.ToLower(s.Name)}})
		s.Categories = []string{s.ID}
		src := kept[s.Name]
		for j := range s.Tools {
			t := &s.Tools[j]
			t.Category = s.ID
			lt := liveTool{Exposed: s.ID + "__" + t.Name, Server: s.Name, ServerID: s.ID, Tool: src[j]}
			tools[lt.Exposed] = lt
		}
	}
	if err := cat.Validate(); err != nil {
		return nil, nil, fmt.Errorf("live tools: %w", err)
	}
	return cat, tools, nil
}

// serverIDs are the ids (and category ids) of servers named names, as
// buildCatalog assigns them.
func serverIDs(names []string) ([]string, error) {
	cat := &catalog.Catalog{}
	for _, n := range names {
		cat.Servers = append(cat.Servers, catalog.Server{ID: n, Name: n})
	}
	if err := cat.AssignIDs(); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(names))
	for _, s := range cat.Servers {
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// toolsKey is what a rebuild depends on: every server's tools, so a
// snapshot that only changed a server's health does not rebuild.
func toolsKey(snap mcpsrc.Snapshot) string {
	type tool struct {
		Name, Description string
		Schema            any
	}
	var all [][]tool
	var names []string
	for _, st := range snap.Servers {
		names = append(names, st.Name)
		var ts []tool
		for _, t := range st.Tools {
			ts = append(ts, tool{t.Name, t.Description, t.InputSchema})
		}
		all = append(all, ts)
	}
	b, _ := json.Marshal(struct {
		Names []string
		Tools [][]tool
	}{names, all})
	return string(b)
}
