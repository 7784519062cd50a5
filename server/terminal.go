package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/clip"
	"github.com/classifierd/classifierd/terminal"
)

// TerminalServer implements terminal.v1.TerminalService.
type TerminalServer struct {
	terminalpb.UnimplementedTerminalServiceServer
	errorMapper
	det   *terminal.Detector
	logs  terminal.Logs
	store TerminalStore
	log   *slog.Logger
}

// TerminalStore keeps the input events TerminalService records and the
// answers learned from them: a *terminal.Store (SQLite, this replica) or
// a *terminal.RedisStore (shared by every replica using one Redis).
type TerminalStore interface {
	Record(ctx context.Context, e terminal.Event) (terminal.Event, bool, error)
	Learned(ctx context.Context, prompt, session string) ([]terminal.Learned, error)
	History(ctx context.Context, session string, limit int) ([]terminal.Event, error)
	DeleteSession(ctx context.Context, session string) (int64, error)
}

var (
	_ TerminalStore = (*terminal.Store)(nil)
	_ TerminalStore = (*terminal.RedisStore)(nil)
)

var _ terminalpb.TerminalServiceServer = (*TerminalServer)(nil)

// DefaultMinConfidence is DetectInputPrompt's threshold when the request
// leaves min_confidence unset.
const DefaultMinConfidence = 0.70

// maxTerminalText bounds DetectInputPrompt.text (the tail a client sends).
const maxTerminalText = terminal.TailBytes

// reasonTooLarge is the ErrorInfo reason of a field over its limit.
const reasonTooLarge = "INPUT_TOO_LARGE"

// NewTerminalServer serves prompt detection over session logs in logDir,
// with events and learned patterns in store.
func NewTerminalServer(det *terminal.Detector, logDir string, store TerminalStore, log *slog.Logger) (*TerminalServer, error) {
	if det == nil || store == nil || log == nil {
		return nil, errors.New("server: detector, store and logger are required")
	}
	return &TerminalServer{errorMapper: errorMapper{log}, det: det, logs: terminal.Logs{Dir: logDir}, store: store, log: log}, nil
}

// terminalStatus is errorMapper.status, except that a missing session log
// names the session (its id has passed terminal's validation).
func (s *TerminalServer) terminalStatus(ctx context.Context, method, session string, err error) error {
	if session != "" && errors.Is(err, terminal.ErrSessionNotFound) {
		return withReason(codes.NotFound, "Session "+session+" not found", "SESSION_NOT_FOUND")
	}
	return s.status(ctx, method, err)
}

// storeSession is the key a terminal session's events and learned answers
// are stored under: the session id itself for anonymous callers (without
// tokens or client certificates every client is one identity, as before),
// terminal.OwnedSessionID of the caller's identity and the id otherwise,
// so that one identity never reads, learns from or deletes another's
// history by naming the same session id. With no id, an identified
// caller's key is its identity's alone: with --terminal-share-learned,
// InferExpectedInput then suggests what that identity's sessions learned,
// never another identity's.
func storeSession(ctx context.Context, id string) string {
	c := CallerFrom(ctx)
	if c.Name == "" || c.Name == Anonymous {
		return id
	}
	return terminal.OwnedSessionID(c.Name, id)
}

// logsOf is the session logs ctx's caller may read: with tokens or
// client certificates, its identity's own directory under --terminal-logs
// (<dir>/<identity>/<session_id>.log), so that one identity never reads
// another's terminal output by naming its session id; anonymous callers
// (every client one identity) the directory itself, as before.
func (s *TerminalServer) logsOf(ctx context.Context) terminal.Logs {
	c := CallerFrom(ctx)
	if c.Name == "" || c.Name == Anonymous {
		return s.logs
	}
	return s.logs.Of(c.Name)
}

