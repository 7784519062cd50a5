package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
)

// SearchToolsInput is search_tools' input.
type SearchToolsInput struct {
	Query string `json:"query" jsonschema:"what the tool should do, in words (a prompt or a need)"`
	K     int    `json:"k,omitempty" jsonschema:"how many tools to return, 1-100 (default 10)"`
	// MinConfidence drops tools below this calibrated confidence.
	MinConfidence *float32 `json:"min_confidence,omitempty" jsonschema:"drop tools below this calibrated confidence, 0-1 (default 0: the k best)"`
}

// FoundTool is one tool of a search_tools or route answer.
type FoundTool struct {
	Name string `json:"name" jsonschema:"the tool's MCP name, verbatim"`
	// Server is the server's id; ServerName its verbatim name when it differs.
	Server      string  `json:"server" jsonschema:"the server's id"`
	ServerName  string  `json:"server_name,omitempty" jsonschema:"the server's name as configured, when it differs from its id"`
	Description string  `json:"description,omitempty"`
	Category    string  `json:"category,omitempty"`
	Confidence  float32 `json:"confidence" jsonschema:"calibrated probability that the tool is relevant"`
	Score       float32 `json:"score" jsonschema:"raw fused similarity the confidence comes from"`
	Evidence    string  `json:"evidence,omitempty" jsonschema:"what matched: the nearest example, keyword or pattern"`
}

// SearchToolsOutput is search_tools' answer.
type SearchToolsOutput struct {
	Tools []FoundTool `json:"tools"`
	// RequestID names the search for report_use (empty with learning off).
	RequestID string `json:"request_id,omitempty" jsonschema:"report what you then called with report_use and this id"`
}

// Message is one conversation turn.
type Message struct {
	Role    string `json:"role" jsonschema:"user, assistant or system"`
	Content string `json:"content"`
}

// RouteInput is route's input: RouteRequest's fields.
type RouteInput struct {
	Query          string    `json:"query,omitempty" jsonschema:"the request to route (or give messages)"`
	Messages       []Message `json:"messages,omitempty" jsonschema:"the conversation, oldest first; later turns weigh more"`
	MaxServers     int       `json:"max_servers,omitempty" jsonschema:"most servers returned (default 5)"`
	MaxTools       int       `json:"max_tools,omitempty" jsonschema:"most tools returned (default 20)"`
	MinConfidence  *float32  `json:"min_confidence,omitempty" jsonschema:"confidence threshold, 0-1 (default: the calibrated threshold)"`
	IncludeServers []string  `json:"include_servers,omitempty" jsonschema:"restrict routing to these server ids"`
	ExcludeServers []string  `json:"exclude_servers,omitempty" jsonschema:"never route to these server ids"`
	OnNoMatch      string    `json:"on_no_match,omitempty" jsonschema:"policy when nothing fits: none, meta or all (default: the daemon's)"`
}

// Scored is a scored category or server.
type Scored struct {
	ID         string  `json:"id"`
	Name       string  `json:"name,omitempty"`
	Confidence float32 `json:"confidence"`
	Score      float32 `json:"score"`
	Evidence   string  `json:"evidence,omitempty"`
}

// RouteOutput is route's answer: RouteResponse's fields.
type RouteOutput struct {
	Servers       []Scored    `json:"servers"`
	Tools         []FoundTool `json:"tools"`
	Categories    []Scored    `json:"categories"`
	Reasoning     string      `json:"reasoning,omitempty"`
	Abstained     bool        `json:"abstained" jsonschema:"nothing passed the threshold; applied_policy says what was returned instead"`
	AppliedPolicy string      `json:"applied_policy,omitempty" jsonschema:"none, meta or all, when abstained"`
	PolicyReason  string      `json:"policy_reason,omitempty"`
	// TokensSaved is the share of tool-definition tokens not sent, in percent.
	TokensSaved float32 `json:"tokens_saved_percent" jsonschema:"share of the catalog's tool-definition tokens this answer saves"`
	RequestID   string  `json:"request_id,omitempty" jsonschema:"report what you then called with report_use and this id"`
}

