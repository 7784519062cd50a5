package main

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/state"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testredis"
	"github.com/classifierd/classifierd/terminal"
)

const statePassword = "s3cret-state-pw"

// watch opens WatchExposure and returns once the daemon has the watch in
// place (it sends headers then), so no later change can be missed.
func watch(t *testing.T, ctx context.Context, c pb.ClassifierServiceClient, id string) grpc.ServerStreamingClient[pb.WatchExposureResponse] {
	t.Helper()
	w, err := startWatch(ctx, c, id)
	if err != nil {
		t.Fatalf("WatchExposure %s: %v", id, err)
	}
	return w
}

// startWatch opens WatchExposure and waits for its headers; a stream that
// ends without them returns its status as the error.
func startWatch(ctx context.Context, c pb.ClassifierServiceClient, id string) (grpc.ServerStreamingClient[pb.WatchExposureResponse], error) {
	w, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: id})
	if err != nil {
		return nil, err
	}
	md, err := w.Header()
	if err == nil && md == nil {
		// Ended before headers: Recv has the status.
		_, err = w.Recv()
		if err == nil {
			err = errors.New("a message before headers")
		}
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// recv is the next WatchExposure message, failing after 10s.
func recv(t *testing.T, w grpc.ServerStreamingClient[pb.WatchExposureResponse]) *pb.WatchExposureResponse {
	t.Helper()
	type result struct {
		r   *pb.WatchExposureResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := w.Recv(); ch <- result{r, err} }()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("watch: %v", res.err)
		}
		return res.r
	case <-time.After(10 * time.Second):
		t.Fatal("watch: no message in 10s")
	}
	return nil
}

