package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/server/auth"
)

// learningClient serves ClassifierService with a learner behind the
// token-file authentication of the daemon: "hub" may route and report,
// "router" only route, "admin" everything.
func learningClient(t *testing.T, cfg learn.Config) (pb.ClassifierServiceClient, map[string]context.Context) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte("hub route,report hub-token-0123456789\nrouter route router-token-0123456789\nadmin * admin-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	l, err := learn.New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx := testIndex(t)
	dom, err := NewDomainConfig(idx, bagOfWords{}, DomainConfig{Limits: request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4}, Learned: l.View(idx)})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{MaxEmbedBatch: 2, Learner: l}, dom, bagOfWords{}, log)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	au, as := AuthConfig{Tokens: toks}.interceptors(func(string, codes.Code) {})
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(au), grpc.ChainStreamInterceptor(as))
	pb.RegisterClassifierServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctxs := map[string]context.Context{}
	for _, who := range []string{"hub", "router", "admin"} {
		ctxs[who] = metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+who+"-token-0123456789")
	}
	return pb.NewClassifierServiceClient(conn), ctxs
}

func TestReportUse(t *testing.T) {
	c, as := learningClient(t, learn.Config{Rate: 1e-9, Burst: 3})
	hub := as["hub"]
	rt, err := c.Route(hub, &pb.RouteRequest{Query: "check github notifications"})
	if err != nil {
		t.Fatal(err)
	}
	if rt.GetRequestId() == "" {
		t.Fatal("Route returned no request_id")
	}
	many := make([]string, learn.MaxNames+1)
	for i := range many {
		many[i] = "github"
	}
	tests := []struct {
		name string
		ctx  context.Context
		req  *pb.ReportUseRequest
		code codes.Code
	}{
		{"by request id", hub, &pb.ReportUseRequest{RequestId: rt.GetRequestId(), Servers: []string{"github", "nope"},
			Tools: []*pb.ToolRef{{Server: "filesystem", Name: "read_file"}}}, codes.OK},
		{"by query", hub, &pb.ReportUseRequest{Query: "read file config json", Servers: []string{"filesystem"}}, codes.OK},
		{"no report scope", as["router"], &pb.ReportUseRequest{Query: "read file", Servers: []string{"filesystem"}}, codes.PermissionDenied},
		{"unknown request id", hub, &pb.ReportUseRequest{RequestId: "rq-nope", Servers: []string{"github"}}, codes.NotFound},
		{"another caller's request id", as["admin"], &pb.ReportUseRequest{RequestId: rt.GetRequestId(), Servers: []string{"github"}}, codes.NotFound},
		{"both id and query", hub, &pb.ReportUseRequest{RequestId: rt.GetRequestId(), Query: "x"}, codes.InvalidArgument},
		{"neither", hub, &pb.ReportUseRequest{Servers: []string{"github"}}, codes.InvalidArgument},
		{"too many servers", hub, &pb.ReportUseRequest{Query: "read file", Servers: many}, codes.InvalidArgument},
		{"query too long", hub, &pb.ReportUseRequest{Query: string(make([]byte, maxTextBytes+1)), Servers: []string{"github"}}, codes.InvalidArgument},
		{"rate spent", hub, &pb.ReportUseRequest{Query: "list files directory", Servers: []string{"filesystem"}}, codes.ResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.ReportUse(tc.ctx, tc.req)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.code == codes.OK && (!res.GetStored() || res.GetRequestId() == "") {
				t.Errorf("got %v, want a stored report with its id", res)
			}
			if tc.name == "by request id" && (len(res.GetIgnoredServers()) != 1 || res.GetServers() != 2 || res.GetTools() != 1) {
				t.Errorf("got %v, want nope ignored, 2 servers, 1 tool", res)
			}
		})
	}
	info, err := c.GetIndexInfo(hub, &pb.GetIndexInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l := info.GetLearning(); !l.GetEnabled() || l.GetReports() != 2 || l.GetIdentities() != 1 {
		t.Errorf("learning info %v, want 2 reports by 1 identity", l)
	}
	// Export and reset are admin's.
	if _, err := c.ExportLearning(hub, &pb.ExportLearningRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("export as hub: %v, want PermissionDenied", err)
	}
	ex, err := c.ExportLearning(as["admin"], &pb.ExportLearningRequest{Identity: "token:hub"})
	if err != nil || ex.GetTotal() != 2 || len(ex.GetReports()[0].GetVector()) != fakeDims {
		t.Fatalf("export: %v, %v; want hub's 2 reports with their vectors", ex, err)
	}
	rs, err := c.ResetLearning(as["admin"], &pb.ResetLearningRequest{})
	if err != nil || rs.GetDeleted() != 2 {
		t.Fatalf("reset: %v, %v; want 2 deleted", rs, err)
	}
}