// DetectInputPrompt implements TerminalService.DetectInputPrompt.
func (s *TerminalServer) DetectInputPrompt(ctx context.Context, req *terminalpb.DetectInputPromptRequest) (*terminalpb.DetectInputPromptResponse, error) {
	minConf := DefaultMinConfidence
	if req.MinConfidence != nil {
		minConf = float64(req.GetMinConfidence())
		if !(minConf >= 0 && minConf <= 1) {
			return nil, s.terminalStatus(ctx, "DetectInputPrompt", "", terminal.ErrBadConfidence)
		}
	}
	var raw []byte
	var base int64
	var when *timestamppb.Timestamp
	switch {
	case req.GetSessionId() != "":
		tail, err := s.logsOf(ctx).ReadTail(req.GetSessionId())
		if err != nil {
			return nil, s.terminalStatus(ctx, "DetectInputPrompt", req.GetSessionId(), err)
		}
		raw, base, when = tail.Data, tail.Offset, timestamppb.New(tail.ModTime)
	case req.GetText() != "":
		if len(req.GetText()) > maxTerminalText {
			return nil, withReason(codes.InvalidArgument, fmt.Sprintf("text is %d bytes, limit %d (send the tail)", len(req.GetText()), maxTerminalText), reasonTooLarge)
		}
		raw, when = []byte(req.GetText()), timestamppb.Now()
	case req.ReadingInput != nil && req.GetReadingInput():
		// No text, but the hub says the program is blocked reading the
		// terminal: a silent waiter.
		when = timestamppb.Now()
	default:
		// No text: nothing is waiting (issue 14).
		return &terminalpb.DetectInputPromptResponse{}, nil
	}
	hints := terminal.Hints{CommandLine: req.GetCommandLine(), Program: req.GetProgram(),
		ReadingInput: req.ReadingInput, EchoOff: req.EchoOff, Canonical: req.CanonicalMode}
	d, err := s.det.DetectWithHints(ctx, raw, hints, minConf)
	if err != nil {
		return nil, s.terminalStatus(ctx, "DetectInputPrompt", req.GetSessionId(), err)
	}
	out := &terminalpb.DetectInputPromptResponse{Detected: d.Detected}
	if d.Detected {
		out.Prompt = &terminalpb.InputPrompt{PromptText: d.PromptText, Confidence: float32(d.Confidence), PromptType: d.Type,
			MatchedPattern: d.MatchedPattern, FilePosition: base + int64(d.Position), Timestamp: when,
			IsDangerous: d.Dangerous, DangerReason: d.DangerReason, DangerConfidence: float32(d.DangerConfidence)}
	}
	return out, nil
}

var promptTypes = map[string]bool{terminal.TypePassword: true, terminal.TypeYesNo: true, terminal.TypeChoice: true,
	terminal.TypePath: true, terminal.TypeText: true, terminal.TypeCommand: true, terminal.TypeUnknown: true, "": true}

// promptType validates a request's prompt_type, or detects it from the
// prompt text when empty.
func (s *TerminalServer) promptType(ctx context.Context, method, typ, prompt string) (string, error) {
	if !promptTypes[typ] {
		return "", status.Errorf(codes.InvalidArgument, "prompt_type %q is not password, yes_no, choice, path, text, command or unknown", clip.String(typ, 64))
	}
	if typ != "" {
		return typ, nil
	}
	d, err := s.det.Detect(ctx, []byte(prompt), 0)
	if err != nil {
		return "", s.terminalStatus(ctx, method, "", err)
	}
	return d.Type, nil
}

// InferExpectedInput implements TerminalService.InferExpectedInput. Sizes
// are checked before any work; learned answers are those of the request's
// session unless the store shares them.
func (s *TerminalServer) InferExpectedInput(ctx context.Context, req *terminalpb.InferExpectedInputRequest) (*terminalpb.InferExpectedInputResponse, error) {
	if len(req.GetPromptText()) > terminal.MaxPromptBytes || len(req.GetSessionContext()) > maxTerminalText {
		return nil, withReason(codes.InvalidArgument, "prompt_text must be 1-4096 bytes and session_context at most 64 KiB", reasonTooLarge)
	}
	if req.GetPromptText() == "" {
		return nil, status.Error(codes.InvalidArgument, "prompt_text must be 1-4096 bytes and session_context at most 64 KiB")
	}
	if id := req.GetSessionId(); id != "" {
		if err := terminal.CheckSessionID(id); err != nil {
			return nil, s.terminalStatus(ctx, "InferExpectedInput", "", err)
		}
	}
	typ, err := s.promptType(ctx, "InferExpectedInput", req.GetPromptType(), req.GetPromptText())
	if err != nil {
		return nil, err
	}
	learned, err := s.store.Learned(ctx, req.GetPromptText(), storeSession(ctx, req.GetSessionId()))
	if err != nil {
		return nil, s.terminalStatus(ctx, "InferExpectedInput", "", err)
	}
	var ctxLines []string
	if req.GetSessionContext() != "" {
		lines, _ := terminal.LastLines([]byte(req.GetSessionContext()))
		for _, l := range lines {
			ctxLines = append(ctxLines, l.Text)
		}
	}
	sugs, warns := terminal.Infer(req.GetPromptText(), typ, ctxLines, learned)
	out := &terminalpb.InferExpectedInputResponse{Warnings: warns}
	for _, sg := range sugs {
		out.Suggestions = append(out.Suggestions, &terminalpb.InputSuggestion{InputText: sg.Input, Confidence: float32(sg.Confidence),
			Source: sg.Source, Reasoning: sg.Reasoning})
	}
	return out, nil
}