// AnalyzePromptInput is analyze_prompt's input: AnalyzePromptRequest's fields.
type AnalyzePromptInput struct {
	Prompt          string   `json:"prompt" jsonschema:"the user's prompt"`
	Context         string   `json:"context,omitempty" jsonschema:"earlier conversation; weighs less than the prompt"`
	ValidCategories []string `json:"valid_categories,omitempty" jsonschema:"restrict the answer to these category ids"`
	SessionID       string   `json:"session_id,omitempty" jsonschema:"a hub session to apply the answer to"`
	Mode            string   `json:"mode,omitempty" jsonschema:"additive (default) or replacement, with session_id"`
}

// AnalyzePromptOutput is analyze_prompt's answer: AnalyzePromptResponse's fields.
type AnalyzePromptOutput struct {
	Categories        []string `json:"categories"`
	Confidence        float32  `json:"confidence"`
	Reasoning         string   `json:"reasoning,omitempty"`
	Added             []string `json:"added,omitempty" jsonschema:"categories newly exposed in the session"`
	Total             int32    `json:"total,omitempty" jsonschema:"categories exposed in the session after the change"`
	Changed           bool     `json:"changed" jsonschema:"the session's exposure changed"`
	Warning           string   `json:"warning,omitempty"`
	Suggestion        string   `json:"suggestion,omitempty"`
	NextStep          string   `json:"next_step,omitempty"`
	Degraded          bool     `json:"degraded" jsonschema:"answered from keywords because inference failed"`
	IgnoredCategories []string `json:"ignored_categories,omitempty"`
	Scores            []Scored `json:"scores"`
	RequestID         string   `json:"request_id,omitempty" jsonschema:"report what you then called with report_use and this id"`
}

// ToolRef names a tool of a server.
type ToolRef struct {
	Server string `json:"server" jsonschema:"the server's id or name"`
	Name   string `json:"name" jsonschema:"the tool's name on that server"`
}

// ReportUseInput is report_use's input: ReportUseRequest's fields.
type ReportUseInput struct {
	RequestID    string    `json:"request_id,omitempty" jsonschema:"the request_id of the route, search_tools or analyze_prompt answer the calls were for (or give query)"`
	Query        string    `json:"query,omitempty" jsonschema:"the request's text, when there is no request_id; embedded and discarded, never stored"`
	Servers      []string  `json:"servers,omitempty" jsonschema:"the servers the agent called (ids or names)"`
	Tools        []ToolRef `json:"tools,omitempty" jsonschema:"the tools the agent called; their servers count as called"`
	ShownServers []string  `json:"shown_servers,omitempty" jsonschema:"the servers the agent could call, if known"`
}

// ReportUseOutput is report_use's answer: ReportUseResponse's fields.
type ReportUseOutput struct {
	RequestID           string    `json:"request_id" jsonschema:"the stored report's id"`
	Stored              bool      `json:"stored" jsonschema:"false when every name was unknown: nothing was stored"`
	Servers             int32     `json:"servers"`
	Tools               int32     `json:"tools"`
	IgnoredServers      []string  `json:"ignored_servers,omitempty" jsonschema:"names the served catalog does not have: not stored"`
	IgnoredTools        []ToolRef `json:"ignored_tools,omitempty"`
	IgnoredShownServers []string  `json:"ignored_shown_servers,omitempty"`
}

