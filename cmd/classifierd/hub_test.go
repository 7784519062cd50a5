package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// TestHubContract drives the analyze_prompt / session / tools-list contract
// through the real daemon with the real model.
func TestHubContract(t *testing.T) {
	idx := genIndex(t, defaultCatalog(t))
	_, conn := startDaemon(t, idx, "--max-sessions", "150")
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("empty prompt", func(t *testing.T) {
		for _, p := range []string{"", "   \n\t"} {
			r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: p})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.GetCategories(), []string{"meta"}) || r.GetConfidence() != 0 || r.GetReasoning() != "Empty or invalid prompt" {
				t.Fatalf("got %v", r)
			}
		}
	})
	t.Run("clear prompt", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Check my GitHub notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCategories()[0] != "github" || r.GetConfidence() < 0.7 || !strings.HasPrefix(r.GetNextStep(), "proceed") {
			t.Fatalf("got %v", r)
		}
	})
	t.Run("several needs", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "read config.json and push it to my repo"})
		if err != nil {
			t.Fatal(err)
		}
		cats := r.GetCategories()
		if !slices.Contains(cats, "filesystem") || !(slices.Contains(cats, "github") || slices.Contains(cats, "git")) {
			t.Fatalf("categories %v, want filesystem and github or git", cats)
		}
	})
	t.Run("vague prompt", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "help me with my project"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCategories()[0] != "meta" || r.GetConfidence() >= 0.5 || r.GetWarning() == "" || r.GetSuggestion() == "" ||
			!strings.HasPrefix(r.GetNextStep(), "be more specific") {
			t.Fatalf("got %v, want meta first with confidence below 0.5, a warning and a suggestion", r)
		}
	})
	t.Run("a question about the tools themselves is meta", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "which tools do you have?"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.GetCategories(), []string{"meta"}) {
			t.Fatalf("got %v, want only meta", r.GetCategories())
		}
	})
	t.Run("unknown valid_categories are ignored with a warning", func(t *testing.T) {
		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Check my GitHub notifications", ValidCategories: []string{"github", "nope"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.GetIgnoredCategories(), []string{"nope"}) || !strings.Contains(r.GetWarning(), "nope") || r.GetCategories()[0] != "github" {
			t.Fatalf("got %v", r)
		}
	})
	t.Run("bad mode", func(t *testing.T) {
		_, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "x", Mode: "merge"})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		_, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "x", SessionId: "never-created"})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("got %v", err)
		}
		if _, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "never-created"}); status.Code(err) != codes.NotFound {
			t.Fatalf("ListTools: %v", err)
		}
	})
	t.Run("detect contexts", func(t *testing.T) {
		r, err := c.DetectContexts(ctx, &pb.DetectContextsRequest{Text: "I need to check PROJ-123 ticket comments"})
		if err != nil {
			t.Fatal(err)
		}
		var jira *pb.DetectedContext
		for _, x := range r.GetContexts() {
			if x.GetId() == "jira" {
				jira = x
			}
		}
		if jira == nil || jira.GetEvidenceKind() != "pattern" || !strings.Contains(jira.GetEvidence(), "PROJ-123") {
			t.Fatalf("got %v", r)
		}
		r, err = c.DetectContexts(ctx, &pb.DetectContextsRequest{Text: "the sky is a lovely shade of blue tonight"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetContexts()) != 0 || r.GetReason() != "no_context_detected" {
			t.Fatalf("got %v", r)
		}
	})

	t.Run("session flow", func(t *testing.T) {
		a, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "hub-a", DefaultExposure: "meta-only"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.GetSession().GetExposedCategories(), []string{"meta"}) {
			t.Fatalf("new session exposes %v", a.GetSession().GetExposedCategories())
		}
		if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "hub-b"}); err != nil {
			t.Fatal(err)
		}
		lt, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "hub-a"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range lt.GetTools() {
			if tl.GetCategory() != "meta" {
				t.Fatalf("meta-only session lists %s/%s (%s)", tl.GetServer(), tl.GetName(), tl.GetCategory())
			}
		}
		st := lt.GetStats()
		if len(lt.GetTools()) == 0 || st.GetOriginalCount() != 139 || st.GetReturnedCount() != int32(len(lt.GetTools())) ||
			st.GetTokensReturned() <= 0 || st.GetTokensTotal() <= st.GetTokensReturned() || st.GetReductionPercent() < 90 {
			t.Fatalf("stats %v", st)
		}

		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		wa, err := c.WatchExposure(wctx, &pb.WatchExposureRequest{SessionId: "hub-a"})
		if err != nil {
			t.Fatal(err)
		}
		wb, err := c.WatchExposure(wctx, &pb.WatchExposureRequest{SessionId: "hub-b"})
		if err != nil {
			t.Fatal(err)
		}
		var bEvents []*pb.WatchExposureResponse
		var bmu sync.Mutex
		go func() {
			for {
				ev, err := wb.Recv()
				if err != nil {
					return
				}
				bmu.Lock()
				bEvents = append(bEvents, ev)
				bmu.Unlock()
			}
		}()
		time.Sleep(100 * time.Millisecond) // let both watches register

		r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Check my GitHub notifications", SessionId: "hub-a"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(r.GetAdded(), "github") || !r.GetChanged() || r.GetTotal() < 2 {
			t.Fatalf("analyze with session: %v", r)
		}
		ev, err := wa.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetSessionId() != "hub-a" || !slices.Contains(ev.GetChange().GetAdded(), "github") {
			t.Fatalf("event %v", ev)
		}
		// The same prompt again is a no-op: no change, no event.
		r, err = c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Check my GitHub notifications", SessionId: "hub-a"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetChanged() || len(r.GetAdded()) != 0 {
			t.Fatalf("repeat changed the session: %v", r)
		}
		lt, err = c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "hub-a"})
		if err != nil {
			t.Fatal(err)
		}
		hasGitHub := false
		for _, tl := range lt.GetTools() {
			hasGitHub = hasGitHub || tl.GetServer() == "github"
		}
		if !hasGitHub {
			t.Fatal("ListTools has no GitHub tools after the analysis")
		}
		// Replacement replaces; the change is streamed.
		u, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "hub-a", Categories: []string{"jira"}, Mode: "replacement"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(u.GetExposedCategories(), []string{"jira"}) || !slices.Contains(u.GetRemoved(), "github") {
			t.Fatalf("replacement: %v", u)
		}
		if ev, err = wa.Recv(); err != nil || !slices.Equal(ev.GetChange().GetAdded(), []string{"jira"}) {
			t.Fatalf("second event %v %v", ev, err)
		}
		if _, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "hub-a", Categories: []string{"bogus"}}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unknown category: %v", err)
		}
		// Session b is untouched.
		lb, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: "hub-b"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(lb.GetExposedCategories(), []string{"meta"}) {
			t.Fatalf("session b exposes %v", lb.GetExposedCategories())
		}
		bmu.Lock()
		if len(bEvents) != 0 {
			t.Fatalf("session b got events %v", bEvents)
		}
		bmu.Unlock()
		g, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: "hub-a"})
		if err != nil {
			t.Fatal(err)
		}
		if len(g.GetSession().GetHistory()) != 3 {
			t.Fatalf("history %v", g.GetSession().GetHistory())
		}
		// Deleting the session ends its watch stream.
		if _, err := c.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: "hub-a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := wa.Recv(); err == io.EOF || status.Code(err) != codes.NotFound {
			t.Fatalf("watch after delete: %v", err)
		}
	})

	t.Run("100+ concurrent sessions", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 120)
		for i := 0; i < 120; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				id := fmt.Sprintf("conc-%d", i)
				if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: id, DefaultExposure: "zero"}); err != nil {
					errs <- err
					return
				}
				cat := []string{"github", "jira", "docker", "notes"}[i%4]
				if _, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: id, Categories: []string{cat}}); err != nil {
					errs <- err
					return
				}
				lt, err := c.ListTools(ctx, &pb.ListToolsRequest{SessionId: id})
				if err != nil {
					errs <- err
					return
				}
				for _, tl := range lt.GetTools() {
					if tl.GetCategory() != cat {
						errs <- fmt.Errorf("session %s (%s) lists %s", id, cat, tl.GetCategory())
						return
					}
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
	t.Run("session limit", func(t *testing.T) {
		var last error
		for i := 0; i < 200 && last == nil; i++ {
			_, last = c.CreateSession(ctx, &pb.CreateSessionRequest{})
		}
		if status.Code(last) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", last)
		}
	})
	t.Run("stats", func(t *testing.T) {
		s, err := c.GetStats(ctx, &pb.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if s.GetRequestsByMethod()["AnalyzePrompt"] < 5 || s.GetTokensBaseline() <= s.GetTokensReturned() || s.GetReductionPercent() <= 0 || s.GetActiveSessions() < 100 {
			t.Fatalf("stats %v", s)
		}
	})
}

// TestHostileAnalyzeValidCategories: AnalyzePrompt refuses 100,000
// valid_categories before any work and repeats at most a few unknown
// names, however many it was sent.
func TestHostileAnalyzeValidCategories(t *testing.T) {
	_, conn := startDaemon(t, genIndex(t, "testdata/mini.json"))
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("unknown-category-%06d", i)
		}
		return out
	}
	_, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "check my github notifications", ValidCategories: names(50_000)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "valid_categories has 50000 names, limit 1024") {
		t.Errorf("50,000 valid_categories (under the 65,536 values every request may hold): %v, want INVALID_ARGUMENT naming the limit", err)
	}
	many := append(names(1000), "github", "unknown-category-000001")
	r, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "check my github notifications", ValidCategories: many})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetIgnoredCategories(); len(got) != 16 || got[0] != "unknown-category-000000" || !strings.HasSuffix(r.GetWarning(), "and 984 more") ||
		len(r.GetWarning()) > 1024 || len(r.GetCategories()) == 0 || r.GetCategories()[0] != "github" {
		t.Errorf("1,000 unknown valid_categories: ignored %d %v, warning %q, categories %v; want the first 16, \"and 984 more\", github",
			len(got), got, r.GetWarning(), r.GetCategories())
	}
}
