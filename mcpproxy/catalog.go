package mcpproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
	// shown is the tool as sessions list it (exposedTool), and def the
	// sha256 of Tool's JSON, by which a session sees it changed: made
	// once per index, for every session (a copy of each in each session
	// grew the proxy 16 MB a session, the fourteenth hostile pass).
	shown *mcp.Tool
	def   string
}

// The bounds on what the proxy indexes of its backends (the thirteenth
// hostile pass: one backend of 2,000 tools with 1 KB descriptions, within
// mcpsrc.MaxTools, kept the listener from opening for over 9 minutes).
// Catalogs within them index as before.
const (
	// MaxEmbedText bounds each description embedded for a backend tool
	// (and each of a server's examples, which are its tools'
	// descriptions), in bytes: longer ones are clipped before embedding.
	// The model reads at most its max_tokens (256 for the default one,
	// about 1-1.5 KB of English), so the clip changes no vector of an
	// ordinary description; it bounds what is hashed, held and tokenised.
	// What a session's tool list shows is the backend's own description.
	MaxEmbedText = 2048
	// MaxToolsPerServer bounds the tools indexed of one backend; those
	// past it (in the backend's order) are left out with a warning
	// naming the server: not searchable, not shown, not callable through
	// the proxy.
	MaxToolsPerServer = 500
	// MaxToolsIndexed bounds the tools indexed of every backend together;
	// backends are taken in configuration order, and the tools past it
	// are left out with a warning naming each server cut.
	MaxToolsIndexed = 5000
	// MaxServerExamples bounds the examples of a server's category (its
	// tools' descriptions, in order): each is one more text embedded and
	// one more held-out example at every fit.
	MaxServerExamples = 200
	// MaxToolName is the longest tool name the proxy exposes, the
	// "<server id>__" prefix included: the MCP specification (2025-11-25)
	// asks for names of 1-128 characters of A-Za-z0-9, '_', '-' and '.'.
	MaxToolName = 128
	// MaxToolDef bounds a backend tool's definition (its JSON: name,
	// description, schemas, annotations), in bytes: a tool past it is
	// left out with a warning. Every session that shows the tool lists it
	// whole.
	MaxToolDef = 64 << 10
)

// toolNameProblem says why the proxy does not expose a backend tool named
// name on the server of id serverID ("" when it does): a name outside
// the MCP specification's set (1-128 characters of A-Za-z0-9_.-; so no
// NUL, escape sequence, bidi override, space or '/'), holding the
// proxy's separator "__" (evil__a__b would read as server evil's tool
// a__b or server evil__a's tool b), or too long once exposed as
// "<server id>__<name>".
func toolNameProblem(serverID, name string) string {
	if name == "" {
		return "name is blank"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "name holds characters outside A-Za-z0-9_.- (MCP specification 2025-11-25)"
		}
	}
	if strings.Contains(name, "__") {
		return "name holds the proxy's separator \"__\""
	}
	if len(serverID)+2+len(name) > MaxToolName {
		return fmt.Sprintf("exposed name %s__… is over %d characters", serverID, MaxToolName)
	}
	return ""
}

// serverTools returns the tools of st the proxy indexes, in st's order,
// with a warning for each left out: a name toolNameProblem refuses (or
// one the catalog could not hold), a name listed twice (the first kept),
// and those past MaxToolsPerServer (one warning). id is the server's id
// (serverIDs). Names in warnings are quoted and clipped to 64 bytes. defs
// are the kept tools' definitions' sha256 (liveTool.def), from the JSON
// measured here.
func serverTools(st mcpsrc.ServerState, id string) (kept []*mcp.Tool, defs, warnings []string) {
	seen := map[string]bool{}
	over := 0
	for _, t := range st.Tools {
		problem := toolNameProblem(id, t.Name)
		var def []byte
		if problem == "" {
			var err error
			if def, err = json.Marshal(t); err != nil {
				problem = "definition is not JSON: " + clip.String(err.Error(), 64)
			} else if len(def) > MaxToolDef {
				problem = fmt.Sprintf("definition is %d bytes, over %d", len(def), MaxToolDef)
			}
		}
		switch {
		case problem == "" && seen[t.Name]:
			problem = "listed twice; the first kept"
		case problem == "" && len(kept) >= MaxToolsPerServer:
			over++
			continue
		}
		if problem != "" {
			warnings = append(warnings, fmt.Sprintf("server %q: tool %s left out: %s", st.Name, strconv.QuoteToASCII(clip.String(t.Name, 64)), problem))
			continue
		}
		seen[t.Name] = true
		kept = append(kept, t)
		sum := sha256.Sum256(def)
		defs = append(defs, hex.EncodeToString(sum[:]))
	}
	if over > 0 {
		warnings = append(warnings, fmt.Sprintf("server %q lists more than %d tools: the %d past them are left out (not searchable, not shown, not callable through the proxy)",
			st.Name, MaxToolsPerServer, over))
	}
	return kept, defs, warnings
}

// buildCatalog turns the servers' live tools into a catalog: one category
// per server (so a session's exposure is a set of servers), described by
// its name and with its tools' descriptions as examples (at most
// MaxServerExamples), and the server with its tools. Servers without tools
// are left out. It also returns every tool by exposed name. A tool that
// cannot be indexed or exposed (serverTools: a name outside the MCP set,
// holding "__", listed twice; past MaxToolsPerServer) is left out, as the
// daemon's mcpsrc.Catalog leaves it out: one such tool of one backend
// failed the whole index, and every identity's search_tools and call_tool
// answered UNAVAILABLE on every server (the thirteenth hostile pass). Each
// description is clipped to MaxEmbedText for the index.
func buildCatalog(snap mcpsrc.Snapshot) (*catalog.Catalog, map[string]liveTool, error) {
	cat := &catalog.Catalog{}
	names := make([]string, len(snap.Servers))
	for i, st := range snap.Servers {
		names[i] = st.Name
	}
	ids, err := serverIDs(names)
	if err != nil {
		return nil, nil, err
	}
	kept := map[string][]*mcp.Tool{} // by server name, as s.Tools
	defs := map[string][]string{}    // and their digests
	for i, st := range snap.Servers {
		s := catalog.Server{ID: st.Name, Name: st.Name, Description: "MCP server " + st.Name}
		ts, ds, _ := serverTools(st, ids[i])
		kept[st.Name], defs[st.Name] = ts, ds
		for _, t := range ts {
			schema, err := json.Marshal(t.InputSchema)
			if err != nil || len(schema) > catalog.MaxSchemaBytes || len(schema) == 0 || schema[0] != '{' {
				schema = nil
			}
			s.Tools = append(s.Tools, catalog.Tool{Name: t.Name, Description: clip.String(t.Description, MaxEmbedText),
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
			if d := strings.TrimSpace(t.Description); d != "" && len(examples) < min(MaxServerExamples, catalog.MaxExamples) {
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
			lt := liveTool{Exposed: s.ID + "__" + t.Name, Server: s.Name, ServerID: s.ID, Tool: src[j], def: defs[s.Name][j]}
			lt.shown = exposedTool(lt)
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
