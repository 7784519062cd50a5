package server

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/session"
)

func checkMode(mode string) error {
	switch mode {
	case "", "additive", "replacement":
		return nil
	}
	return status.Errorf(codes.InvalidArgument, "mode %q is not additive or replacement", clipID(mode))
}

func clipID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// sessionStatus maps session errors to gRPC codes.
func (s *Server) sessionStatus(method string, err error) error {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return status.Error(codes.NotFound, "session not found")
	case errors.Is(err, session.ErrExists):
		return status.Error(codes.AlreadyExists, "session already exists")
	case errors.Is(err, session.ErrLimit):
		return status.Error(codes.ResourceExhausted, "too many sessions")
	case errors.Is(err, session.ErrBadMode), errors.Is(err, session.ErrBadExposure), errors.Is(err, session.ErrBadID):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	s.log.Error("session operation failed", "method", method, "err", err)
	return status.Error(codes.Internal, "internal error")
}

func (s *Server) sessionsOrErr() (*session.Store, error) {
	if s.cfg.Sessions == nil {
		return nil, status.Error(codes.FailedPrecondition, "sessions are disabled: the index has no categories")
	}
	return s.cfg.Sessions, nil
}

// applyAnalysis applies analyze_prompt's categories to a session.
func (s *Server) applyAnalysis(id string, cats []string, mode string, out *pb.AnalyzePromptResponse) error {
	st, err := s.sessionsOrErr()
	if err != nil {
		return err
	}
	ch, snap, changed, err := st.Update(id, cats, mode)
	if err != nil {
		return s.sessionStatus("AnalyzePrompt", err)
	}
	out.Added, out.Total, out.Changed = ch.Added, int32(len(snap.Exposed)), changed
	return nil
}

func sessionPB(sn session.Snapshot) *pb.Session {
	out := &pb.Session{Id: sn.ID, ExposedCategories: sn.Exposed,
		CreatedAt: timestamppb.New(sn.Created), LastActivity: timestamppb.New(sn.LastActivity)}
	for _, c := range sn.History {
		out.History = append(out.History, changePB(c))
	}
	return out
}

func changePB(c session.Change) *pb.ExposureChange {
	return &pb.ExposureChange{Timestamp: timestamppb.New(c.Time), Operation: c.Operation,
		Added: c.Added, Removed: c.Removed, Total: int32(c.Total)}
}

// CreateSession implements ClassifierService.CreateSession.
func (s *Server) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, err
	}
	sn, err := st.Create(req.GetSessionId(), session.Exposure(req.GetDefaultExposure()))
	if err != nil {
		return nil, s.sessionStatus("CreateSession", err)
	}
	return &pb.CreateSessionResponse{Session: sessionPB(sn)}, nil
}

// GetSession implements ClassifierService.GetSession.
func (s *Server) GetSession(ctx context.Context, req *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, err
	}
	sn, err := st.Get(req.GetSessionId())
	if err != nil {
		return nil, s.sessionStatus("GetSession", err)
	}
	return &pb.GetSessionResponse{Session: sessionPB(sn)}, nil
}

// DeleteSession implements ClassifierService.DeleteSession.
func (s *Server) DeleteSession(ctx context.Context, req *pb.DeleteSessionRequest) (*pb.DeleteSessionResponse, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, err
	}
	if err := st.Delete(req.GetSessionId()); err != nil {
		return nil, s.sessionStatus("DeleteSession", err)
	}
	return &pb.DeleteSessionResponse{}, nil
}

// UpdateExposure implements ClassifierService.UpdateExposure. Unknown
// category ids are InvalidArgument.
func (s *Server) UpdateExposure(ctx context.Context, req *pb.UpdateExposureRequest) (*pb.UpdateExposureResponse, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, err
	}
	if err := checkMode(req.GetMode()); err != nil {
		return nil, err
	}
	for _, c := range req.GetCategories() {
		if _, ok := s.cls.Index().Lookup(index.KindCategory, c); !ok {
			return nil, status.Errorf(codes.InvalidArgument, "unknown category %q", clipID(c))
		}
	}
	ch, sn, changed, err := st.Update(req.GetSessionId(), req.GetCategories(), req.GetMode())
	if err != nil {
		return nil, s.sessionStatus("UpdateExposure", err)
	}
	return &pb.UpdateExposureResponse{Added: ch.Added, Removed: ch.Removed, Total: int32(len(sn.Exposed)),
		Changed: changed, ExposedCategories: sn.Exposed}, nil
}

// ListTools implements ClassifierService.ListTools: the tools of the
// session's exposed categories, with token accounting.
func (s *Server) ListTools(ctx context.Context, req *pb.ListToolsRequest) (*pb.ListToolsResponse, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, err
	}
	exposed, err := st.Exposed(req.GetSessionId())
	if err != nil {
		return nil, s.sessionStatus("ListTools", err)
	}
	idx := s.cls.Index()
	all := idx.LabelsOf(index.KindTool)
	out := &pb.ListToolsResponse{ExposedCategories: exposed}
	var selected []int
	for _, li := range all {
		l := &idx.Labels[li]
		if !slices.Contains(exposed, l.Category) {
			continue
		}
		selected = append(selected, li)
		out.Tools = append(out.Tools, &pb.Tool{Name: l.Name, Server: l.Server, Category: l.Category,
			Description: l.Description, InputSchemaJson: string(l.InputSchema)})
	}
	out.Stats = s.toolStats(all, selected)
	return out, nil
}

// WatchExposure implements ClassifierService.WatchExposure: one message per
// actual change of the session's exposure, until the client goes away or
// the session ends.
func (s *Server) WatchExposure(req *pb.WatchExposureRequest, stream grpc.ServerStreamingServer[pb.WatchExposureResponse]) error {
	st, err := s.sessionsOrErr()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	events, err := st.Watch(ctx, req.GetSessionId())
	if err != nil {
		return s.sessionStatus("WatchExposure", err)
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case ev, ok := <-events:
			if !ok {
				if _, err := st.Get(req.GetSessionId()); err != nil {
					return status.Error(codes.NotFound, "session ended")
				}
				return status.Error(codes.Unavailable, "watch closed (client too slow or server stopping); watch again")
			}
			if err := stream.Send(&pb.WatchExposureResponse{SessionId: ev.SessionID, Change: changePB(ev.Change),
				ExposedCategories: ev.Exposed}); err != nil {
				return err
			}
		}
	}
}

// GetStats implements ClassifierService.GetStats.
func (s *Server) GetStats(ctx context.Context, _ *pb.GetStatsRequest) (*pb.GetStatsResponse, error) {
	st := s.stats
	out := &pb.GetStatsResponse{Since: timestamppb.New(st.since), RequestsByMethod: map[string]int64{},
		ToolListAnswers: st.toolAnswers.Load(), TokensBaseline: st.baseline.Load(), TokensReturned: st.returned.Load(),
		DegradedAnswers: st.degraded.Load(), AbstainedAnswers: st.abstained.Load()}
	st.mu.Lock()
	for k, v := range st.byMethod {
		out.RequestsByMethod[k] = v
	}
	st.mu.Unlock()
	if out.TokensBaseline > 0 {
		out.ReductionPercent = float32(100 * (1 - float64(out.TokensReturned)/float64(out.TokensBaseline)))
	}
	if s.cfg.Sessions != nil {
		out.ActiveSessions = int64(s.cfg.Sessions.Len())
	}
	return out, nil
}