func TestReportUseLearningOff(t *testing.T) {
	c := newClassifierClient(t, false)
	rt, err := c.Route(context.Background(), &pb.RouteRequest{Query: "check github notifications"})
	if err != nil {
		t.Fatal(err)
	}
	if rt.GetRequestId() != "" {
		t.Errorf("request_id %q with learning off, want none", rt.GetRequestId())
	}
	_, err = c.ReportUse(context.Background(), &pb.ReportUseRequest{Query: "read file", Servers: []string{"filesystem"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ReportUse with learning off: %v, want FailedPrecondition", err)
	}
}

// countingEmbedder counts the texts it embeds.
type countingEmbedder struct {
	bagOfWords
	texts atomic.Int64
}

func (e *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.texts.Add(int64(len(texts)))
	return e.bagOfWords.Embed(ctx, texts)
}

// With learning on, AnalyzePrompt describes the prompt for a later report
// from its own pass: no text is embedded twice, the answer is the one
// without learning, and a report of its request id is learned as one of
// Route's: the same place and confidence for a request nobody reported.
func TestAnalyzePromptDescribedInOnePass(t *testing.T) {
	ctx := context.Background()
	const prompt = "read the config json file and list the github issues"
	serve := func(on bool) (*Server, *countingEmbedder) {
		t.Helper()
		emb := &countingEmbedder{}
		idx := testIndex(t)
		var cfg DomainConfig
		var l *learn.Learner
		if on {
			var err error
			if l, err = learn.New(ctx, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil); err != nil {
				t.Fatal(err)
			}
			cfg.Learned = l.View(idx)
		}
		dom, err := NewDomainConfig(idx, emb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{MaxEmbedBatch: 2, Learner: l}, dom, emb, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return srv, emb
	}
	off, offEmb := serve(false)
	want, err := off.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	on, onEmb := serve(true)
	got, err := on.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetRequestId() == "" {
		t.Fatal("AnalyzePrompt with learning on returned no request_id")
	}
	if n, m := onEmb.texts.Load(), offEmb.texts.Load(); n != m {
		t.Fatalf("AnalyzePrompt embedded %d texts with learning on, %d with it off: want one pass", n, m)
	}
	if !slices.Equal(got.GetCategories(), want.GetCategories()) || got.GetConfidence() != want.GetConfidence() {
		t.Fatalf("with learning on (no reports) the answer is %v %.4f, off %v %.4f: want the same",
			got.GetCategories(), got.GetConfidence(), want.GetCategories(), want.GetConfidence())
	}

	// A report of the AnalyzePrompt request and one of the same prompt
	// routed, each in a learner of its own, teach the same.
	probe := func(s *Server) (int, float32) {
		t.Helper()
		zero := float32(0)
		res, err := s.Route(ctx, &pb.RouteRequest{Query: "check my github notifications", MaxServers: 10, MinConfidence: &zero})
		if err != nil {
			t.Fatal(err)
		}
		for i, sv := range res.GetServers() {
			if sv.GetId() == "filesystem" {
				return i, sv.GetConfidence()
			}
		}
		return -1, 0
	}
	if _, err := on.ReportUse(ctx, &pb.ReportUseRequest{RequestId: got.GetRequestId(), Servers: []string{"github", "filesystem"}}); err != nil {
		t.Fatal(err)
	}
	routed, _ := serve(true)
	rt, err := routed.Route(ctx, &pb.RouteRequest{Query: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := routed.ReportUse(ctx, &pb.ReportUseRequest{RequestId: rt.GetRequestId(), Servers: []string{"github", "filesystem"}}); err != nil {
		t.Fatal(err)
	}
	pa, ca := probe(on)
	pr, cr := probe(routed)
	if pa != pr || math.Abs(float64(ca-cr)) > 0.02 {
		t.Fatalf("filesystem after a report of the analyzed prompt: %d (%.4f); of the routed one: %d (%.4f); want the same", pa, ca, pr, cr)
	}
	t.Logf("filesystem: %d (%.4f) after the analyzed prompt's report, %d (%.4f) after the routed one's", pa, ca, pr, cr)
}
