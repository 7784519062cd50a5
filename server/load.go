package server

import (
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/index"
)

// served is one loaded index with everything derived from it. A request
// reads the current one once, at its start, and uses it to the end: a
// reload swaps the pointer, so requests in flight finish on the old index
// and new ones use the new. A served value is never modified.
type served struct {
	dom Domain
	// toolTok is the token count of each label's tool definition, by label
	// index; allTok their sum over every tool, and tools how many there are
	// (a request that allows every tool reads the sum, not 100,000 entries).
	toolTok map[int]int
	allTok  int64
	tools   int
	load    Load
}

// setToolTokens counts the tool definitions' tokens of sv's index.
func (sv *served) setToolTokens(tc TokenCounter) {
	sv.toolTok = countToolTokens(sv.dom, tc)
	sv.allTok, sv.tools = 0, 0
	for _, n := range sv.toolTok {
		sv.allTok += int64(n)
	}
	sv.tools = len(sv.dom.Index.LabelsOf(index.KindTool))
}

// Load says which index the server serves and where it came from.
type Load struct {
	// Generation is 1 for the index the server started with and grows by
	// one with every Swap.
	Generation uint64
	// Source is what the index was loaded from ("file PATH", "mcp CONFIG").
	Source string
	// Reason is what started the load ("start", "sighup", ...).
	Reason   string
	LoadedAt time.Time
}

// SourceStatus is the state of one live tool source (an MCP server) as
// GetIndexInfo reports it.
type SourceStatus struct {
	Name, ID  string
	Tools     int
	Degraded  bool
	Connected bool
	LastError string
	LastSync  time.Time
}

// reloads holds what the server reports about reloads besides the current
// load: the last one refused.
type reloads struct {
	mu         sync.Mutex
	refused    string
	refusedAt  time.Time
	generation atomic.Uint64
}

// current is the index requests use now.
func (s *Server) current() *served { return s.cur.Load() }

// Swap makes dom the index every new request uses; requests already
// running finish on the old one. It returns the new load's description.
// dom must be valid (built by NewDomain); checking that a new index fits
// the model is the caller's job, before Swap.
func (s *Server) Swap(dom Domain, source, reason string) Load {
	sv := &served{dom: dom, load: Load{Generation: s.reloads.generation.Add(1), Source: source, Reason: reason, LoadedAt: time.Now()}}
	sv.setToolTokens(s.cfg.Tokens)
	s.cur.Store(sv)
	return sv.load
}

// Refused records a reload that was refused (the old index keeps
// serving); GetIndexInfo reports the last one. msg must not hold secrets.
func (s *Server) Refused(msg string) {
	s.reloads.mu.Lock()
	s.reloads.refused, s.reloads.refusedAt = msg, time.Now()
	s.reloads.mu.Unlock()
}

// Index is the index being served.
func (s *Server) Index() *index.Index { return s.current().dom.Index }

// Load describes the index being served.
func (s *Server) Load() Load { return s.current().load }

func (s *Server) loadInfo(l Load) *pb.IndexLoad {
	out := &pb.IndexLoad{Generation: l.Generation, Source: l.Source, Reason: l.Reason, LoadedAt: timestamppb.New(l.LoadedAt)}
	s.reloads.mu.Lock()
	if out.LastRefused = s.reloads.refused; out.LastRefused != "" {
		out.LastRefusedAt = timestamppb.New(s.reloads.refusedAt)
	}
	s.reloads.mu.Unlock()
	return out
}

func (s *Server) sourceInfo() []*pb.McpServerStatus {
	if s.cfg.Sources == nil {
		return nil
	}
	var out []*pb.McpServerStatus
	for _, st := range s.cfg.Sources() {
		m := &pb.McpServerStatus{Name: st.Name, Id: st.ID, Tools: int32(st.Tools), Degraded: st.Degraded,
			Connected: st.Connected, LastError: st.LastError}
		if !st.LastSync.IsZero() {
			m.LastSync = timestamppb.New(st.LastSync)
		}
		out = append(out, m)
	}
	return out
}