// AddClassifierTools adds search_tools, route, analyze_prompt and
// report_use to s.
func AddClassifierTools(s *mcp.Server, backend func() Backend) {
	AddTool(s, &mcp.Tool{Name: ToolSearch, Description: "Find the tools that fit a need among every tool of every MCP server in the catalog, " +
		"including tools not shown to you, ranked best first with their server, description, calibrated confidence and evidence.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, searchTools(backend))
	AddTool(s, &mcp.Tool{Name: ToolRoute, Description: "Route a request or conversation to the MCP servers and tools it needs, " +
		"with calibrated confidences and the no-match policy (none, meta or all).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, routeTool(backend))
	AddTool(s, &mcp.Tool{Name: ToolAnalyzePrompt, Description: "Analyze a prompt into the tool categories it needs; " +
		"with session_id, widen (additive) or replace that hub session's exposed categories."}, AnalyzePrompt(backend))
	AddTool(s, &mcp.Tool{Name: ToolReportUse, Description: "Report which servers and tools the agent actually called for a request " +
		"(by the request_id of a route, search_tools or analyze_prompt answer, or by its text), so later answers weigh what this " +
		"deployment's agents call. Needs scopes report and route."}, reportUse(backend))
}

func reportUse(backend func() Backend) mcp.ToolHandlerFor[ReportUseInput, ReportUseOutput] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in ReportUseInput) (*mcp.CallToolResult, ReportUseOutput, error) {
		req := &pb.ReportUseRequest{RequestId: in.RequestID, Query: in.Query, Servers: in.Servers, ShownServers: in.ShownServers}
		for _, t := range in.Tools {
			req.Tools = append(req.Tools, &pb.ToolRef{Server: t.Server, Name: t.Name})
		}
		resp, err := backend().Classifier.ReportUse(ctx, req)
		if err != nil {
			return nil, ReportUseOutput{}, ToolError(err)
		}
		out := ReportUseOutput{RequestID: resp.GetRequestId(), Stored: resp.GetStored(), Servers: resp.GetServers(), Tools: resp.GetTools(),
			IgnoredServers: resp.GetIgnoredServers(), IgnoredShownServers: resp.GetIgnoredShownServers()}
		for _, t := range resp.GetIgnoredTools() {
			out.IgnoredTools = append(out.IgnoredTools, ToolRef{Server: t.GetServer(), Name: t.GetName()})
		}
		return nil, out, nil
	}
}

func searchTools(backend func() Backend) mcp.ToolHandlerFor[SearchToolsInput, SearchToolsOutput] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in SearchToolsInput) (*mcp.CallToolResult, SearchToolsOutput, error) {
		b := backend()
		out, err := Search(ctx, b, in)
		if err != nil {
			return nil, SearchToolsOutput{}, err
		}
		return nil, out, nil
	}
}

// Search answers search_tools from b: a Route over every server (so each
// tool keeps the confidence Route gives it) that keeps the k best tools.
func Search(ctx context.Context, b Backend, in SearchToolsInput) (SearchToolsOutput, error) {
	k := in.K
	if k == 0 {
		k = 10
	}
	minConf := in.MinConfidence
	if minConf == nil {
		zero := float32(0)
		minConf = &zero
	}
	resp, err := b.Classifier.Route(ctx, &pb.RouteRequest{Query: in.Query, MaxTools: int32(k), MaxServers: int32(maxServers(b.Index)),
		MinConfidence: minConf, OnNoMatch: pb.NoMatchPolicy_NO_MATCH_POLICY_NONE})
	if err != nil {
		return SearchToolsOutput{}, ToolError(err)
	}
	return SearchToolsOutput{Tools: foundTools(b.Index, resp.GetTools()), RequestID: resp.GetRequestId()}, nil
}

// maxServers is every server of the index, within Route's limit, so a
// search looks at every tool.
func maxServers(idx *index.Index) int {
	return max(1, min(len(idx.LabelsOf(index.KindServer)), 100))
}

func foundTools(idx *index.Index, ts []*pb.ScoredTool) []FoundTool {
	out := make([]FoundTool, 0, len(ts))
	for _, t := range ts {
		out = append(out, FoundTool{Name: t.GetName(), Server: t.GetServer(), ServerName: t.GetServerName(),
			Description: toolDescription(idx, t.GetServer(), t.GetName()), Category: t.GetCategory(),
			Confidence: t.GetConfidence(), Score: t.GetScore(), Evidence: t.GetEvidence()})
	}
	return out
}

