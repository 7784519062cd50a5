// Package server is the gRPC boundary of classifierd: it validates requests,
// calls the classification, session and terminal packages, and is the only
// place where errors become gRPC status codes.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/classify"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/answerhold"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/session"
)

// Embedder embeds texts; the daemon passes the model engine, tests a fake.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Config configures the ClassifierService.
type Config struct {
	// MaxEmbedBatch bounds the texts of one Embed call (default 64).
	MaxEmbedBatch int
	// DefaultNoMatch is Route's policy when a request leaves on_no_match unset.
	DefaultNoMatch route.NoMatch
	// MaxTokens is the model's token cap, reported in GetIndexInfo.
	MaxTokens int
	// Sessions holds hub sessions; nil disables the session RPCs.
	Sessions Sessions
	// Tokens counts tool-definition tokens; nil falls back to characters/4.
	Tokens TokenCounter
	// Source names what the first index was loaded from, for GetIndexInfo
	// (default "start").
	Source string
	// Sources, if set, reports the live tool sources (MCP servers) for
	// GetIndexInfo.
	Sources func() []SourceStatus
	// Watches bounds the WatchExposure streams served at once, per
	// session, per caller (Caller.Quota) and in all; nil: DefaultWatches.
	Watches *session.Watches
	// Learner keeps what agents reported calling (ReportUse); nil is
	// learning off. The Domain's Learned view must be its view.
	Learner *learn.Learner
}

// Default bounds of WatchExposure streams (the daemon's --max-watches,
// --max-watches-per-client and --max-watches-per-session). A hub watches
// each of its sessions once, and a reconnecting one may hold the old
// stream a moment longer: 8 per session. Per client and in all, as many as
// the default session limits (--max-sessions-per-client 1000,
// --max-sessions 10000), so every session can be watched once. An open
// watch costs its stream's goroutine and about 7.5 KB of heap, 15 KB of
// RSS in all (20,000 on one session: +20,000 goroutines, +149 MB heap,
// +311 MB RSS), so one client's share is about 15 MB and the whole limit
// about 150 MB. Unbounded, 20,000 watches of one session cost 40,000
// goroutines and made UpdateExposure take 0.5 s.
const (
	DefaultMaxWatches           = 10000
	DefaultMaxWatchesPerClient  = 1000
	DefaultMaxWatchesPerSession = 8
)

// DefaultWatches is the count a Server uses when Config.Watches is nil.
func DefaultWatches() *session.Watches {
	return session.NewWatches(DefaultMaxWatches, DefaultMaxWatchesPerClient, DefaultMaxWatchesPerSession)
}

// Sessions is the hub session state the session RPCs read and change:
// a *session.Store in this process's memory, or a *session.RedisStore
// shared by every replica pointed at one Redis. Errors are the session
// package's sentinels (session.ErrUnavailable when shared state cannot be
// reached).
type Sessions interface {
	// CreateFor starts a session that belongs to owner (and counts
	// against owner.Quota's share); Owner says whose a session is.
	CreateFor(ctx context.Context, owner session.Owner, id string, exposure session.Exposure) (session.Snapshot, error)
	Owner(ctx context.Context, id string) (string, error)
	Get(ctx context.Context, id string) (session.Snapshot, error)
	Exposed(ctx context.Context, id string) ([]string, error)
	Delete(ctx context.Context, id string) error
	Update(ctx context.Context, id string, categories []string, mode string) (session.Change, session.Snapshot, bool, error)
	Watch(ctx context.Context, id string) (<-chan session.Event, error)
	Len(ctx context.Context) (int, error)
}

var (
	_ Sessions = (*session.Store)(nil)
	_ Sessions = (*session.RedisStore)(nil)
)

// TokenCounter counts the LLM tokens of one tool definition.
type TokenCounter interface {
	CountTool(name, description, inputSchemaJSON string) int
}

// Server implements classifier.v1.ClassifierService.
type Server struct {
	pb.UnimplementedClassifierServiceServer
	errorMapper
	cfg     Config
	cur     atomic.Pointer[served]
	reloads reloads
	emb     Embedder
	log     *slog.Logger
	stats   *Stats
}

var _ pb.ClassifierServiceServer = (*Server)(nil)

