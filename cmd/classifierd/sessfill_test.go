package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	daemonstate "github.com/classifierd/classifierd/internal/state"
	"github.com/classifierd/classifierd/internal/testredis"
)

// TestHostileFullSessionsTakeFromTheBusiest: through the real daemon over
// gRPC, with sessions in memory and in Redis. Identities that fill
// --max-sessions between them cannot refuse a quiet identity a session:
// its CreateSession takes the place of the busiest identity's least
// recently used session, whose WatchExposure stream ends NOT_FOUND and
// which is NOT_FOUND afterwards; the busiest (or one as busy) is still
// refused RESOURCE_EXHAUSTED, and classifierd_sessions_displaced_total
// counts each. The tenth hostile pass: ten identities at their 1,000
// filled 10,000 and bob was refused for the whole --session-ttl
// (tools/hostile/sessfill11.py).
func TestHostileFullSessionsTakeFromTheBusiest(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice route,sessions "+aliceToken+"\nbob route,sessions "+bobToken+
		"\ncarol route,sessions "+carolToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"memory", "redis"} {
		t.Run(state, func(t *testing.T) {
			metrics := freeAddr(t)
			args := []string{"--index", idx, "--auth-token-file", tokens, "--metrics-listen", metrics,
				"--max-sessions", "5", "--max-sessions-per-client", "3"}
			if state == "redis" {
				srv := testredis.Start(t, "--requirepass", statePassword)
				t.Setenv(daemonstate.PasswordEnv, statePassword)
				args = append(args, "--state", srv.URL(0))
			}
			_, conn := opsDaemon(t, freeAddr(t), insecureDial, args...)
			c := pb.NewClassifierServiceClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			who := map[string]context.Context{"alice": bearerCtx(ctx, aliceToken), "bob": bearerCtx(ctx, bobToken),
				"carol": bearerCtx(ctx, carolToken)}
			// Redis orders sessions by the millisecond of their last use.
			step := func() { time.Sleep(5 * time.Millisecond) }
			create := func(name, id string) error {
				step()
				_, err := c.CreateSession(who[name], &pb.CreateSessionRequest{SessionId: id})
				return err
			}
			for _, s := range [][2]string{{"carol", "c0"}, {"carol", "c1"}, {"alice", "a0"}, {"alice", "a1"}, {"alice", "a2"}} {
				if err := create(s[0], s[1]); err != nil {
					t.Fatalf("%s creates %s: %v", s[0], s[1], err)
				}
			}
			// alice watches a0 (which uses it), then uses a1 and a2: a0 is
			// her least recently used.
			step()
			w, err := startWatch(who["alice"], c, "a0")
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a1", "a2"} {
				step()
				if _, err := c.GetSession(who["alice"], &pb.GetSessionRequest{SessionId: id}); err != nil {
					t.Fatal(err)
				}
			}
			for i, s := range []struct {
				who, id, gone string // caller, its new session, the session that makes way
				want          codes.Code
			}{
				{"bob", "b0", "alice/a0", codes.OK},          // alice holds 3, the most
				{"alice", "a3", "", codes.ResourceExhausted}, // alice 2, as carol: the busiest
				{"bob", "b1", "carol/c0", codes.OK},          // alice and carol at 2: carol's c0 is older
				{"bob", "b2", "", codes.ResourceExhausted},   // bob 2, as alice
			} {
				err := create(s.who, s.id)
				if got := status.Code(err); got != s.want {
					t.Fatalf("step %d: %s creates %s: %v, want %v", i, s.who, s.id, err, s.want)
				}
				if s.gone != "" {
					owner, id := filepath.Split(s.gone)
					_, err := c.GetSession(who[owner[:len(owner)-1]], &pb.GetSessionRequest{SessionId: id})
					wantCode(t, "the session that made way", err, codes.NotFound)
				}
			}
			// The watch of the session that made way ended NOT_FOUND.
			done := make(chan error, 1)
			go func() {
				for {
					if _, err := w.Recv(); err != nil {
						done <- err
						return
					}
				}
			}()
			select {
			case err := <-done:
				wantCode(t, "the watch of the session that made way", err, codes.NotFound)
			case <-time.After(10 * time.Second):
				t.Fatal("the watch of the session that made way is still open")
			}
			for _, s := range [][2]string{{"alice", "a1"}, {"alice", "a2"}, {"carol", "c1"}, {"bob", "b0"}, {"bob", "b1"}} {
				if _, err := c.GetSession(who[s[0]], &pb.GetSessionRequest{SessionId: s[1]}); err != nil {
					t.Fatalf("%s's %s, which did not make way: %v", s[0], s[1], err)
				}
			}
			if got := scrape(t, metrics)["classifierd_sessions_displaced_total"]; got != 2 {
				t.Fatalf("classifierd_sessions_displaced_total %v, want 2", got)
			}
		})
	}
}
