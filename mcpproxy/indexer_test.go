package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/mcpsrc"
	"github.com/classifierd/classifierd/session"
)

// countingEmbedder is testindex's bag-of-words embedder that counts the
// texts it embeds (label texts only: the proxy's queries go through
// Config.Embedder) and, while block is set, holds each call with a text
// holding "zzslow" until block is closed.
type countingEmbedder struct {
	mu    sync.Mutex
	texts int
	calls []int // texts of each call
	block chan struct{}
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	block := c.block
	c.mu.Unlock()
	if block != nil && strings.Contains(strings.Join(texts, " "), "zzslow") {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.mu.Lock()
	c.texts += len(texts)
	c.calls = append(c.calls, len(texts))
	c.mu.Unlock()
	return testindex.Embedder{Dims: 64}.Embed(ctx, texts)
}

func (c *countingEmbedder) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.texts
}

// liveSource is a Source whose tools the test sets; each set closes the
// previous snapshot's Changed, as mcpsrc.Pool does.
type liveSource struct {
	mu   sync.Mutex
	snap mcpsrc.Snapshot
	ch   chan struct{} // snap.Changed
}

func (s *liveSource) Snapshot() mcpsrc.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

func (s *liveSource) set(servers ...mcpsrc.ServerState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range servers {
		servers[i].Listed, servers[i].Connected = true, true
	}
	old := s.ch
	s.ch = make(chan struct{})
	s.snap = mcpsrc.Snapshot{Version: s.snap.Version + 1, Servers: servers, Changed: s.ch}
	if old != nil {
		close(old)
	}
}

func (s *liveSource) CallTool(_ context.Context, server string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + p.Name}}}, nil
}

func tools(prefix, desc string, n int) []*mcp.Tool {
	var out []*mcp.Tool
	for i := range n {
		out = append(out, &mcp.Tool{Name: fmt.Sprintf("%s%d", prefix, i), Description: fmt.Sprintf("%s %d", desc, i),
			InputSchema: map[string]any{"type": "object"}})
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLiveProxy(t *testing.T, src Source, emb *countingEmbedder, names []string, log *slog.Logger) *Proxy {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	px, err := New(context.Background(), Config{Source: src, Embedder: testindex.Embedder{Dims: 64}, LabelEmbedder: emb,
		Model: labels.Model{Name: "bow", Fingerprint: "f", Dims: 64}, ServerNames: names,
		Sessions: session.Config{DefaultExposure: session.ExposeMetaOnly}, Logger: log, MinReindex: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px
}

// eventually polls cond until it holds; failing after a minute is only a
// guard against a hang, not a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBackendToolsBounded: a backend listing more tools than
// MaxToolsPerServer has the bound indexed and a warning naming it; tool
// names outside the MCP specification's set, holding the proxy's "__" or
// too long once exposed are left out with a warning (their names quoted
// and clipped); descriptions are clipped to MaxEmbedText in the index;
// a legitimate name (dots, dashes) stays exposed.
func TestBackendToolsBounded(t *testing.T) {
	big := tools("t", "a tool of the big server", MaxToolsPerServer+10)
	bad := []string{"nul\x00x", "esc\x1b[31mred", "bidi\u202eexe.txt", "../../etc/passwd", "a__b", "${identity}", "spaces in name",
		"", strings.Repeat("x", MaxToolName)}
	var odd []*mcp.Tool
	for _, n := range bad {
		odd = append(odd, &mcp.Tool{Name: n, Description: "odd"})
	}
	odd = append(odd, &mcp.Tool{Name: "get-thing.v2", Description: strings.Repeat("long words ", 1000)})
	src := &liveSource{}
	src.set(mcpsrc.ServerState{Name: "big", Tools: big}, mcpsrc.ServerState{Name: "odd", Tools: odd})
	logs := &syncBuffer{}
	px := newLiveProxy(t, src, &countingEmbedder{}, []string{"big", "odd"}, slog.New(slog.NewTextHandler(logs, nil)))
	if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	l, err := px.current()
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	perServer := map[string]int{}
	for name, lt := range l.tools {
		perServer[lt.Server]++
		if !valid.MatchString(name) || strings.Contains(lt.Tool.Name, "__") {
			t.Errorf("exposed %q", name)
		}
	}
	if perServer["big"] != MaxToolsPerServer || perServer["odd"] != 1 {
		t.Fatalf("indexed per server %v, want big %d (the bound) and odd 1 (get-thing.v2)", perServer, MaxToolsPerServer)
	}
	if _, ok := l.tools["big__t0"]; !ok {
		t.Fatal("big's first tool not indexed: the first tools listed are kept")
	}
	if _, ok := l.tools["odd__get-thing.v2"]; !ok {
		t.Fatal("a legitimate name with a dot and a dash left out")
	}
	for _, lb := range l.backend.Index.Labels {
		for _, text := range lb.Texts {
			if len(text) > MaxEmbedText+200 {
				t.Errorf("label %s embeds a text of %d bytes, over MaxEmbedText %d", lb.ID, len(text), MaxEmbedText)
			}
		}
	}
	out := logs.String()
	for _, want := range []string{`server \"big\" lists more than 500 tools: the 10 past them`, `nul\\x00x`, `\\x1b[31mred`,
		`bidi\\u202eexe.txt`, `holds the proxy's separator`, `name is blank`, `is over 128 characters`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(out, "\x00") || strings.Contains(out, "\x1b") || strings.Contains(out, "\u202e") {
		t.Error("a control character or bidi override reached the log")
	}
}

// TestServesWhileIndexing: a backend whose texts take long to embed
// delays neither the callers nor the tools of the backends indexed; until
// its first index is ready search_tools says it is indexing and call_tool
// of its tools answers UNAVAILABLE, and then its tools are found.
func TestServesWhileIndexing(t *testing.T) {
	emb := &countingEmbedder{block: make(chan struct{})}
	src := &liveSource{}
	src.set(mcpsrc.ServerState{Name: "notes", Tools: tools("note", "write a note", 2)})
	px := newLiveProxy(t, src, emb, []string{"notes", "slow"}, nil)
	if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
		t.Fatal(err)
	}
	src.set(mcpsrc.ServerState{Name: "notes", Tools: tools("note", "write a note", 2)},
		mcpsrc.ServerState{Name: "slow", Tools: tools("lag", "zzslow tool", 3)})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); px.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	cs := connect(t, px, make(chan struct{}, 8))
	search := func() (SearchOutput, bool) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolSearch, Arguments: map[string]any{"query": "write a note"}})
		if err != nil {
			t.Fatal(err)
		}
		var out SearchOutput
		if res.IsError {
			return out, false
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out, true
	}
	var out SearchOutput
	eventually(t, "slow offered for indexing", func() bool {
		var ok bool
		out, ok = search()
		return ok && len(out.Indexing) > 0
	})
	if len(out.Tools) == 0 || len(out.Indexing) != 1 || out.Indexing[0] != "slow" {
		t.Fatalf("found %d tools, indexing %v; want notes' tools, [slow]", len(out.Tools), out.Indexing)
	}
	for _, ft := range out.Tools {
		if ft.Server != "notes" {
			t.Fatalf("found %+v before slow's index is ready", ft)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCall,
		Arguments: map[string]any{"server": "slow", "tool": "lag0"}})
	if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), "UNAVAILABLE") ||
		!strings.Contains(fmt.Sprint(res.Content[0]), "being indexed") {
		t.Fatalf("call_tool of a tool being indexed: %v %+v, want UNAVAILABLE ... being indexed", err, res)
	}
	close(emb.block)
	eventually(t, "slow indexed", func() bool { return len(px.Indexing()) == 0 })
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolCall,
		Arguments: map[string]any{"server": "slow", "tool": "lag0"}})
	if err != nil || res.IsError {
		t.Fatalf("call_tool once indexed: %v %+v %s", err, res, res.Content[0].(*mcp.TextContent).Text)
	}
}

