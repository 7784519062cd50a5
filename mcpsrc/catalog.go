package mcpsrc

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/clip"
)

// What Catalog keeps of one server's live tools (the thirteenth hostile
// pass: a server of 2,000 tools with 1 KB descriptions, within MaxTools,
// kept the proxy's listener shut for over 9 minutes; the daemon builds its
// first index from --mcp-config before it serves, so the same server kept
// it from serving).
const (
	// MaxIndexedTools bounds the live tools indexed of one server: those
	// past it, in the server's order, are left out with a warning naming
	// the server.
	MaxIndexedTools = 500
	// MaxDescription bounds a live tool's description in the index, in
	// bytes: longer ones are clipped with a warning. The default model
	// reads at most 256 tokens (about 1-1.5 KB of English) of it anyway.
	MaxDescription = 2048
)

// Catalog merges the live tools of a snapshot into base (which may be nil)
// and returns a new, validated catalog with ids assigned, plus warnings
// for what was left out or shortened. base is not modified.
//
// Where categories come from: base's categories are the only categories.
// A live server that base also lists (same name or id) keeps base's
// description, categories and keywords, and each of its tools that base
// lists by name keeps base's category, examples and keywords; its tool
// list is the live one. A live server base does not list is added with
// its tools and no categories (a tool's category is then derived from a
// namespaced name, else uncategorized). Servers of base not in the
// snapshot, and servers never listed, stay as base has them.
//
// A server counts with its last known tools, degraded or not; one that
// has never listed is left out. A tool that cannot be indexed (a blank,
// duplicate or over-long name) is left out with a warning rather than
// failing the whole catalog; so are the tools past MaxIndexedTools; a
// description over MaxDescription is clipped and an over-large input
// schema dropped.
func Catalog(base *catalog.Catalog, snap Snapshot) (*catalog.Catalog, []string, error) {
	out := &catalog.Catalog{}
	var warnings []string
	if base != nil {
		out.Categories = base.Categories
		out.Servers = append(out.Servers, base.Servers...)
	}
	for _, st := range snap.Servers {
		if !st.Listed {
			continue
		}
		tools, w := liveTools(st)
		warnings = append(warnings, w...)
		i := findServer(out.Servers, st.Name)
		if len(tools) == 0 {
			if i < 0 {
				warnings = append(warnings, fmt.Sprintf("server %q: no tools, not indexed", st.Name))
			}
			continue
		}
		if i < 0 {
			out.Servers = append(out.Servers, catalog.Server{ID: st.Name, Name: st.Name, Tools: tools})
			continue
		}
		s := out.Servers[i] // a copy: base's tools slice is not written
		s.Tools = mergeTools(s.Tools, tools)
		s.ToolsFile = ""
		out.Servers[i] = s
	}
	if err := out.Validate(); err != nil {
		return nil, warnings, err
	}
	if err := out.AssignIDs(); err != nil {
		return nil, warnings, fmt.Errorf("%w: %v", catalog.ErrInvalid, err)
	}
	return out, warnings, nil
}

// ServerIDs maps each server's name in cat to its id.
func ServerIDs(cat *catalog.Catalog) map[string]string {
	out := map[string]string{}
	for _, s := range cat.Servers {
		out[s.Name] = s.ID
	}
	return out
}

func findServer(ss []catalog.Server, name string) int {
	for i, s := range ss {
		if s.Name == name || s.ID == name {
			return i
		}
	}
	did := catalog.DeriveID(name)
	for i, s := range ss {
		if s.ID == did {
			return i
		}
	}
	return -1
}

func liveTools(st ServerState) ([]catalog.Tool, []string) {
	var out []catalog.Tool
	var warnings []string
	seen := map[string]bool{}
	for i, t := range st.Tools {
		if len(out) == MaxIndexedTools {
			warnings = append(warnings, fmt.Sprintf("server %q lists more than %d tools: the %d past them are left out",
				st.Name, MaxIndexedTools, len(st.Tools)-i))
			break
		}
		where := fmt.Sprintf("tool %q on server %q", clip.String(t.Name, 80), st.Name)
		switch {
		case strings.TrimSpace(t.Name) == "" || !utf8.ValidString(t.Name) || len(t.Name) > catalog.MaxNameBytes:
			warnings = append(warnings, where+": name is blank, not UTF-8 or too long; left out")
			continue
		case seen[t.Name]:
			warnings = append(warnings, where+": listed twice; the first kept")
			continue
		}
		seen[t.Name] = true
		ct := catalog.Tool{Name: t.Name, Description: t.Description}
		if ct.Description == "" {
			ct.Description = t.Title
		}
		if len(ct.Description) > MaxDescription {
			ct.Description = clip.String(ct.Description, MaxDescription-len(clip.Ellipsis))
			warnings = append(warnings, where+": description clipped")
		}
		if t.InputSchema != nil {
			if b, err := json.Marshal(t.InputSchema); err == nil && len(b) <= catalog.MaxSchemaBytes && len(b) > 0 && b[0] == '{' {
				ct.InputSchema = b
			} else {
				warnings = append(warnings, where+": input schema too large or not an object; left out")
			}
		}
		out = append(out, ct)
	}
	return out, warnings
}

// mergeTools is live, each tool keeping what base says of the same name.
func mergeTools(base, live []catalog.Tool) []catalog.Tool {
	byName := map[string]catalog.Tool{}
	for _, t := range base {
		byName[t.Name] = t
	}
	out := make([]catalog.Tool, len(live))
	for i, t := range live {
		if b, ok := byName[t.Name]; ok {
			t.Category, t.Examples, t.Keywords = b.Category, b.Examples, b.Keywords
		}
		out[i] = t
	}
	return out
}
