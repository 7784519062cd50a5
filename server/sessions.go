package server

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/session"
)

func (s *Server) sessionsOrErr() (Sessions, error) {
	if s.cfg.Sessions == nil {
		return nil, status.Error(codes.FailedPrecondition, "sessions are disabled: the index has no categories")
	}
	return s.cfg.Sessions, nil
}

// ownedSession returns the store and the key (session.ScopedID) of the
// caller's session id: session ids are per caller, so another caller's
// session of the same id is not this caller's to find, and a caller
// learns nothing of others' ids (NotFound either way). The owner check
// stays behind the key as a second lock.
func (s *Server) ownedSession(ctx context.Context, method, id string) (Sessions, string, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, "", err
	}
	name := CallerFrom(ctx).Name
	key := session.ScopedID(name, id)
	owner, err := st.Owner(ctx, key)
	if err == nil && owner != name {
		err = session.ErrNotFound
	}
	if err != nil {
		return nil, "", s.status(ctx, method, err)
	}
	return st, key, nil
}

// applyAnalysis applies analyze_prompt's categories to a session.
func (s *Server) applyAnalysis(ctx context.Context, id string, cats []string, mode string, out *pb.AnalyzePromptResponse) error {
	st, key, err := s.ownedSession(ctx, "AnalyzePrompt", id)
	if err != nil {
		return err
	}
	ch, snap, changed, err := st.Update(ctx, key, cats, mode)
	if err != nil {
		return s.status(ctx, "AnalyzePrompt", err)
	}
	out.Added, out.Total, out.Changed = ch.Added, int32(len(snap.Exposed)), changed
	return nil
}

