// Package client is the smart-routing client for Go agents: given the
// agent's tools and conversation, it asks classifierd which servers and
// tools are relevant and hands the agent only those, falling back to all
// tools whenever routing fails, so routing can only ever save tokens and
// never break a turn.
//
// Routing turns on only when the agent has more than Config.MaxTools tools
// and more than Config.MaxServers servers; with fewer, every tool fits in
// the prompt anyway. It routes once per conversation and reuses the answer
// on later turns until Refresh. ConfigFromEnv reads these settings from the
// environment variables agents use today (ENABLE_SMART_ROUTING,
// SMART_ROUTING_MAX_TOOLS, SMART_ROUTING_MAX_SERVERS), as the Python and
// Node.js clients do.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// Tool is one of the agent's tools.
type Tool struct {
	Name        string
	Server      string
	Description string
	InputSchema json.RawMessage
}

// Message is one conversation turn, oldest first.
type Message struct {
	Role    string // user, assistant, system or tool
	Content string
}

// Event reports a routing decision to the agent's own event system.
type Event struct {
	Kind            string // "start" or "end"
	ConversationID  string
	TotalTools      int
	FilteredTools   int
	Servers         int
	RelevantServers []string
	Reasoning       string
	Duration        time.Duration
	Success         bool
	Fallback        bool
	Err             error
}

// Config tunes a Router. Zero values take the defaults; ConfigFromEnv
// builds one from the environment.
type Config struct {
	// Disabled turns routing off: FilterTools returns every tool without a
	// call (ENABLE_SMART_ROUTING=false).
	Disabled bool
	// MaxTools: route only when the agent has more tools than this (default 30).
	MaxTools int
	// MaxServers: ... and more servers than this (default 4).
	MaxServers int
	// Timeout bounds one Route call (default 2s).
	Timeout time.Duration
	// MaxResultTools and MaxResultServers are passed to Route (0: server default).
	MaxResultTools, MaxResultServers int
	// MaxConversations bounds the per-conversation cache (default 1000).
	MaxConversations int
	// OnEvent receives a start and an end event for every routing call.
	OnEvent func(Event)
}

// Result is the tools to show the model for this turn.
type Result struct {
	Tools           []Tool
	RelevantServers []string
	Reasoning       string
	// Routed is false when routing is disabled or the agent is below the
	// thresholds (all tools returned, no call made).
	Routed bool
	// Cached is true when the answer was reused from an earlier turn.
	Cached bool
	// Fallback is true when routing failed and all tools were returned; Err says why.
	Fallback bool
	Err      error
}

type cached struct {
	servers   []string
	tools     map[string]bool // server/name
	reasoning string
}

// Router filters an agent's tools through classifierd. It is safe for
// concurrent use.
type Router struct {
	cfg   Config
	cl    pb.ClassifierServiceClient
	mu    sync.Mutex
	cache map[string]*cached
	order []string // insertion order, for eviction
}

// New returns a Router that calls classifierd over conn.
func New(conn grpc.ClientConnInterface, cfg Config) *Router {
	if cfg.MaxTools <= 0 {
		cfg.MaxTools = 30
	}
	if cfg.MaxServers <= 0 {
		cfg.MaxServers = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.MaxConversations <= 0 {
		cfg.MaxConversations = 1000
	}
	return &Router{cfg: cfg, cl: pb.NewClassifierServiceClient(conn), cache: map[string]*cached{}}
}

// ErrNoConversation reports an empty conversation.
var ErrNoConversation = errors.New("client: conversation has no message")

// FilterTools returns the tools relevant to the conversation. It sends the
// whole conversation (the server weighs the turns); on any error or timeout
// it returns all tools with Fallback set and a nil error, so the agent's
// turn goes on. The answer is cached per conversationID until Refresh.
func (r *Router) FilterTools(ctx context.Context, conversationID string, conversation []Message, tools []Tool) (Result, error) {
	servers := map[string]bool{}
	for _, t := range tools {
		servers[t.Server] = true
	}
	if r.cfg.Disabled || len(tools) <= r.cfg.MaxTools || len(servers) <= r.cfg.MaxServers {
		return Result{Tools: tools}, nil
	}
	if len(conversation) == 0 {
		return Result{}, ErrNoConversation
	}
	if c := r.lookup(conversationID); c != nil {
		res := apply(c, tools)
		res.Cached = true
		return res, nil
	}
	r.emit(Event{Kind: "start", ConversationID: conversationID, TotalTools: len(tools), Servers: len(servers)})
	start := time.Now()
	c, err := r.route(ctx, conversation)
	end := Event{Kind: "end", ConversationID: conversationID, TotalTools: len(tools), Servers: len(servers), Duration: time.Since(start)}
	if err != nil {
		end.FilteredTools, end.Fallback, end.Err = len(tools), true, err
		r.emit(end)
		return Result{Tools: tools, Routed: true, Fallback: true, Err: err}, nil
	}
	r.store(conversationID, c)
	res := apply(c, tools)
	end.FilteredTools, end.RelevantServers, end.Reasoning, end.Success = len(res.Tools), res.RelevantServers, res.Reasoning, true
	r.emit(end)
	return res, nil
}

func (r *Router) emit(e Event) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

func (r *Router) route(ctx context.Context, conversation []Message) (*cached, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req := &pb.RouteRequest{MaxServers: int32(r.cfg.MaxResultServers), MaxTools: int32(r.cfg.MaxResultTools),
		OnNoMatch: pb.NoMatchPolicy_NO_MATCH_POLICY_ALL}
	for _, m := range conversation {
		req.Messages = append(req.Messages, &pb.Message{Role: m.Role, Content: m.Content})
	}
	resp, err := r.cl.Route(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: route: %w", err)
	}
	c := &cached{tools: map[string]bool{}, reasoning: resp.GetReasoning()}
	if resp.GetAbstained() {
		// The server applied policy ALL: nothing specific fits, so keep everything.
		c.tools = nil
		return c, nil
	}
	for _, s := range resp.GetServers() {
		c.servers = append(c.servers, s.GetId())
	}
	for _, t := range resp.GetTools() {
		c.tools[t.GetServer()+"/"+t.GetName()] = true
	}
	return c, nil
}

// apply keeps the agent's tools that the answer names; for a relevant
// server whose tools the daemon does not know by name (the agent's catalog
// may differ), it keeps all of that server's tools.
func apply(c *cached, tools []Tool) Result {
	res := Result{Routed: true, RelevantServers: c.servers, Reasoning: c.reasoning}
	if c.tools == nil {
		res.Tools = tools
		return res
	}
	matched := map[string]bool{}
	for _, t := range tools {
		if c.tools[t.Server+"/"+t.Name] {
			res.Tools = append(res.Tools, t)
			matched[t.Server] = true
		}
	}
	relevant := map[string]bool{}
	for _, s := range c.servers {
		relevant[s] = true
	}
	for _, t := range tools {
		if relevant[t.Server] && !matched[t.Server] {
			res.Tools = append(res.Tools, t)
		}
	}
	return res
}

func (r *Router) lookup(id string) *cached {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache[id]
}

func (r *Router) store(id string, c *cached) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache[id]; !ok {
		r.order = append(r.order, id)
	}
	r.cache[id] = c
	for len(r.cache) > r.cfg.MaxConversations && len(r.order) > 0 {
		delete(r.cache, r.order[0])
		r.order = r.order[1:]
	}
}

// Refresh forgets the cached answer of a conversation, so the next
// FilterTools routes again (for example after a topic change).
func (r *Router) Refresh(conversationID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cache, conversationID)
	for i, id := range r.order {
		if id == conversationID {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}