// New returns a Server over a classifier and the embedder it was built with.
func New(cfg Config, dom Domain, emb Embedder, log *slog.Logger) (*Server, error) {
	if dom.Router == nil || dom.Classifier == nil || dom.Analyzer == nil || emb == nil || log == nil {
		return nil, errors.New("server: classifier, embedder and logger are required")
	}
	if cfg.MaxEmbedBatch <= 0 {
		cfg.MaxEmbedBatch = 64
	}
	if cfg.Watches == nil {
		cfg.Watches = DefaultWatches()
	}
	if cfg.DefaultNoMatch == route.NoMatchDefault {
		cfg.DefaultNoMatch = route.NoMatchNone
	}
	s := &Server{errorMapper: errorMapper{log}, cfg: cfg, emb: emb, log: log, stats: newStats()}
	s.Swap(dom, cfg.Source, "start")
	return s, nil
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return s.stats }

// Classify implements ClassifierService.Classify.
func (s *Server) Classify(ctx context.Context, req *pb.ClassifyRequest) (*pb.ClassifyResponse, error) {
	cur := s.current()
	res, err := cur.dom.Classifier.Classify(ctx, req.GetText(), int(req.GetTopK()), optFloat(req.MinConfidence))
	if err != nil {
		return nil, s.status(ctx, "Classify", err)
	}
	if res.Abstained {
		s.stats.abstained.Add(1)
	}
	out := &pb.ClassifyResponse{Categories: scoredLabels(res.Categories), Abstained: res.Abstained, Reasoning: res.Reasoning}
	at := answerTrace{textBytes: len(req.GetText()), results: len(out.Categories), abstained: res.Abstained}
	if len(out.Categories) > 0 {
		at.top = out.Categories[0].GetConfidence()
	}
	traceAnswer(ctx, cur, at)
	return out, nil
}

// Route implements ClassifierService.Route.
func (s *Server) Route(ctx context.Context, req *pb.RouteRequest) (*pb.RouteResponse, error) {
	q := route.RouteQuery{
		Query: req.GetQuery(), MaxServers: int(req.GetMaxServers()), MaxTools: int(req.GetMaxTools()),
		MinConfidence: optFloat(req.MinConfidence), Include: req.GetIncludeServers(), Exclude: req.GetExcludeServers(),
		OnNoMatch: noMatchFromPB(req.GetOnNoMatch(), s.cfg.DefaultNoMatch), Caller: CallerFrom(ctx).Quota,
	}
	if int(req.GetOnNoMatch()) < 0 || int(req.GetOnNoMatch()) > int(pb.NoMatchPolicy_NO_MATCH_POLICY_ALL) {
		return nil, status.Errorf(codes.InvalidArgument, "on_no_match %d is not a known policy", req.GetOnNoMatch())
	}
	for _, m := range req.GetMessages() {
		q.Messages = append(q.Messages, route.Message{Role: m.GetRole(), Content: m.GetContent()})
	}
	cur := s.current()
	res, err := cur.dom.Router.Route(ctx, q)
	if err != nil {
		return nil, s.status(ctx, "Route", err)
	}
	out := &pb.RouteResponse{
		Servers: serverLabels(cur.dom, res.Servers), Categories: scoredLabels(res.Categories),
		Reasoning: res.Reasoning, Abstained: res.Abstained, PolicyReason: res.PolicyReason,
		RequestId: s.observe(ctx, cur, res.Vector, res.Described),
	}
	if res.Abstained {
		out.AppliedPolicy = noMatchToPB(res.AppliedPolicy)
		s.stats.abstained.Add(1)
	}
	selected := make([]int, 0, len(res.Tools))
	for _, t := range res.Tools {
		out.Tools = append(out.Tools, &pb.ScoredTool{Name: t.Name, Server: t.Server, ServerName: cur.dom.Index.ServerName(t.Server), Confidence: float32(t.Confidence),
			Score: float32(t.Score), Category: t.Category, Evidence: t.Evidence, EvidenceParts: evidenceParts(t.Parts)})
		selected = append(selected, t.Label)
	}
	out.Stats = s.toolStats(cur, res.Candidates, selected)
	at := answerTrace{textBytes: len(q.Query), messages: len(q.Messages), results: len(out.Servers), tools: len(out.Tools), abstained: res.Abstained}
	for _, m := range q.Messages {
		at.textBytes += len(m.Content)
	}
	if len(out.Servers) > 0 {
		at.top = out.Servers[0].GetConfidence()
	}
	traceAnswer(ctx, cur, at)
	return out, nil
}

