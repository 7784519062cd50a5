package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	pb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testredis"
)

// ninthPassLines reads one of terminal/testdata's ninth-pass tables: one
// entry a line, "#" and blank lines skipped, "\n" for a newline.
func ninthPassLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.RepoRoot(), "terminal", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
			out = append(out, strings.ReplaceAll(l, `\n`, "\n"))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ninthPassAnswer is the value typed at secret prompt i: short, of two
// character classes, secret only by the prompt it answers.
func ninthPassAnswer(i int) string { return fmt.Sprintf("qZx%03dk", i) }

// TestNinthPassSecrets is the ninth hostile pass's HIGH finding through
// the real daemon, with SQLite and with Redis, sharing learned answers:
// 66 of its 177 secret prompts (glued identifiers such as ADMINPASS: or
// Enter rootpw:, languages the secret words miss such as Tajik, Pashto,
// Yoruba, Tibetan, echo-off cues written in words, security questions,
// card numbers in other languages, a key with an overriding word) kept
// the typed value in clear, returned it in GetSessionHistory and
// suggested it to another session by InferExpectedInput; 25 secret
// command lines at a shell prompt did too; and a prompt's own text kept
// the secret it showed ("Пароль: qwerty123"). Now no such value is in
// the history, a suggestion, the store's bytes or the log, while the
// ordinary command lines are still stored and suggested.
func TestNinthPassSecrets(t *testing.T) {
	prompts := ninthPassLines(t, "secret_prompts9.txt")
	var cmds [][2]string
	var ordinary []string
	for _, l := range ninthPassLines(t, "secret_commands9.txt") {
		if c, s, ok := strings.Cut(l, "\t"); ok {
			cmds = append(cmds, [2]string{c, s})
		} else {
			ordinary = append(ordinary, l)
		}
	}
	var shown [][2]string
	for _, l := range ninthPassLines(t, "secret_prompt_text9.txt") {
		p, s, _ := strings.Cut(l, "\t")
		shown = append(shown, [2]string{p, s})
	}
	if len(prompts) < 170 || len(cmds) < 25 || len(ordinary) < 20 || len(shown) < 15 {
		t.Fatalf("tables: %d prompts, %d secret and %d ordinary commands, %d shown secrets", len(prompts), len(cmds), len(ordinary), len(shown))
	}
	idx := genIndex(t, "testdata/mini.json")
	run := func(t *testing.T, conn *grpc.ClientConn, d *daemon, stored func() []byte) {
		c := pb.NewTerminalServiceClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		track := func(session, prompt, input, typ string) *pb.TrackInputEventResponse {
			r, err := c.TrackInputEvent(ctx, &pb.TrackInputEventRequest{SessionId: session, PromptText: prompt, InputText: input,
				Success: true, InputSource: "user_typed", PromptType: typ})
			if err != nil {
				t.Fatalf("TrackInputEvent(%q, %q): %v", prompt, input, err)
			}
			return r
		}
		for i, p := range prompts {
			for session, typ := range map[string]string{"teach9": "text", "teach9-auto": ""} {
				if r := track(session, p, ninthPassAnswer(i), typ); r.GetPatternUpdated() {
					t.Errorf("%q answered %q (type %q): learned", p, ninthPassAnswer(i), typ)
				}
			}
		}
		const shell = "bob@host:~/src$ "
		for _, cmd := range cmds {
			if r := track("shell9", shell, cmd[0], ""); r.GetPatternUpdated() {
				t.Errorf("%q: learned", cmd[0])
			}
		}
		for _, cmd := range ordinary {
			if r := track("shell9", shell, cmd, ""); !r.GetPatternUpdated() {
				t.Errorf("ordinary %q: not learned", cmd)
			}
		}
		for _, s := range shown {
			track("shown9", s[0], "y", "")
		}
		var returned []string
		for _, session := range []string{"teach9", "teach9-auto", "shell9", "shown9"} {
			h, err := c.GetSessionHistory(ctx, &pb.GetSessionHistoryRequest{SessionId: session, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range h.GetEvents() {
				returned = append(returned, ev.GetPromptText(), ev.GetInputText())
				if strings.HasPrefix(session, "teach9") && ev.GetInputText() != "[REDACTED]" {
					t.Errorf("history of %s: %q answered %q, want [REDACTED]", session, ev.GetPromptText(), ev.GetInputText())
				}
			}
		}
		for _, session := range []string{"teach9", "someone-else", ""} {
			for i, p := range prompts {
				r, err := c.InferExpectedInput(ctx, &pb.InferExpectedInputRequest{PromptText: p, SessionId: session})
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range r.GetSuggestions() {
					if strings.Contains(s.GetInputText(), ninthPassAnswer(i)) || s.GetSource() == "pattern_learning" {
						t.Errorf("InferExpectedInput(%q) to %q suggests %q (%s)", p, session, s.GetInputText(), s.GetSource())
					}
				}
			}
			r, err := c.InferExpectedInput(ctx, &pb.InferExpectedInputRequest{PromptText: shell, SessionId: session, PromptType: "command"})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range r.GetSuggestions() {
				returned = append(returned, s.GetInputText())
			}
		}
		all, raw, log := strings.Join(returned, "\n"), stored(), d.stderr.String()
		for i, p := range prompts {
			if strings.Contains(all, ninthPassAnswer(i)) || bytes.Contains(raw, []byte(ninthPassAnswer(i))) || strings.Contains(log, ninthPassAnswer(i)) {
				t.Errorf("the answer to %q was returned, stored or logged", p)
			}
		}
		for _, cmd := range cmds {
			if strings.Contains(all, cmd[1]) || bytes.Contains(raw, []byte(cmd[1])) || strings.Contains(log, cmd[1]) {
				t.Errorf("%q: its secret was returned, stored or logged", cmd[0])
			}
		}
		for _, s := range shown {
			if strings.Contains(all, s[1]) || bytes.Contains(raw, []byte(s[1])) {
				t.Errorf("the secret shown in %q was returned or stored", s[0])
			}
		}
		for _, cmd := range ordinary {
			if !strings.Contains(all, cmd) || !bytes.Contains(raw, []byte(cmd)) {
				t.Errorf("ordinary %q was not returned and stored: the scan does not see what is stored", cmd)
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "terminal.db")
		d, conn := startDaemon(t, idx, "--terminal", "--terminal-db", db, "--terminal-share-learned")
		run(t, conn, d, func() []byte {
			var out []byte
			for _, f := range []string{db, db + "-wal", db + "-shm"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			return out
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := testredis.Start(t)
		d, conn := startDaemon(t, idx, "--terminal", "--state", srv.URL(0), "--terminal-share-learned")
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		run(t, conn, d, func() []byte { return redisBytes(t, rdb) })
	})
}