// TestListChangedStormIndexedOnce: a backend changing its tools 50 times
// while its last index is younger than MinReindex is indexed once more
// when the interval has passed, with its latest listing; the listings in
// between embed nothing.
func TestListChangedStormIndexedOnce(t *testing.T) {
	emb := &countingEmbedder{}
	src := &liveSource{}
	listing := func(gen int) mcpsrc.ServerState {
		return mcpsrc.ServerState{Name: "storm", Tools: tools("t", fmt.Sprintf("generation %d of the tool", gen), 5)}
	}
	src.set(listing(0))
	px := newLiveProxy(t, src, emb, []string{"storm"}, nil)
	slept, release := make(chan time.Duration), make(chan struct{})
	px.sleep = func(ctx context.Context, d time.Duration) bool {
		slept <- d
		select {
		case <-release:
			return true
		case <-ctx.Done():
			return false
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); px.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	eventually(t, "the first index", px.Indexed)
	first := emb.count()
	for gen := 1; gen <= 50; gen++ {
		src.set(listing(gen))
	}
	px.mu.Lock()
	b := px.backends["storm"]
	px.mu.Unlock()
	// The worker waits out MinReindex (an hour here).
	if d := <-slept; d < 59*time.Minute {
		t.Fatalf("waits %v, want about MinReindex", d)
	}
	eventually(t, "the latest listing offered", func() bool {
		px.mu.Lock()
		defer px.mu.Unlock()
		return strings.Contains(b.want.state.Tools[0].Description, "generation 50 ")
	})
	px.mu.Lock()
	indexes := b.indexes
	px.mu.Unlock()
	if emb.count() != first || indexes != 1 {
		t.Fatalf("during the interval: %d texts embedded after the first %d, %d indexes; want none more, 1", emb.count()-first, first, indexes)
	}
	// The interval passes.
	px.mu.Lock()
	b.last = time.Now().Add(-2 * time.Hour)
	px.mu.Unlock()
	close(release)
	eventually(t, "the latest listing indexed", func() bool {
		l, err := px.current()
		return err == nil && strings.Contains(l.tools["storm__t0"].Tool.Description, "generation 50 ")
	})
	eventually(t, "the worker done", func() bool {
		px.mu.Lock()
		defer px.mu.Unlock()
		return !b.busy
	})
	px.mu.Lock()
	indexes = b.indexes
	px.mu.Unlock()
	// 5 tool texts and 5 examples changed; the category and server texts
	// are cached.
	if got := emb.count() - first; indexes != 2 || got != 10 {
		t.Fatalf("after the storm: %d indexes, %d texts embedded; want 2 and 10 (the latest listing's new texts)", indexes, got)
	}
}

// TestUnchangedTextsNotEmbedded: a backend listing again texts it listed
// before (one description changed, or a listing it had earlier) embeds
// only the texts not seen.
func TestUnchangedTextsNotEmbedded(t *testing.T) {
	emb := &countingEmbedder{}
	src := &liveSource{}
	a := tools("t", "find the weather for a city", 20)
	src.set(mcpsrc.ServerState{Name: "weather", Tools: a})
	px := newLiveProxy(t, src, emb, []string{"weather"}, nil)
	rebuild := func() int {
		t.Helper()
		before := emb.count()
		if err := px.Rebuild(context.Background(), src.Snapshot()); err != nil {
			t.Fatal(err)
		}
		return emb.count() - before
	}
	if n := rebuild(); n != 42 { // 20 tools, 20 examples, the category and the server
		t.Fatalf("first index embedded %d texts, want 42", n)
	}
	b := tools("t", "find the weather for a city", 20)
	b[7] = &mcp.Tool{Name: "t7", Description: "the forecast for the next days"}
	src.set(mcpsrc.ServerState{Name: "weather", Tools: b})
	if n := rebuild(); n != 2 {
		t.Fatalf("one description changed: %d texts embedded, want 2 (its tool text and example)", n)
	}
	src.set(mcpsrc.ServerState{Name: "weather", Tools: a})
	if n := rebuild(); n != 0 {
		t.Fatalf("the earlier listing again: %d texts embedded, want 0", n)
	}
}

// TestEmbedBudget: a backend's budget refills at its pace and a listing
// with more new texts than it holds waits for them.
func TestEmbedBudget(t *testing.T) {
	var b backend
	now := time.Unix(1_700_000_000, 0)
	if w := b.spend(8, 10, 60, now); w != 0 {
		t.Fatalf("a full budget: wait %v", w)
	}
	if w := b.spend(8, 10, 60, now); w != 6*time.Second {
		t.Fatalf("2 left, 8 wanted at 60 a minute: wait %v, want 6s", w)
	}
	if w := b.spend(8, 10, 60, now.Add(6*time.Second)); w != 0 {
		t.Fatalf("after the wait: %v", w)
	}
	if w := b.spend(100, 10, 60, now.Add(time.Hour)); w != 0 {
		t.Fatalf("more than the burst when full: wait %v (a listing over the burst takes it all)", w)
	}
}

// TestEmbedGateCallersFirst: a background embedding does not start while
// a caller's is in flight, and runs in batches of bgBatch.
func TestEmbedGateCallersFirst(t *testing.T) {
	g := newEmbedGate()
	var mu sync.Mutex
	var bgCalls []int
	hold := make(chan struct{})
	inFlight := make(chan struct{})
	fg := g.foreground(embedFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		close(inFlight)
		<-hold
		return make([][]float32, len(texts)), nil
	}))
	bg := g.background(embedFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		mu.Lock()
		bgCalls = append(bgCalls, len(texts))
		mu.Unlock()
		return make([][]float32, len(texts)), nil
	}))
	go func() { _, _ = fg.Embed(context.Background(), []string{"query"}) }()
	<-inFlight
	done := make(chan error)
	go func() {
		vecs, err := bg.Embed(context.Background(), make([]string, 2*bgBatch+1))
		if err == nil && len(vecs) != 2*bgBatch+1 {
			err = fmt.Errorf("%d vectors", len(vecs))
		}
		done <- err
	}()
	eventually(t, "the background batch waits", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waited == 1
	})
	mu.Lock()
	n := len(bgCalls)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d background batches ran while a caller's embedding was in flight", n)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bgCalls) != fmt.Sprint([]int{bgBatch, bgBatch, 1}) {
		t.Fatalf("background batches %v, want %d, %d, 1", bgCalls, bgBatch, bgBatch)
	}
}

type embedFunc func(ctx context.Context, texts []string) ([][]float32, error)

func (f embedFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}
