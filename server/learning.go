package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/learn"
)

// maxExport bounds the reports of one ExportLearning answer.
const maxExport = 1000

// ReportUse implements ClassifierService.ReportUse: what an agent called
// for a routed request (by request_id) or a query (embedded, then
// dropped). The rules (validation against the served catalog, bounds,
// idempotence) are learn's.
func (s *Server) ReportUse(ctx context.Context, req *pb.ReportUseRequest) (*pb.ReportUseResponse, error) {
	cur := s.current()
	v := cur.dom.Learned
	if v == nil {
		return nil, s.status(ctx, "ReportUse", learn.ErrOff)
	}
	u := learn.Use{RequestID: req.GetRequestId(), Identity: CallerFrom(ctx).Quota, Servers: req.GetServers(), Shown: req.GetShownServers()}
	for _, t := range req.GetTools() {
		u.Tools = append(u.Tools, learn.ToolRef{Server: t.GetServer(), Name: t.GetName()})
	}
	switch {
	case u.RequestID != "" && req.GetQuery() != "":
		return nil, status.Error(codes.InvalidArgument, "give request_id or query, not both")
	case u.RequestID == "" && req.GetQuery() == "":
		return nil, status.Error(codes.InvalidArgument, "request_id or query is required")
	case u.RequestID == "":
		// The size checks come before the model runs.
		if len(u.Servers) > learn.MaxNames || len(u.Tools) > learn.MaxNames || len(u.Shown) > learn.MaxNames {
			return nil, status.Errorf(codes.InvalidArgument, "at most %d servers, tools and shown_servers each", learn.MaxNames)
		}
		vec, described, err := cur.dom.Router.Describe(ctx, req.GetQuery())
		if err != nil {
			return nil, s.status(ctx, "ReportUse", err)
		}
		u.Vec, u.Described = vec, described
	}
	res, err := v.Report(ctx, u)
	if err != nil {
		return nil, s.status(ctx, "ReportUse", err)
	}
	out := &pb.ReportUseResponse{RequestId: res.ID, Stored: res.Stored, Servers: int32(res.Servers), Tools: int32(res.Tools),
		IgnoredServers: res.IgnoredServers, IgnoredShownServers: res.IgnoredShown}
	for _, t := range res.IgnoredTools {
		out.IgnoredTools = append(out.IgnoredTools, &pb.ToolRef{Server: t.Server, Name: t.Name})
	}
	return out, nil
}

// ExportLearning implements ClassifierService.ExportLearning.
func (s *Server) ExportLearning(ctx context.Context, req *pb.ExportLearningRequest) (*pb.ExportLearningResponse, error) {
	if s.cfg.Learner == nil {
		return nil, s.status(ctx, "ExportLearning", learn.ErrOff)
	}
	limit, off := int(req.GetLimit()), int(req.GetOffset())
	if limit < 0 || off < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit and offset must not be negative")
	}
	if limit == 0 || limit > maxExport {
		limit = maxExport
	}
	recs := s.cfg.Learner.Export(req.GetIdentity())
	out := &pb.ExportLearningResponse{Total: int32(len(recs))}
	for i := off; i < len(recs) && i < off+limit; i++ {
		r := recs[i]
		lr := &pb.LearnedReport{RequestId: r.ID, Key: r.Key, Identity: r.Identity, At: timestamppb.New(r.At),
			Servers: r.Servers, ShownServers: r.Shown}
		for _, t := range r.Tools {
			lr.Tools = append(lr.Tools, &pb.ToolRef{Server: t.Server, Name: t.Name})
		}
		for _, x := range r.Vec {
			lr.Vector = append(lr.Vector, float32(x)/127)
		}
		out.Reports = append(out.Reports, lr)
	}
	return out, nil
}

// ResetLearning implements ClassifierService.ResetLearning.
func (s *Server) ResetLearning(ctx context.Context, req *pb.ResetLearningRequest) (*pb.ResetLearningResponse, error) {
	if s.cfg.Learner == nil {
		return nil, s.status(ctx, "ResetLearning", learn.ErrOff)
	}
	n, err := s.cfg.Learner.Reset(ctx, req.GetIdentity())
	if err != nil {
		return nil, s.status(ctx, "ResetLearning", err)
	}
	s.log.Info("learning reset", "identity", req.GetIdentity(), "deleted", n)
	return &pb.ResetLearningResponse{Deleted: int32(n)}, nil
}

// observe gives a routed request its id for ReportUse ("" with learning
// off): its vector and the servers the descriptions ranked first.
func (s *Server) observe(ctx context.Context, cur *served, vec []float32, described []learn.Prob) string {
	return cur.dom.Learned.Observe(CallerFrom(ctx).Quota, vec, described)
}

func learningInfo(v *learn.View) *pb.LearningInfo {
	in := v.Info()
	out := &pb.LearningInfo{Enabled: in.Enabled, Key: in.Key, Reports: int32(in.Reports), Identities: int32(in.Identities),
		Servers: int32(in.Servers), Tools: int32(in.Tools), AllReports: int32(in.AllReports), Pending: int32(in.Pending),
		HalfLifeHours: in.HalfLife.Hours()}
	if out.HalfLifeHours < 0 {
		out.HalfLifeHours = 0
	}
	if !in.Last.IsZero() {
		out.LastReport = timestamppb.New(in.Last)
	}
	return out
}

// RegisterLearningMetrics registers the learning series on reg: reports
// held under the served index's key and in all, and reports received by
// result since start.
func (s *Server) RegisterLearningMetrics(reg prometheus.Registerer) error {
	info := func() learn.Info { return s.current().dom.Learned.Info() }
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "classifierd_learn_reports",
			Help: "Reports of use held for the served index's key (ReportUse, docs/learning.md)."},
			func() float64 { return float64(info().Reports) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "classifierd_learn_reports_all",
			Help: "Reports of use held under every key."}, func() float64 { return float64(info().AllReports) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "classifierd_learn_pending_requests",
			Help: "Routed requests waiting for a report."}, func() float64 { return float64(info().Pending) }),
	}
	for _, r := range []string{"stored", "ignored", "refused"} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "classifierd_learn_reports_received_total",
			Help:        "Reports received since start, by result: stored, ignored (every name unknown), refused (an error).",
			ConstLabels: prometheus.Labels{"result": r}}, func() float64 {
			in := info()
			return float64(map[string]int64{"stored": in.Stored, "ignored": in.Ignored, "refused": in.Refused}[r])
		}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
