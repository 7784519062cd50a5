package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/testdaemon"
	"github.com/classifierd/classifierd/internal/testgrpc"
)

// fakeServer is a scripted ClassifierService for unit tests.
type fakeServer struct {
	pb.UnimplementedClassifierServiceServer
	mu     sync.Mutex
	calls  int
	last   *pb.RouteRequest
	block  bool
	err    error
	answer *pb.RouteResponse
}

func (f *fakeServer) Route(ctx context.Context, req *pb.RouteRequest) (*pb.RouteResponse, error) {
	f.mu.Lock()
	f.calls++
	f.last = req
	block, err, ans := f.block, f.err, f.answer
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		return nil, err
	}
	return ans, nil
}

func startFake(t testing.TB, f *fakeServer) *grpc.ClientConn {
	t.Helper()
	s := grpc.NewServer()
	pb.RegisterClassifierServiceServer(s, f)
	return testgrpc.Serve(t, s)
}

// agentTools is 6 servers x 6 tools = 36 tools: above both default thresholds.
func agentTools(servers, per int) []Tool {
	var out []Tool
	for s := 0; s < servers; s++ {
		for i := 0; i < per; i++ {
			out = append(out, Tool{Name: fmt.Sprintf("tool%d", i), Server: fmt.Sprintf("srv%d", s)})
		}
	}
	return out
}

var conversation = []Message{{Role: "user", Content: "check srv1"}, {Role: "assistant", Content: "done"}, {Role: "user", Content: "and srv1 again"}}

func githubAnswer() *pb.RouteResponse {
	return &pb.RouteResponse{Servers: []*pb.ScoredLabel{{Id: "srv1", Confidence: 0.9}},
		Tools:     []*pb.ScoredTool{{Name: "tool0", Server: "srv1"}, {Name: "tool3", Server: "srv1"}},
		Reasoning: "srv1 0.90"}
}

func TestThresholds(t *testing.T) {
	f := &fakeServer{answer: githubAnswer()}
	r := New(startFake(t, f), Config{})
	cases := []struct {
		name       string
		tools      []Tool
		wantRouted bool
	}{
		{"few tools", agentTools(6, 5), false},    // 30 tools: not more than 30
		{"few servers", agentTools(4, 10), false}, // 4 servers: not more than 4
		{"many of both", agentTools(5, 7), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.FilterTools(context.Background(), tc.name, conversation, tc.tools)
			if err != nil {
				t.Fatal(err)
			}
			if res.Routed != tc.wantRouted {
				t.Fatalf("routed = %v, want %v", res.Routed, tc.wantRouted)
			}
			if !tc.wantRouted && len(res.Tools) != len(tc.tools) {
				t.Fatalf("got %d tools, want all %d", len(res.Tools), len(tc.tools))
			}
		})
	}
	if f.calls != 1 {
		t.Fatalf("%d Route calls, want 1", f.calls)
	}
	r2 := New(startFake(t, f), Config{MaxTools: 5, MaxServers: 1})
	if res, _ := r2.FilterTools(context.Background(), "c", conversation, agentTools(2, 3)); !res.Routed {
		t.Fatal("custom thresholds not applied")
	}
}

func TestFilterAndCache(t *testing.T) {
	f := &fakeServer{answer: githubAnswer()}
	var events []Event
	r := New(startFake(t, f), Config{OnEvent: func(e Event) { events = append(events, e) }})
	tools := agentTools(6, 6)
	res, err := r.FilterTools(context.Background(), "conv-1", conversation, tools)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 2 || res.Tools[0].Server != "srv1" || !slices.Equal(res.RelevantServers, []string{"srv1"}) || res.Fallback {
		t.Fatalf("got %+v", res)
	}
	if len(f.last.GetMessages()) != len(conversation) || f.last.GetMessages()[2].GetContent() != "and srv1 again" {
		t.Fatalf("conversation not forwarded whole: %v", f.last.GetMessages())
	}
	if len(events) != 2 || events[0].Kind != "start" || events[1].Kind != "end" || !events[1].Success ||
		events[1].FilteredTools != 2 || events[1].TotalTools != 36 || events[1].Servers != 6 || events[1].Reasoning != "srv1 0.90" {
		t.Fatalf("events %+v", events)
	}
	// Later turns reuse the answer without calling the server.
	longer := append(slices.Clone(conversation), Message{Role: "user", Content: "now something else"})
	res, _ = r.FilterTools(context.Background(), "conv-1", longer, tools)
	if !res.Cached || f.calls != 1 || len(res.Tools) != 2 {
		t.Fatalf("second turn: %+v, calls %d", res, f.calls)
	}
	r.Refresh("conv-1")
	res, _ = r.FilterTools(context.Background(), "conv-1", longer, tools)
	if res.Cached || f.calls != 2 {
		t.Fatalf("after refresh: cached=%v calls=%d", res.Cached, f.calls)
	}
	if len(f.last.GetMessages()) != 4 {
		t.Fatalf("refresh sent %d messages", len(f.last.GetMessages()))
	}
}