// sessionPB is snapshot sn of the session the caller calls id.
func sessionPB(id string, sn session.Snapshot) *pb.Session {
	out := &pb.Session{Id: id, ExposedCategories: sn.Exposed,
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

// CreateSession implements ClassifierService.CreateSession. The id is the
// caller's (session.ScopedID): ALREADY_EXISTS means the caller itself has
// a session of that id, never that another caller has.
func (s *Server) CreateSession(ctx context.Context, req *pb.CreateSessionRequest) (*pb.CreateSessionResponse, error) {
	st, err := s.sessionsOrErr()
	if err != nil {
		return nil, err
	}
	id := req.GetSessionId()
	if id == "" {
		id, err = session.NewID()
	} else {
		err = session.CheckID(id)
	}
	if err != nil {
		return nil, s.status(ctx, "CreateSession", err)
	}
	c := CallerFrom(ctx)
	sn, err := st.CreateFor(ctx, session.Owner{ID: c.Name, Quota: c.Quota}, session.ScopedID(c.Name, id), session.Exposure(req.GetDefaultExposure()))
	if err != nil {
		return nil, s.status(ctx, "CreateSession", err)
	}
	return &pb.CreateSessionResponse{Session: sessionPB(id, sn)}, nil
}

// GetSession implements ClassifierService.GetSession.
func (s *Server) GetSession(ctx context.Context, req *pb.GetSessionRequest) (*pb.GetSessionResponse, error) {
	st, key, err := s.ownedSession(ctx, "GetSession", req.GetSessionId())
	if err != nil {
		return nil, err
	}
	sn, err := st.Get(ctx, key)
	if err != nil {
		return nil, s.status(ctx, "GetSession", err)
	}
	return &pb.GetSessionResponse{Session: sessionPB(req.GetSessionId(), sn)}, nil
}

// DeleteSession implements ClassifierService.DeleteSession.
func (s *Server) DeleteSession(ctx context.Context, req *pb.DeleteSessionRequest) (*pb.DeleteSessionResponse, error) {
	st, key, err := s.ownedSession(ctx, "DeleteSession", req.GetSessionId())
	if err != nil {
		return nil, err
	}
	if err := st.Delete(ctx, key); err != nil {
		return nil, s.status(ctx, "DeleteSession", err)
	}
	return &pb.DeleteSessionResponse{}, nil
}

// UpdateExposure implements ClassifierService.UpdateExposure. Unknown
// category ids and modes are InvalidArgument (session.Store.Update checks).
func (s *Server) UpdateExposure(ctx context.Context, req *pb.UpdateExposureRequest) (*pb.UpdateExposureResponse, error) {
	st, key, err := s.ownedSession(ctx, "UpdateExposure", req.GetSessionId())
	if err != nil {
		return nil, err
	}
	ch, sn, changed, err := st.Update(ctx, key, req.GetCategories(), req.GetMode())
	if err != nil {
		return nil, s.status(ctx, "UpdateExposure", err)
	}
	return &pb.UpdateExposureResponse{Added: ch.Added, Removed: ch.Removed, Total: int32(len(sn.Exposed)),
		Changed: changed, ExposedCategories: sn.Exposed}, nil
}

// ListTools implements ClassifierService.ListTools: the tools of the
// session's exposed categories, with token accounting.
func (s *Server) ListTools(ctx context.Context, req *pb.ListToolsRequest) (*pb.ListToolsResponse, error) {
	st, key, err := s.ownedSession(ctx, "ListTools", req.GetSessionId())
	if err != nil {
		return nil, err
	}
	exposed, err := st.Exposed(ctx, key)
	if err != nil {
		return nil, s.status(ctx, "ListTools", err)
	}
	cur := s.current()
	idx := cur.dom.Index
	selected := session.Tools(idx, exposed)
	out := &pb.ListToolsResponse{ExposedCategories: exposed}
	for _, li := range selected {
		l := &idx.Labels[li]
		out.Tools = append(out.Tools, &pb.Tool{Name: l.Name, Server: l.Server, ServerName: idx.ServerName(l.Server), Category: l.Category,
			Description: l.Description, InputSchemaJson: string(l.InputSchema)})
	}
	out.Stats = s.toolStats(cur, idx.LabelsOf(index.KindTool), selected)
	return out, nil
}

// WatchExposure implements ClassifierService.WatchExposure: one message per
// actual change of the session's exposure, until the client goes away or
// the session ends. Response headers are sent as soon as the watch is in
// place, before any change. A watch takes a place of Config.Watches (per
// session, per caller, in all) for as long as its stream lasts: past a
// limit it is RESOURCE_EXHAUSTED before the store is asked.
func (s *Server) WatchExposure(req *pb.WatchExposureRequest, stream grpc.ServerStreamingServer[pb.WatchExposureResponse]) error {
	ctx := stream.Context()
	st, key, err := s.ownedSession(ctx, "WatchExposure", req.GetSessionId())
	if err != nil {
		return err
	}
	quota := CallerFrom(ctx).Quota
	if err := s.cfg.Watches.Take(quota, key); err != nil {
		return s.status(ctx, "WatchExposure", err)
	}
	defer s.cfg.Watches.Give(quota, key)
	events, err := st.Watch(ctx, key)
	if err != nil {
		return s.status(ctx, "WatchExposure", err)
	}
	// The headers tell the client the watch is registered: one that waits
	// for them misses no change made after (the Python client does).
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case ev, ok := <-events:
			if !ok {
				// At shutdown the store is closed: Unavailable (watch
				// another replica), not NotFound.
				if _, err := st.Get(ctx, key); errors.Is(err, session.ErrNotFound) {
					return status.Error(codes.NotFound, "session ended")
				} else if err != nil {
					return s.status(ctx, "WatchExposure", err)
				}
				return status.Error(codes.Unavailable, "watch closed (client too slow, session state unreachable or server stopping); watch again")
			}
			if err := stream.Send(&pb.WatchExposureResponse{SessionId: req.GetSessionId(), Change: changePB(ev.Change),
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
		n, err := s.cfg.Sessions.Len(ctx)
		if err != nil {
			return nil, s.status(ctx, "GetStats", err)
		}
		out.ActiveSessions = int64(n)
	}
	return out, nil
}