func toolDescription(idx *index.Index, server, name string) string {
	for _, li := range idx.LabelsOf(index.KindTool) {
		if l := &idx.Labels[li]; l.Server == server && l.Name == name {
			return l.Description
		}
	}
	return ""
}

var noMatch = map[string]pb.NoMatchPolicy{"": pb.NoMatchPolicy_NO_MATCH_POLICY_UNSPECIFIED, "none": pb.NoMatchPolicy_NO_MATCH_POLICY_NONE,
	"meta": pb.NoMatchPolicy_NO_MATCH_POLICY_META, "all": pb.NoMatchPolicy_NO_MATCH_POLICY_ALL}

var noMatchName = map[pb.NoMatchPolicy]string{pb.NoMatchPolicy_NO_MATCH_POLICY_NONE: "none",
	pb.NoMatchPolicy_NO_MATCH_POLICY_META: "meta", pb.NoMatchPolicy_NO_MATCH_POLICY_ALL: "all"}

func routeTool(backend func() Backend) mcp.ToolHandlerFor[RouteInput, RouteOutput] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in RouteInput) (*mcp.CallToolResult, RouteOutput, error) {
		policy, ok := noMatch[in.OnNoMatch]
		if !ok {
			return nil, RouteOutput{}, ToolError(invalidArgument("on_no_match must be none, meta or all"))
		}
		req := &pb.RouteRequest{Query: in.Query, MaxServers: int32(in.MaxServers), MaxTools: int32(in.MaxTools),
			MinConfidence: in.MinConfidence, IncludeServers: in.IncludeServers, ExcludeServers: in.ExcludeServers, OnNoMatch: policy}
		for _, m := range in.Messages {
			req.Messages = append(req.Messages, &pb.Message{Role: m.Role, Content: m.Content})
		}
		b := backend()
		resp, err := b.Classifier.Route(ctx, req)
		if err != nil {
			return nil, RouteOutput{}, ToolError(err)
		}
		return nil, RouteOutput{Servers: scored(resp.GetServers()), Tools: foundTools(b.Index, resp.GetTools()),
			Categories: scored(resp.GetCategories()), Reasoning: resp.GetReasoning(), Abstained: resp.GetAbstained(),
			AppliedPolicy: noMatchName[resp.GetAppliedPolicy()], PolicyReason: resp.GetPolicyReason(),
			TokensSaved: resp.GetStats().GetReductionPercent(), RequestID: resp.GetRequestId()}, nil
	}
}

// AnalyzePrompt is analyze_prompt's handler; the proxy wraps it to bind
// the session.
func AnalyzePrompt(backend func() Backend) mcp.ToolHandlerFor[AnalyzePromptInput, AnalyzePromptOutput] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in AnalyzePromptInput) (*mcp.CallToolResult, AnalyzePromptOutput, error) {
		resp, err := backend().Classifier.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: in.Prompt, Context: in.Context,
			ValidCategories: in.ValidCategories, SessionId: in.SessionID, Mode: in.Mode})
		if err != nil {
			return nil, AnalyzePromptOutput{}, ToolError(err)
		}
		return nil, AnalyzePromptOutput{Categories: resp.GetCategories(), Confidence: resp.GetConfidence(), Reasoning: resp.GetReasoning(),
			Added: resp.GetAdded(), Total: resp.GetTotal(), Changed: resp.GetChanged(), Warning: resp.GetWarning(),
			Suggestion: resp.GetSuggestion(), NextStep: resp.GetNextStep(), Degraded: resp.GetDegraded(),
			IgnoredCategories: resp.GetIgnoredCategories(), Scores: scored(resp.GetScores()), RequestID: resp.GetRequestId()}, nil
	}
}

func scored(ls []*pb.ScoredLabel) []Scored {
	out := make([]Scored, 0, len(ls))
	for _, l := range ls {
		out = append(out, Scored{ID: l.GetId(), Name: l.GetName(), Confidence: l.GetConfidence(), Score: l.GetScore(), Evidence: l.GetEvidence()})
	}
	return out
}
