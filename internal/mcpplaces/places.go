// Package mcpplaces is the one mechanism that counts the live MCP
// sessions of a streamable HTTP listener, used by the daemon's
// --mcp-listen and by classifierd proxy --mcp-listen alike: a request that
// would start a session takes a place (--max-sessions in all,
// --max-sessions-per-client per caller) before the SDK reads it; once
// the SDK has answered, the place is the session's until the session ends
// (a DELETE, or the SDK's idle timeout), when it is given back, once; a
// DELETE served for the session gives it back at once, so its client can
// start another. A request refused for want of a place is answered as
// Refuse says, and the SDK never sees it. When every place is taken, a
// caller holding fewer sessions than the busiest caller takes the place of
// that caller's least recently used session (by its last request), which
// is closed: the hub sessions' rule (session.Store.CreateFor), on the same
// bookkeeping (internal/busiest).
package mcpplaces

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/classifierd/classifierd/internal/busiest"
	"github.com/classifierd/classifierd/internal/httpguard"
	"github.com/classifierd/classifierd/server"
	"github.com/classifierd/classifierd/session"
)

// SessionHeader is the streamable HTTP header that names a request's MCP
// session; the SDK sets it on the answer to the initialize that started
// one.
const SessionHeader = "Mcp-Session-Id"

// Places holds a place for each live MCP session. It is safe for
// concurrent use.
type Places struct {
	max, perOwner int
	displaced     func()

	mu     sync.Mutex
	owners *busiest.Owners[*Place] // every place taken, by quota, in order of use
	held   map[string]*Place       // by MCP session id
	// closing are the sessions that made way and whose close has not
	// finished (it waits for their requests in flight): their requests
	// are answered 404 meanwhile, as the SDK answers an ended session's.
	closing map[string]bool
}

// New returns Places that allow max sessions in all and perOwner to one
// owner (a server.Caller's Quota); displaced (nil: none) is called once
// for each session closed to make way for a quieter caller (Take).
func New(max, perOwner int, displaced func()) *Places {
	return &Places{max: max, perOwner: perOwner, displaced: displaced, owners: busiest.New[*Place](),
		held: map[string]*Place{}, closing: map[string]bool{}}
}

// Count returns the places taken, in all and by owner.
func (s *Places) Count(owner string) (total, held int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owners.Len(), s.owners.Held(owner)
}

// Named is the number of places whose session id is known.
func (s *Places) Named() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// Take takes a place for the caller quota, before a session is started:
// session.ErrOwnerLimit when quota holds its share already. When every
// place is taken, a quota holding fewer places than the busiest quota
// (the one holding the most; of several as busy, the one whose least
// recently used session is the oldest) takes the place of that quota's
// least recently used session, which is closed as if it had expired (its
// OnEnd runs before Take returns; its next request is answered 404, and
// its streams end); a quota as busy as the busiest gets session.ErrLimit.
func (s *Places) Take(quota string) (*Place, error) {
	s.mu.Lock()
	if s.owners.Held(quota) >= s.perOwner {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (limit %d)", session.ErrOwnerLimit, s.perOwner)
	}
	var victim *Place
	if s.owners.Len() >= s.max {
		// A place whose session has not started yet (its Take still being
		// served) does not make way: refused, as the busiest would be.
		v := s.owners.Victim(quota)
		if v == nil || v.Value.ss == nil {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w (limit %d)", session.ErrLimit, s.max)
		}
		// Its place is the new one's from now.
		victim = v.Value
		s.owners.Remove(v)
	}
	p := &Place{s: s, quota: quota}
	p.item = s.owners.Add(quota, p, time.Now())
	var ss *mcp.ServerSession
	if victim != nil {
		// Its requests are answered 404 from now (Used), before it is
		// forgotten (Give) and while it closes.
		ss = victim.ss
		s.closing[ss.ID()] = true
	}
	s.mu.Unlock()
	if victim != nil {
		victim.Give()
		s.close(ss)
		if s.displaced != nil {
			s.displaced()
		}
	}
	return p, nil
}