// Embed implements ClassifierService.Embed.
func (s *Server) Embed(ctx context.Context, req *pb.EmbedRequest) (*pb.EmbedResponse, error) {
	texts := req.GetTexts()
	dom := s.current().dom
	if len(texts) == 0 {
		return nil, status.Error(codes.InvalidArgument, "texts is empty")
	}
	if len(texts) > s.cfg.MaxEmbedBatch {
		return nil, status.Errorf(codes.InvalidArgument, "%d texts, limit %d", len(texts), s.cfg.MaxEmbedBatch)
	}
	for i, t := range texts {
		if err := dom.Limits.CheckText(fmt.Sprintf("texts[%d]", i), t); err != nil {
			return nil, s.status(ctx, "Embed", err)
		}
	}
	// Admitted a chunk at a time (admitChunk): 64 texts are 64 model
	// runs, and a call admitted whole held its place and core for all.
	vecs := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += EmbedChunk {
		chunk := texts[start:min(start+EmbedChunk, len(texts))]
		n := 0
		for _, t := range chunk {
			n += len(t)
		}
		last := start+EmbedChunk >= len(texts)
		if last {
			// The last chunk's place is kept until the answer is
			// encoded (answerhold): on the HTTP/JSON listener that is
			// len(texts) × dims floats formatted as text, more work
			// than the model runs when the texts are cached. Its size
			// is the answer's, so the cost model learns it apart from
			// the other chunks.
			n += len(texts) * dom.Index.Dims * 4
		}
		cctx, release, err := admitChunk(ctx, int64(n))
		if err != nil {
			return nil, err
		}
		v, err := s.emb.Embed(cctx, chunk)
		if last && err == nil {
			answerhold.Until(ctx, release)
		} else {
			release()
		}
		if err != nil {
			if start > 0 { // the engine counts the chunk's texts from 0
				err = fmt.Errorf("from texts[%d]: %w", start, err)
			}
			return nil, s.status(ctx, "Embed", err)
		}
		vecs = append(vecs, v...)
	}
	out := &pb.EmbedResponse{Dimensions: int32(dom.Index.Dims)}
	for _, v := range vecs {
		out.Vectors = append(out.Vectors, &pb.Vector{Values: v})
	}
	return out, nil
}

// GetIndexInfo implements ClassifierService.GetIndexInfo.
func (s *Server) GetIndexInfo(ctx context.Context, _ *pb.GetIndexInfoRequest) (*pb.GetIndexInfoResponse, error) {
	cur := s.current()
	idx := cur.dom.Index
	lim := cur.dom.Limits
	cal := cur.dom.Calibration
	out := &pb.GetIndexInfoResponse{
		ModelName: idx.Model, Dimensions: int32(idx.Dims), ModelFingerprint: idx.Fingerprint,
		Categories: int32(len(idx.LabelsOf(index.KindCategory))), Servers: int32(len(idx.LabelsOf(index.KindServer))),
		Tools: int32(len(idx.LabelsOf(index.KindTool))), Vectors: int32(idx.NumVectors()),
		BuiltAt: timestamppb.New(idx.BuiltAt), FormatVersion: index.FormatVersion, CatalogSha256: idx.CatalogSHA256,
		Limits: &pb.Limits{MaxTextBytes: int32(lim.MaxTextBytes), MaxBatch: int32(s.cfg.MaxEmbedBatch),
			MaxMessages: int32(lim.MaxMessages), MaxTokens: int32(s.cfg.MaxTokens), MaxTopK: int32(lim.MaxTopK)},
	}
	out.Calibration = append(out.Calibration,
		&pb.CalibrationInfo{Target: "categories", Method: cal.Categories.Method, EceBefore: float32(cal.Categories.ECEBefore),
			EceAfter: float32(cal.Categories.ECEAfter), Samples: int32(cal.Categories.Samples), DefaultThreshold: float32(cal.Categories.Threshold),
			Reliability: reliabilityBins(cal.Categories.Reliability)},
		binaryInfo("categories_multi", cal.CategoriesMulti), binaryInfo("servers", cal.Servers), binaryInfo("tools", cal.Tools))
	f := cal.Fusion
	out.Fusion = &pb.FusionInfo{Pattern: float32(f.Pattern), Name: float32(f.Name), Keyword: float32(f.Keyword),
		ToolCentroid: float32(f.ToolCentroid), ToolDescription: float32(f.ToolDescription), ToolExactGap: float32(f.ToolExactGap),
		Bm25: float32(f.BM25), ToolBreadth: float32(f.ToolBreadth), Fitted: cal.FusionFitted, HeadWeight: float32(cal.HeadWeight)}
	out.Load = s.loadInfo(cur.load)
	out.McpServers = s.sourceInfo()
	out.Learning = learningInfo(cur.dom.Learned)
	return out, nil
}

