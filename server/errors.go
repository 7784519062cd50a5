package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed/embederr"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/session"
	"github.com/classifierd/classifierd/terminal"
)

// ErrorDomain is the domain of classifierd's google.rpc.ErrorInfo details.
const ErrorDomain = "classifierd"

// internalMessage is all a client learns of an unexpected error; the
// detail goes to the server log.
const internalMessage = "internal error"

// errorCode is where one sentinel error lands: its gRPC code, and an
// ErrorInfo reason when clients are documented to branch on one.
type errorCode struct {
	err    error
	code   codes.Code
	reason string
}

// errorCodes is the one mapping from the domain packages' sentinel errors
// to gRPC codes, first match wins. A sentinel's message says what is wrong
// without echoing prompt text, so it is passed on (without its package
// prefix); anything not listed is Internal.
var errorCodes = []errorCode{
	// Bad input.
	{request.ErrEmptyText, codes.InvalidArgument, ""},
	{request.ErrTextTooLong, codes.InvalidArgument, ""},
	{request.ErrBadArgument, codes.InvalidArgument, ""},
	{route.ErrUnknownServer, codes.InvalidArgument, ""},
	{embederr.ErrEmptyText, codes.InvalidArgument, ""},
	{embederr.ErrTooMany, codes.InvalidArgument, ""},
	{session.ErrBadMode, codes.InvalidArgument, ""},
	{session.ErrBadExposure, codes.InvalidArgument, ""},
	{session.ErrBadID, codes.InvalidArgument, ""},
	{session.ErrUnknownCategory, codes.InvalidArgument, ""},
	{terminal.ErrBadSessionID, codes.InvalidArgument, "INVALID_SESSION_ID"},
	{terminal.ErrBadConfidence, codes.InvalidArgument, "INVALID_CONFIDENCE"},
	{terminal.ErrBadArgument, codes.InvalidArgument, ""},
	{terminal.ErrTooLarge, codes.InvalidArgument, "INPUT_TOO_LARGE"},
	{catalog.ErrInvalid, codes.InvalidArgument, ""},
	// Missing things.
	{session.ErrNotFound, codes.NotFound, ""},
	{terminal.ErrSessionNotFound, codes.NotFound, "SESSION_NOT_FOUND"},
	{session.ErrExists, codes.AlreadyExists, ""},
	{session.ErrLimit, codes.ResourceExhausted, ""},
	{embederr.ErrQueueFull, codes.ResourceExhausted, ""},
	{session.ErrOwnerLimit, codes.ResourceExhausted, ""},
	{session.ErrWatchLimit, codes.ResourceExhausted, ""},
	{session.ErrOwnerWatchLimit, codes.ResourceExhausted, ""},
	{session.ErrSessionWatchLimit, codes.ResourceExhausted, ""},
	// The daemon's state does not allow the call.
	{rank.ErrNoLabels, codes.FailedPrecondition, ""},
	{index.ErrDimMismatch, codes.FailedPrecondition, ""},
	{index.ErrModel, codes.FailedPrecondition, ""},
	{session.ErrClosed, codes.Unavailable, ""},
	{session.ErrUnavailable, codes.Unavailable, "STATE_UNAVAILABLE"},
	{terminal.ErrUnavailable, codes.Unavailable, "STATE_UNAVAILABLE"},
	{embederr.ErrClosed, codes.Unavailable, ""},
}

// messages replaces a sentinel's own text where the API documents another.
var messages = map[error]string{
	session.ErrNotFound:         "session not found",
	session.ErrExists:           "session already exists",
	session.ErrLimit:            "too many sessions",
	session.ErrOwnerLimit:       "too many sessions for this client",
	terminal.ErrBadSessionID:    "invalid session id: use 1-128 letters, digits, '.', '_' or '-' without '..' or '/'",
	terminal.ErrBadConfidence:   "min_confidence must be within [0,1]",
	session.ErrClosed:           "server stopping",
	session.ErrUnavailable:      "session state unavailable; retry",
	terminal.ErrUnavailable:     "terminal store unavailable; retry",
	embederr.ErrClosed:          "server stopping",
	embederr.ErrQueueFull:       "server busy: too many texts waiting for the model; retry with backoff",
	terminal.ErrSessionNotFound: "session not found",
	rank.ErrNoLabels:            "index has no labels of this kind",
	index.ErrDimMismatch:        "index and model disagree",
	index.ErrModel:              "index and model disagree",
}

// errorMapper turns errors into gRPC statuses for every service.
type errorMapper struct{ log *slog.Logger }

// status maps err to a gRPC status error. Context errors become
// Canceled/DeadlineExceeded (the request's own context wins, so a
// deadline that fired mid-inference reads as DeadlineExceeded). A known
// sentinel keeps its message, which never contains prompt text; anything
// unexpected is logged with its detail and answers a generic Internal.
func (m errorMapper) status(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status (validation in the server itself)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		return status.FromContextError(err).Err()
	}
	for _, ec := range errorCodes {
		if !errors.Is(err, ec.err) {
			continue
		}
		if ec.code == codes.Unavailable {
			// The client sees the fixed message; the operator needs the cause.
			m.log.Warn("request unavailable", "method", method, "err", err)
		}
		msg, ok := messages[ec.err]
		if !ok {
			msg = withoutPackage(err.Error())
		}
		if ec.reason == "" {
			return status.Error(ec.code, msg)
		}
		return withReason(ec.code, msg, ec.reason)
	}
	m.log.Error("request failed", "method", method, "err", err)
	return status.Error(codes.Internal, internalMessage)
}

// packagePrefixes are the "pkg: " prefixes the domain packages' errors
// carry; clients see the message without them.
var packagePrefixes = []string{"request: ", "route: ", "rank: ", "classify: ", "analyze: ", "calibrate: ", "fit: ",
	"embed: ", "session: ", "terminal: ", "catalog: ", "index: ", "models: ", "labels: ", "indexbuild: "}

// withoutPackage drops the "pkg: " prefix sentinel errors carry.
func withoutPackage(msg string) string {
	for _, p := range packagePrefixes {
		if strings.HasPrefix(msg, p) {
			return msg[len(p):]
		}
	}
	return msg
}

func withReason(code codes.Code, msg, reason string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain})
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}