// Used marks the session id used by a request of the caller quota, its
// most recently used, and reports whether the session made way for
// another (Take) and is being closed: the request is answered 404 then. A
// request of another caller (which the gate refuses) or for an unknown id
// changes nothing.
func (s *Places) Used(id, quota string) (gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing[id] {
		return true
	}
	if p := s.held[id]; p != nil && p.quota == quota {
		s.owners.Touch(p.item, time.Now())
	}
	return false
}

// Ended gives back the place of session id now if its session has ended,
// as once a DELETE for it has been served, rather than when the goroutine
// awaiting its end runs. A session still live (its DELETE refused) or
// unknown is left alone.
func (s *Places) Ended(id string) {
	s.mu.Lock()
	p := s.held[id]
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv != nil && find(srv, id) == nil {
		p.Give()
	}
}

// Place is one place taken (Take).
type Place struct {
	s     *Places
	quota string
	item  *busiest.Item[*Place] // in s.owners until given back
	ss    *mcp.ServerSession    // its session once held (Hold); under s.mu
	onEnd func()
	give  sync.Once

	mu  sync.Mutex
	id  string
	srv *mcp.Server
}

// OnEnd has f run when p is given back, before its place is free (the
// proxy forgets the session's exposure). Call it before Name or Hold: a
// place makes way for another's only once held.
func (p *Place) OnEnd(f func()) { p.onEnd = f }

// Name makes p the place of session id as soon as the id is known, so
// that a DELETE for it finds it (Ended); an empty id says no session
// started, and p is given back.
func (p *Place) Name(id string) {
	if id == "" {
		p.Give()
		return
	}
	p.mu.Lock()
	p.id = id
	p.mu.Unlock()
	p.s.mu.Lock()
	p.s.held[id] = p
	p.s.mu.Unlock()
}

// Hold keeps p until srv's session id ends, awaited in the background, or
// gives it back now when srv holds no such session (it failed to
// initialize, or ended already).
func (p *Place) Hold(srv *mcp.Server, id string) {
	ss := find(srv, id)
	if ss == nil {
		p.Give()
		return
	}
	p.mu.Lock()
	p.srv = srv
	named := p.id != ""
	p.mu.Unlock()
	if !named && id != "" {
		p.Name(id)
	}
	// From now its place may make way for another (Take).
	p.s.mu.Lock()
	p.ss = ss
	p.s.mu.Unlock()
	go func() { _ = ss.Wait(); p.Give() }()
}

// close closes ss, whose place another took (Take) and which is closing
// already, in the background, since a close waits for its requests in
// flight; its requests are answered 404 meanwhile (Used).
func (s *Places) close(ss *mcp.ServerSession) {
	id := ss.ID()
	go func() {
		_ = ss.Close()
		s.mu.Lock()
		delete(s.closing, id)
		s.mu.Unlock()
	}()
}

// Give gives p back, once.
func (p *Place) Give() {
	p.give.Do(func() {
		p.mu.Lock()
		id := p.id
		p.mu.Unlock()
		p.s.mu.Lock()
		if id != "" && p.s.held[id] == p {
			delete(p.s.held, id)
		}
		p.s.mu.Unlock()
		if p.onEnd != nil {
			p.onEnd()
		}
		p.s.mu.Lock()
		p.s.owners.Remove(p.item)
		p.s.mu.Unlock()
	})
}