func binaryInfo(target string, b calibrate.Binary) *pb.CalibrationInfo {
	return &pb.CalibrationInfo{Target: target, Method: b.Method, EceBefore: float32(b.ECEBefore), EceAfter: float32(b.ECEAfter),
		Samples: int32(b.Samples), DefaultThreshold: float32(b.Threshold), SharedFallback: b.SharedFallback,
		Reliability: reliabilityBins(b.Reliability)}
}

func reliabilityBins(bs []calibrate.Bin) []*pb.ReliabilityBin {
	out := make([]*pb.ReliabilityBin, 0, len(bs))
	for _, b := range bs {
		out = append(out, &pb.ReliabilityBin{Lo: float32(b.Lo), Hi: float32(b.Hi), Count: int32(b.Count),
			MeanConfidence: float32(b.MeanConf), Accuracy: float32(b.Accuracy)})
	}
	return out
}

func optFloat(p *float32) *float32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// serverLabels is scoredLabels for servers, with their catalog names.
func serverLabels(dom Domain, ss []classify.Scored) []*pb.ScoredLabel {
	out := scoredLabels(ss)
	for _, l := range out {
		l.Name = dom.Index.ServerName(l.Id)
	}
	return out
}

func scoredLabels(ss []classify.Scored) []*pb.ScoredLabel {
	out := make([]*pb.ScoredLabel, 0, len(ss))
	for _, s := range ss {
		out = append(out, &pb.ScoredLabel{Id: s.ID, Confidence: float32(s.Confidence), Score: float32(s.Score), Evidence: s.Evidence,
			EvidenceParts: evidenceParts(s.Parts)})
	}
	return out
}

// evidenceParts is nil when there is no evidence (a keyword-only answer).
func evidenceParts(p rank.Parts) *pb.EvidenceParts {
	if p == (rank.Parts{}) {
		return nil
	}
	return &pb.EvidenceParts{Dense: float32(p.Dense), Nearest: p.Nearest, Lexical: p.Lexical, Pattern: p.Pattern, Via: p.Via, Learned: p.Learned}
}

func noMatchFromPB(p pb.NoMatchPolicy, def route.NoMatch) route.NoMatch {
	switch p {
	case pb.NoMatchPolicy_NO_MATCH_POLICY_NONE:
		return route.NoMatchNone
	case pb.NoMatchPolicy_NO_MATCH_POLICY_META:
		return route.NoMatchMeta
	case pb.NoMatchPolicy_NO_MATCH_POLICY_ALL:
		return route.NoMatchAll
	}
	return def
}

func noMatchToPB(p route.NoMatch) pb.NoMatchPolicy {
	switch p {
	case route.NoMatchNone:
		return pb.NoMatchPolicy_NO_MATCH_POLICY_NONE
	case route.NoMatchMeta:
		return pb.NoMatchPolicy_NO_MATCH_POLICY_META
	case route.NoMatchAll:
		return pb.NoMatchPolicy_NO_MATCH_POLICY_ALL
	}
	return pb.NoMatchPolicy_NO_MATCH_POLICY_UNSPECIFIED
}

// Stats are cumulative counters since start.
type Stats struct {
	since       time.Time
	mu          sync.Mutex
	byMethod    map[string]int64
	toolAnswers atomic.Int64
	baseline    atomic.Int64
	returned    atomic.Int64
	degraded    atomic.Int64
	abstained   atomic.Int64
	// window is GetToolMetrics' resettable view of toolAnswers, baseline and returned.
	window tokenWindow
}

func newStats() *Stats {
	now := time.Now()
	st := &Stats{since: now, byMethod: map[string]int64{}}
	st.window.since = now
	return st
}

func (st *Stats) count(method string) {
	st.mu.Lock()
	st.byMethod[method]++
	st.mu.Unlock()
}

// Interceptors returns the unary and stream interceptors every classifierd
// service runs behind: panic recovery (a bug answers Internal, never kills
// the daemon), a default deadline for calls without one, per-method
// counters, and a log line per call with method, code and duration — never
// request contents.
func Interceptors(log *slog.Logger, st *Stats, defaultTimeout time.Duration) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		start := time.Now()
		if _, ok := ctx.Deadline(); !ok && defaultTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = withDefaultDeadline(ctx, defaultTimeout) // not the caller's: admission tells them apart
			defer cancel()
		}
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
			if st != nil {
				st.count(shortMethod(info.FullMethod))
			}
			log.Debug("rpc", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
		}()
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in stream handler", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Error(codes.Internal, "internal error")
			}
			if st != nil {
				st.count(shortMethod(info.FullMethod))
			}
		}()
		return h(srv, ss)
	}
	return unary, stream
}

func shortMethod(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}
