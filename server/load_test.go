package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/classifierd/classifierd/catalog"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/request"
)

// TestSwapServesTheNewIndexAndReportsLoads swaps in an index with another
// tool and checks Route sees it, and GetIndexInfo reports generation,
// source, reason, the last refused reload and the live sources.
func TestSwapServesTheNewIndexAndReportsLoads(t *testing.T) {
	dom, err := NewDomain(testIndex(t), bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	sync := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
	srv, err := New(Config{Source: "file a.idx", Sources: func() []SourceStatus {
		return []SourceStatus{{Name: "Weather API", ID: "weather_api", Tools: 2, Degraded: true, LastError: "session ended", LastSync: sync}}
	}}, dom, bagOfWords{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c := pb.NewClassifierServiceClient(dial(t, func(gs *grpc.Server) { pb.RegisterClassifierServiceServer(gs, srv) }))
	ctx := context.Background()
	info, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l := info.GetLoad(); l.GetGeneration() != 1 || l.GetSource() != "file a.idx" || l.GetReason() != "start" || l.GetLastRefused() != "" {
		t.Errorf("first load = %+v, want generation 1 from file a.idx at start, nothing refused", l)
	}
	toolsBefore := info.GetTools()
	if ms := info.GetMcpServers(); len(ms) != 1 || ms[0].GetName() != "Weather API" || !ms[0].GetDegraded() || ms[0].GetTools() != 2 ||
		!ms[0].GetLastSync().AsTime().Equal(sync) {
		t.Errorf("mcp_servers = %+v, want the degraded Weather API with 2 tools", ms)
	}

	cat, err := catalog.Parse([]byte(strings.Replace(testCatalog, `"tools": [{"name": "list_notifications", "description": "list github notifications"}]`,
		`"tools": [{"name": "list_notifications", "description": "list github notifications"}, {"name": "merge_pull_request", "description": "merge a pull request"}]`, 1)), "")
	if err != nil {
		t.Fatal(err)
	}
	idx2, err := labels.Embed(ctx, cat, bagOfWords{}, labels.Model{Name: "bow", Fingerprint: "f", Dims: fakeDims}, labels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dom2, err := NewDomain(idx2, bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	srv.Refused("index b.idx: bad magic")
	if l := srv.Swap(dom2, "file b.idx", "sighup"); l.Generation != 2 {
		t.Errorf("Swap generation = %d, want 2", l.Generation)
	}
	res, err := c.Route(ctx, &pb.RouteRequest{Query: "merge the pull request", MaxTools: 3})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range res.GetTools() {
		found = found || tool.GetName() == "merge_pull_request"
	}
	if !found {
		t.Errorf("after Swap, Route tools = %v, want merge_pull_request among them", res.GetTools())
	}
	info, err = c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l := info.GetLoad(); l.GetGeneration() != 2 || l.GetSource() != "file b.idx" || l.GetReason() != "sighup" ||
		!strings.Contains(l.GetLastRefused(), "bad magic") || l.GetLastRefusedAt() == nil || info.GetTools() != toolsBefore+1 {
		t.Errorf("after Swap: load = %+v, tools %d; want generation 2 from b.idx, the refusal, %d tools", l, info.GetTools(), toolsBefore+1)
	}
}