// TrackInputEvent implements TerminalService.TrackInputEvent. The event is
// validated (sizes first) before any detection; secret inputs are redacted
// before they reach storage (terminal.IsSecret); nothing typed is logged.
func (s *TerminalServer) TrackInputEvent(ctx context.Context, req *terminalpb.TrackInputEventRequest) (*terminalpb.TrackInputEventResponse, error) {
	ev := terminal.Event{SessionID: req.GetSessionId(), PromptText: req.GetPromptText(),
		Input: req.GetInputText(), Success: req.GetSuccess(), Source: req.GetInputSource(),
		ResponseTimeMs: req.GetResponseTimeMs(),
		TTY:            terminal.TTYState{EchoOff: req.EchoOff, CanonicalMode: req.CanonicalMode}}
	if err := terminal.CheckEvent(ev); err != nil {
		return nil, s.terminalStatus(ctx, "TrackInputEvent", "", err)
	}
	typ, err := s.promptType(ctx, "TrackInputEvent", req.GetPromptType(), req.GetPromptText())
	if err != nil {
		return nil, err
	}
	ev.PromptType = typ
	ev.SessionID = storeSession(ctx, ev.SessionID)
	e, updated, err := s.store.Record(ctx, ev)
	if err != nil {
		return nil, s.terminalStatus(ctx, "TrackInputEvent", req.GetSessionId(), err)
	}
	return &terminalpb.TrackInputEventResponse{EventId: e.ID, Recorded: true, PatternUpdated: updated}, nil
}

// GetSessionHistory implements TerminalService.GetSessionHistory.
func (s *TerminalServer) GetSessionHistory(ctx context.Context, req *terminalpb.GetSessionHistoryRequest) (*terminalpb.GetSessionHistoryResponse, error) {
	limit := int(req.GetLimit())
	if limit < 0 || limit > 1000 {
		return nil, status.Error(codes.InvalidArgument, "limit must be 0..1000")
	}
	if limit == 0 {
		limit = 100
	}
	if err := terminal.CheckSessionID(req.GetSessionId()); err != nil {
		return nil, s.terminalStatus(ctx, "GetSessionHistory", "", err)
	}
	evs, err := s.store.History(ctx, storeSession(ctx, req.GetSessionId()), limit)
	if err != nil {
		return nil, s.terminalStatus(ctx, "GetSessionHistory", req.GetSessionId(), err)
	}
	out := &terminalpb.GetSessionHistoryResponse{}
	for _, e := range evs {
		out.Events = append(out.Events, &terminalpb.InputEvent{EventId: e.ID, SessionId: req.GetSessionId(), PromptText: e.PromptText,
			InputText: e.Input, Success: e.Success, InputSource: e.Source, ResponseTimeMs: e.ResponseTimeMs,
			Timestamp: timestamppb.New(e.Time), PromptType: e.PromptType, PatternKey: e.PatternKey})
	}
	return out, nil
}

// DeleteSessionHistory implements TerminalService.DeleteSessionHistory.
func (s *TerminalServer) DeleteSessionHistory(ctx context.Context, req *terminalpb.DeleteSessionHistoryRequest) (*terminalpb.DeleteSessionHistoryResponse, error) {
	if err := terminal.CheckSessionID(req.GetSessionId()); err != nil {
		return nil, s.terminalStatus(ctx, "DeleteSessionHistory", "", err)
	}
	n, err := s.store.DeleteSession(ctx, storeSession(ctx, req.GetSessionId()))
	if err != nil {
		return nil, s.terminalStatus(ctx, "DeleteSessionHistory", "", err)
	}
	return &terminalpb.DeleteSessionHistoryResponse{DeletedEvents: n}, nil
}