// TestStateSharedByTwoDaemons runs two classifierd processes on one real
// redis-server (password-protected, the password passed through the
// environment) and checks they serve the same hub sessions: created on A,
// read and changed on B, each change seen exactly once by watchers on
// both; the same terminal events and learned answers; one global session
// limit; expiry; and Redis going away and coming back.
func TestStateSharedByTwoDaemons(t *testing.T) {
	srv := testredis.Start(t, "--requirepass", statePassword)
	t.Setenv(state.PasswordEnv, statePassword)
	idx := genIndex(t, defaultCatalog(t))
	const ttl = 4 * time.Second
	flags := []string{"--state", srv.URL(0), "--max-sessions", "3", "--session-ttl", ttl.String(), "--terminal"}
	da, connA := startDaemon(t, idx, flags...)
	db, connB := startDaemon(t, idx, flags...)
	a, b := pb.NewClassifierServiceClient(connA), pb.NewClassifierServiceClient(connB)
	ta, tb := terminalpb.NewTerminalServiceClient(connA), terminalpb.NewTerminalServiceClient(connB)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("sessions and changes are shared", func(t *testing.T) {
		if _, err := a.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "hub-1", DefaultExposure: "meta-only"}); err != nil {
			t.Fatal(err)
		}
		g, err := b.GetSession(ctx, &pb.GetSessionRequest{SessionId: "hub-1"})
		if err != nil || !slices.Equal(g.GetSession().GetExposedCategories(), []string{"meta"}) {
			t.Fatalf("GetSession on B: %v %v", g, err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		wa, wb := watch(t, wctx, a, "hub-1"), watch(t, wctx, b, "hub-1")

		// A change on A, a no-op on B, a replacement on B, and a last
		// change on A: each watcher gets the three real ones, in order,
		// and nothing else (the message after each is the next change).
		steps := []struct {
			on    pb.ClassifierServiceClient
			req   *pb.UpdateExposureRequest
			added []string
		}{
			{a, &pb.UpdateExposureRequest{SessionId: "hub-1", Categories: []string{"github"}}, []string{"github"}},
			{b, &pb.UpdateExposureRequest{SessionId: "hub-1", Categories: []string{"github"}}, nil},
			{b, &pb.UpdateExposureRequest{SessionId: "hub-1", Categories: []string{"filesystem"}, Mode: "replacement"}, []string{"filesystem"}},
			{a, &pb.UpdateExposureRequest{SessionId: "hub-1", Categories: []string{"jira"}}, []string{"jira"}},
		}
		var want [][]string
		for i, st := range steps {
			r, err := st.on.UpdateExposure(ctx, st.req)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if r.GetChanged() != (st.added != nil) || !slices.Equal(r.GetAdded(), st.added) {
				t.Fatalf("step %d: %v, want added %v", i, r, st.added)
			}
			if st.added != nil {
				want = append(want, st.added)
			}
		}
		for name, w := range map[string]grpc.ServerStreamingClient[pb.WatchExposureResponse]{"A": wa, "B": wb} {
			for i, added := range want {
				ev := recv(t, w)
				if ev.GetSessionId() != "hub-1" || !slices.Equal(ev.GetChange().GetAdded(), added) {
					t.Fatalf("watch on %s, message %d: %v, want added %v", name, i, ev, added)
				}
			}
		}
		lt, err := b.ListTools(ctx, &pb.ListToolsRequest{SessionId: "hub-1"})
		if err != nil || !slices.Equal(lt.GetExposedCategories(), []string{"filesystem", "jira"}) || len(lt.GetTools()) == 0 {
			t.Fatalf("ListTools on B: %v %v", lt.GetExposedCategories(), err)
		}
		for name, c := range map[string]pb.ClassifierServiceClient{"A": a, "B": b} {
			st, err := c.GetStats(ctx, &pb.GetStatsRequest{})
			if err != nil || st.GetActiveSessions() != 1 {
				t.Fatalf("GetStats on %s: %d active sessions (%v), want 1", name, st.GetActiveSessions(), err)
			}
		}
		if _, err := b.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: "hub-1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := wa.Recv(); status.Code(err) != codes.NotFound {
			t.Fatalf("watch on A after delete on B: %v, want NOT_FOUND", err)
		}
		if _, err := a.GetSession(ctx, &pb.GetSessionRequest{SessionId: "hub-1"}); status.Code(err) != codes.NotFound {
			t.Fatalf("GetSession on A after delete on B: %v", err)
		}
	})

	t.Run("terminal events and learned answers are shared", func(t *testing.T) {
		for _, in := range []string{"staging", "staging"} {
			if _, err := ta.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "term-1", PromptText: "Environment name:",
				PromptType: "text", InputText: in, Success: true, InputSource: "user_typed"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ta.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "term-1", PromptText: "Password:",
			InputText: statePassword, Success: true, InputSource: "user_typed"}); err != nil {
			t.Fatal(err)
		}
		h, err := tb.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "term-1"})
		if err != nil || len(h.GetEvents()) != 3 || h.GetEvents()[0].GetInputText() != "staging" || h.GetEvents()[2].GetInputText() != terminal.Redacted {
			t.Fatalf("GetSessionHistory on B: %v %v", h, err)
		}
		inf, err := tb.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: "Environment name:", SessionId: "term-1"})
		if err != nil || len(inf.GetSuggestions()) == 0 || inf.GetSuggestions()[0].GetInputText() != "staging" {
			t.Fatalf("InferExpectedInput on B: %v %v", inf, err)
		}
		d, err := tb.DeleteSessionHistory(ctx, &terminalpb.DeleteSessionHistoryRequest{SessionId: "term-1"})
		if err != nil || d.GetDeletedEvents() != 3 {
			t.Fatalf("DeleteSessionHistory on B: %v %v", d, err)
		}
		if h, err := ta.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "term-1"}); err != nil || len(h.GetEvents()) != 0 {
			t.Fatalf("GetSessionHistory on A after delete on B: %v %v", h, err)
		}
	})

	t.Run("one session limit across daemons", func(t *testing.T) {
		for i, c := range []pb.ClassifierServiceClient{a, b, a} {
			if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "lim-" + string(rune('a'+i))}); err != nil {
				t.Fatal(err)
			}
		}
		for name, c := range map[string]pb.ClassifierServiceClient{"A": a, "B": b} {
			if _, err := c.CreateSession(ctx, &pb.CreateSessionRequest{}); status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("fourth session on %s with --max-sessions 3: %v, want RESOURCE_EXHAUSTED", name, err)
			}
		}
		if _, err := b.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "lim-a"}); status.Code(err) != codes.AlreadyExists {
			t.Fatalf("A's session id again on B: %v, want ALREADY_EXISTS", err)
		}
		for _, id := range []string{"lim-a", "lim-b", "lim-c"} {
			if _, err := b.DeleteSession(ctx, &pb.DeleteSessionRequest{SessionId: id}); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("idle sessions expire everywhere", func(t *testing.T) {
		if _, err := a.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "idle"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl + time.Second)
		if _, err := b.GetSession(ctx, &pb.GetSessionRequest{SessionId: "idle"}); status.Code(err) != codes.NotFound {
			t.Fatalf("GetSession on B %v after the last activity (TTL %v): %v, want NOT_FOUND", ttl+time.Second, ttl, err)
		}
	})

	t.Run("redis goes away and comes back", func(t *testing.T) {
		if _, err := a.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "outage"}); err != nil {
			t.Fatal(err)
		}
		w := watch(t, ctx, b, "outage")
		srv.Stop()
		calls := map[string]func() error{
			"CreateSession on A": func() error { _, err := a.CreateSession(ctx, &pb.CreateSessionRequest{}); return err },
			"GetSession on B":    func() error { _, err := b.GetSession(ctx, &pb.GetSessionRequest{SessionId: "outage"}); return err },
			"UpdateExposure on A": func() error {
				_, err := a.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "outage", Categories: []string{"git"}})
				return err
			},
			"ListTools on B": func() error { _, err := b.ListTools(ctx, &pb.ListToolsRequest{SessionId: "outage"}); return err },
			"GetStats on A":  func() error { _, err := a.GetStats(ctx, &pb.GetStatsRequest{}); return err },
			"TrackInputEvent on A": func() error {
				_, err := ta.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "term-2", PromptText: "Name:",
					InputText: "x", Success: true, InputSource: "user_typed"})
				return err
			},
			"GetSessionHistory on B": func() error {
				_, err := tb.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "term-2"})
				return err
			},
			"AnalyzePrompt on B": func() error {
				_, err := b.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: "Check my GitHub notifications", SessionId: "outage"})
				return err
			},
		}
		for name, call := range calls {
			if err := call(); status.Code(err) != codes.Unavailable {
				t.Errorf("%s with Redis down: %v, want UNAVAILABLE", name, err)
			}
		}
		if _, err := w.Recv(); status.Code(err) != codes.Unavailable {
			t.Errorf("open watch on B when Redis went away: %v, want UNAVAILABLE", err)
		}
		// What needs no shared state still works.
		if _, err := a.Route(ctx, &pb.RouteRequest{Query: "Check my GitHub notifications"}); err != nil {
			t.Errorf("Route with Redis down: %v", err)
		}
		srv.Start() // empty again: this Redis keeps nothing on disk
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := a.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: "after"})
			if err == nil {
				break
			}
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				t.Fatalf("CreateSession on A after Redis came back: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		var wb grpc.ServerStreamingClient[pb.WatchExposureResponse]
		for {
			w, err := startWatch(ctx, b, "after")
			if err == nil {
				wb = w
				break
			}
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				t.Fatalf("WatchExposure on B after Redis came back: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := a.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "after", Categories: []string{"github"}}); err != nil {
			t.Fatal(err)
		}
		if ev := recv(t, wb); !slices.Equal(ev.GetChange().GetAdded(), []string{"github"}) {
			t.Fatalf("watch on B after recovery: %v", ev)
		}
	})

	// A stop closes the stores, then the shared Redis client: exit 0.
	if err := da.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-da.done:
		da.done <- err // for the cleanup
		if err != nil {
			t.Errorf("daemon A after SIGTERM: %v\n%s", err, da.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("daemon A still running 30s after SIGTERM")
	}
	for name, d := range map[string]*daemon{"A": da, "B": db} {
		if logs := d.stderr.String(); strings.Contains(logs, statePassword) {
			t.Errorf("daemon %s logged the Redis password", name)
		}
	}
}

// TestStateUnreachableRedis: a daemon pointed at a Redis it cannot use
// refuses to start, says why, and does not print the password.
func TestStateUnreachableRedis(t *testing.T) {
	srv := testredis.Start(t, "--requirepass", statePassword)
	idx := genIndex(t, defaultCatalog(t))
	bin, _ := binaries(t)
	for name, tc := range map[string]struct{ url, want string }{
		"nothing listening": {"redis://:" + statePassword + "@" + freeAddr(t) + "/0", "Redis unreachable"},
		"wrong password":    {"redis://:wrong-" + statePassword + "@" + srv.Addr + "/0", "Redis unreachable"},
		"not a Redis URL":   {"http://:" + statePassword + "@" + srv.Addr + "/0", "not a usable Redis URL"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, "--index", idx, "--model", testenv.ModelDir(), "--listen", freeAddr(t),
				"--ort-lib", testenv.ORTLib(), "--state", tc.url)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("daemon started (err %v)\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
			if strings.Contains(string(out), statePassword) {
				t.Fatalf("output shows the password:\n%s", out)
			}
		})
	}
}
