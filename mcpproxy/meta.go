package mcpproxy

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/mcpserver"
)

// SearchOutput is search_tools' answer: mcpserver's ranked tools,
// each with the name to call it by.
type SearchOutput struct {
	Tools []FoundTool `json:"tools"`
	// Indexing names the servers whose tools are being indexed: not
	// searchable yet (a server's first index; later ones keep its
	// previous tools searchable).
	Indexing []string `json:"indexing,omitempty" jsonschema:"servers whose tools are being indexed and are not searchable yet; search again shortly"`
}

// FoundTool is a ranked live tool.
type FoundTool struct {
	mcpserver.FoundTool
	// Exposed is the tool's name in this proxy ("<server>__<tool>"); Shown
	// says whether it is in the session's tool list now.
	Exposed string `json:"exposed_name" jsonschema:"the tool's name in this proxy"`
	Shown   bool   `json:"shown" jsonschema:"the tool is in your tool list now; if not, call it with call_tool"`
}

// CallInput is call_tool's input.
type CallInput struct {
	Server    string         `json:"server" jsonschema:"the server's id or name, as search_tools returned it"`
	Tool      string         `json:"tool" jsonschema:"the tool's name on that server"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments"`
}

// AnalyzeInput is hub__analyze_prompt's input; the session is the caller's.
type AnalyzeInput struct {
	Prompt  string `json:"prompt" jsonschema:"the user's prompt"`
	Context string `json:"context,omitempty" jsonschema:"earlier conversation; weighs less than the prompt"`
	Mode    string `json:"mode,omitempty" jsonschema:"additive (default: widen what you see) or replacement"`
}

// AnalyzeOutput is hub__analyze_prompt's answer: the analysis, what the
// session now exposes and how many tools it sees.
type AnalyzeOutput struct {
	mcpserver.AnalyzePromptOutput
	Exposed []string `json:"exposed_categories" jsonschema:"the categories (servers) your tool list now holds"`
	Tools   int      `json:"exposed_tools" jsonschema:"how many server tools your tool list now holds"`
}

func (c *client) addMetaTools() {
	p := c.p
	mcpserver.AddTool(c.srv, &mcp.Tool{Name: ToolSearch, Description: "Search every tool of every connected MCP server, including tools " +
		"not in your tool list, ranked best first with calibrated confidence; call one with call_tool.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpserver.SearchToolsInput) (*mcp.CallToolResult, SearchOutput, error) {
			l, err := p.current()
			if err != nil {
				return nil, SearchOutput{}, err
			}
			res, err := mcpserver.Search(ctx, l.backend, in)
			if err != nil {
				return nil, SearchOutput{}, err
			}
			c.startTask(res.RequestID, false)
			c.mu.Lock()
			defer c.mu.Unlock()
			out := SearchOutput{Tools: []FoundTool{}, Indexing: p.Indexing()}
			for _, t := range res.Tools {
				name := t.Server + "__" + t.Name
				_, shown := c.shown[name]
				out.Tools = append(out.Tools, FoundTool{FoundTool: t, Exposed: name, Shown: shown})
			}
			return nil, out, nil
		})
	mcpserver.AddTool(c.srv, &mcp.Tool{Name: ToolCall, Description: "Call any tool of any connected MCP server by server and tool name " +
		"(as search_tools returns them), whether or not it is in your tool list."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in CallInput) (*mcp.CallToolResult, any, error) {
			l, err := p.current()
			if err != nil {
				return nil, nil, err
			}
			lt, ok := l.find(in.Server, in.Tool)
			if !ok && p.indexingServer(in.Server) {
				return nil, nil, errors.New("UNAVAILABLE: the tools of server " + strconv.Quote(clip.String(in.Server, 128)) +
					" are being indexed; try again shortly")
			}
			if !ok {
				return nil, nil, errors.New("NOT_FOUND: no tool " + clip.String(in.Tool, 128) + " on server " + clip.String(in.Server, 128) +
					"; find one with search_tools")
			}
			res, err := c.call(ctx, lt.Server, lt.Tool.Name, in.Arguments)
			return res, nil, err
		})
	mcpserver.AddTool(c.srv, &mcp.Tool{Name: ToolAnalyze, Description: "Analyze the user's prompt and add the tools it needs to your tool list " +
		"(mode additive, the default) or replace it (mode replacement); your tool list changes (tools/list_changed) only when " +
		"what you see changes."},
		func(ctx context.Context, req *mcp.CallToolRequest, in AnalyzeInput) (*mcp.CallToolResult, AnalyzeOutput, error) {
			l, err := p.current()
			if err != nil {
				return nil, AnalyzeOutput{}, err
			}
			_, a, err := mcpserver.AnalyzePrompt(func() mcpserver.Backend { return l.backend })(ctx, nil,
				mcpserver.AnalyzePromptInput{Prompt: in.Prompt, Context: in.Context, Mode: in.Mode, SessionID: c.id})
			if err != nil {
				return nil, AnalyzeOutput{}, err
			}
			c.startTask(a.RequestID, true)
			// The notification goes before this result (notifyChanged).
			if a.Changed && c.sync() {
				c.notifyChanged(ctx, req.Session)
			}
			out := AnalyzeOutput{AnalyzePromptOutput: a}
			out.Exposed, _ = p.sessions.Exposed(ctx, c.key)
			sort.Strings(out.Exposed)
			c.mu.Lock()
			out.Tools = len(c.shown)
			c.mu.Unlock()
			return nil, out, nil
		})
}

// indexingServer reports whether the server of that name or id waits
// for its first index.
func (p *Proxy) indexingServer(server string) bool {
	ix := p.Indexing()
	if len(ix) == 0 {
		return false
	}
	ids, err := serverIDs(p.cfg.ServerNames)
	for i, name := range p.cfg.ServerNames {
		if slices.Contains(ix, name) && (server == name || err == nil && server == ids[i]) {
			return true
		}
	}
	return slices.Contains(ix, server)
}

// find looks a live tool up by server id or name and tool name.
func (l *live) find(server, tool string) (liveTool, bool) {
	if lt, ok := l.tools[server+"__"+tool]; ok {
		return lt, true
	}
	for _, lt := range l.tools {
		if lt.Server == server && lt.Tool.Name == tool {
			return lt, true
		}
	}
	return liveTool{}, false
}