func TestUnknownToolNamesKeepServer(t *testing.T) {
	f := &fakeServer{answer: &pb.RouteResponse{Servers: []*pb.ScoredLabel{{Id: "srv2"}},
		Tools: []*pb.ScoredTool{{Name: "not_in_agent", Server: "srv2"}}}}
	r := New(startFake(t, f), Config{})
	res, _ := r.FilterTools(context.Background(), "c", conversation, agentTools(6, 6))
	if len(res.Tools) != 6 {
		t.Fatalf("got %d tools, want srv2's 6", len(res.Tools))
	}
	for _, tl := range res.Tools {
		if tl.Server != "srv2" {
			t.Fatalf("tool of %s", tl.Server)
		}
	}
}

func TestFallback(t *testing.T) {
	cases := []struct {
		name string
		f    *fakeServer
		cfg  Config
		want codes.Code
	}{
		{"server error", &fakeServer{err: status.Error(codes.Unavailable, "down")}, Config{}, codes.Unavailable},
		{"timeout", &fakeServer{block: true}, Config{Timeout: 50 * time.Millisecond}, codes.DeadlineExceeded},
		{"abstained", &fakeServer{answer: &pb.RouteResponse{Abstained: true, AppliedPolicy: pb.NoMatchPolicy_NO_MATCH_POLICY_ALL}}, Config{}, codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var end Event
			tc.cfg.OnEvent = func(e Event) {
				if e.Kind == "end" {
					end = e
				}
			}
			r := New(startFake(t, tc.f), tc.cfg)
			tools := agentTools(6, 6)
			start := time.Now()
			res, err := r.FilterTools(context.Background(), "c", conversation, tools)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != len(tools) {
				t.Fatalf("got %d tools, want all %d", len(res.Tools), len(tools))
			}
			if tc.want == codes.OK {
				if res.Fallback || !end.Success {
					t.Fatalf("abstain is not a failure: %+v", res)
				}
				return
			}
			if !res.Fallback || status.Code(errors.Unwrap(res.Err)) != tc.want || !end.Fallback || end.Err == nil || end.Success {
				t.Fatalf("res %+v end %+v", res, end)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatal("timeout not enforced")
			}
		})
	}
}

func TestEmptyConversation(t *testing.T) {
	r := New(startFake(t, &fakeServer{}), Config{})
	if _, err := r.FilterTools(context.Background(), "c", nil, agentTools(6, 6)); !errors.Is(err, ErrNoConversation) {
		t.Fatalf("got %v", err)
	}
}

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// TestRealDaemon filters a GitHub question through the real classifierd.
func TestRealDaemon(t *testing.T) {
	idx := testdaemon.GenIndex(t, testdaemon.DefaultCatalog())
	addr := testdaemon.FreeAddr(t)
	testdaemon.Start(t, append([]string{"--index", idx}, testdaemon.Args(t, addr)...)...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var tools []Tool
	for _, s := range []string{"github", "filesystem", "slack", "docker", "postgres", "memory"} {
		for i := 0; i < 6; i++ {
			tools = append(tools, Tool{Name: fmt.Sprintf("%s_tool_%d", s, i), Server: s})
		}
	}
	tools = append(tools, Tool{Name: "list_notifications", Server: "github"})
	r := New(conn, Config{Timeout: 10 * time.Second})
	var res Result
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		res, _ = r.FilterTools(context.Background(), fmt.Sprint(time.Now().UnixNano()), []Message{{Role: "user", Content: "Check my GitHub notifications"}}, tools)
		if !res.Fallback {
			break
		}
	}
	if res.Fallback || len(res.Tools) == 0 || len(res.Tools) >= len(tools) {
		t.Fatalf("got %d of %d tools (fallback=%v, err=%v)", len(res.Tools), len(tools), res.Fallback, res.Err)
	}
	if res.Tools[0].Server != "github" || res.Tools[0].Name != "list_notifications" {
		t.Fatalf("first tool %+v, want github/list_notifications", res.Tools[0])
	}
}