// find is srv's live session id, or nil. It looks through every session
// (the SDK keeps no index by id): once per session started or DELETE
// served, not per request.
func find(srv *mcp.Server, id string) *mcp.ServerSession {
	for ss := range srv.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// Refusals counts the sessions refused, by the limit reached
// ("per_client", "total"), as server.Metrics does.
type Refusals interface {
	MCPSessionRefused(limit string)
}

// Limit is the middleware of a streamable HTTP handler whose one SDK
// server srv starts a session for every POST without an Mcp-Session-Id
// (the daemon's --mcp-listen): each such request takes a place for its
// caller (server.CallerFrom's Quota, set by the gate in front) before the
// SDK reads it. The place is the session's, known by the id the SDK's
// answer names, until the session ends; an answer that names none (a
// request before an initialize, such as the official client's
// server/discover probe, or a refusal) leaves no session past its
// request, and the place is given back before the client sees it.
// Refusals are counted in refused (nil: not counted) and answered by
// Refuse with max and perClient.
func (s *Places) Limit(srv *mcp.Server, max, perClient int, refused Refusals, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(SessionHeader)
			switch {
			case r.Method == http.MethodPost && id == "":
				p, err := s.Take(server.CallerFrom(r.Context()).Quota)
				if err != nil {
					if limit := session.LimitReached(err); refused != nil && limit != "" {
						refused.MCPSessionRefused(limit)
					}
					Refuse(w, r, err, max, perClient, log)
					return
				}
				// When the SDK sends the answer's header, it names the
				// session it started, before the client can know the id
				// (and DELETE it).
				var named string
				sw := &sessionIDWriter{ResponseWriter: w, named: func(id string) { named = id; p.Name(id) }}
				next.ServeHTTP(sw, r)
				sw.sent()
				if named != "" {
					p.Hold(srv, named)
				}
			case id != "" && s.Used(id, server.CallerFrom(r.Context()).Quota):
				Gone(w)
			case r.Method == http.MethodDelete && id != "":
				next.ServeHTTP(w, r)
				// Go's HTTP server sends the answer when the handler
				// returns: the session's place is free by then.
				s.Ended(id)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// Gone answers a request of a session that made way for another and is
// closing, as the SDK answers one of an ended session: 404.
func Gone(w http.ResponseWriter) {
	http.Error(w, "session not found", http.StatusNotFound)
}

// sessionIDWriter calls named once, with the Mcp-Session-Id of the answer
// ("" for none), when the answer's header is sent, or at the latest when
// sent is called after the handler. The SDK flushes through
// http.ResponseController, which finds FlushError.
type sessionIDWriter struct {
	http.ResponseWriter
	named func(id string)
	once  sync.Once
}

func (w *sessionIDWriter) sent() {
	w.once.Do(func() { w.named(w.Header().Get(SessionHeader)) })
}

func (w *sessionIDWriter) WriteHeader(code int) {
	w.sent()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionIDWriter) Write(b []byte) (int, error) {
	w.sent()
	return w.ResponseWriter.Write(b)
}

func (w *sessionIDWriter) FlushError() error {
	w.sent()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *sessionIDWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Refuse answers a request that would start an MCP session past a limit
// (the proxy's and the daemon's Take): 429 when the caller holds
// perClient sessions already (--max-sessions-per-client), 503 when max are
// open (--max-sessions), both RESOURCE_EXHAUSTED as the daemon's
// CreateSession says it; 503 UNAVAILABLE for anything else (the proxy
// stopping). Refusals are the client's to see (a caller at its limit could
// fill the log), so the log has them at debug only.
func Refuse(w http.ResponseWriter, r *http.Request, err error, max, perClient int, log *slog.Logger) {
	switch {
	case errors.Is(err, session.ErrOwnerLimit):
		log.Debug("MCP session refused: the caller holds --max-sessions-per-client sessions",
			"caller", server.CallerFrom(r.Context()).Name, "limit", perClient)
		httpguard.WriteMCPError(w, r, http.StatusTooManyRequests, httpguard.CodeResourceExhausted, status.Errorf(codes.ResourceExhausted,
			"too many sessions for this client (limit %d): end one (DELETE) or let an idle one expire", perClient))
	case errors.Is(err, session.ErrLimit):
		log.Debug("MCP session refused: --max-sessions sessions are open", "limit", max)
		httpguard.WriteMCPError(w, r, http.StatusServiceUnavailable, httpguard.CodeResourceExhausted, status.Errorf(codes.ResourceExhausted,
			"too many sessions (limit %d): retry later", max))
	default:
		log.Warn("MCP session refused", "err", err)
		httpguard.WriteMCPError(w, r, http.StatusServiceUnavailable, httpguard.CodeUnavailable, status.Error(codes.Unavailable, "server stopping"))
	}
}
