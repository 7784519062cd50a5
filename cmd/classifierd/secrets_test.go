package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	pb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testredis"
)

// secretTable is terminal/testdata/secret_prompts.json (terminal's unit
// tests read it too): prompts asking for a secret in 36 languages and
// scripts, and ordinary prompts whose answers must still be learned.
type secretTable struct {
	Secret []struct {
		Lang, Prompt string
	}
	Ordinary []struct{ Lang, Prompt, Input string }
}

func loadSecretTable(t *testing.T) secretTable {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "terminal", "testdata", "secret_prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tab secretTable
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Secret) < 60 || len(tab.Ordinary) < 60 {
		t.Fatalf("table has %d secret and %d ordinary prompts, want 60+ each", len(tab.Secret), len(tab.Ordinary))
	}
	return tab
}

// secretAnswer is the short value typed at secret prompt i (as in the
// finding): one only the prompt can tell is secret, unlike anything else
// the daemon writes, so finding it in raw bytes means it was stored.
func secretAnswer(i int) string { return fmt.Sprintf("qZx%03dj", i) }

// TestSecretsNeverKept reproduces issue 27's finding through the real
// daemon, with the SQLite store and with the Redis store on a real
// redis-server, both with --terminal-share-learned: every prompt of the
// table that asks for a secret, in any language, is answered with a short
// value (the client says prompt_type "text", or nothing and the daemon
// detects it), and that value must not be in GetSessionHistory, in
// InferExpectedInput's suggestions to the same or another session, in the
// SQLite file or its -wal (raw bytes, while the daemon runs and after it
// stops), in any key or value in Redis, or in the log; every ordinary
// prompt's answer must be returned, suggested to another session and found
// in the same bytes (so the scan sees what is stored).
func TestSecretsNeverKept(t *testing.T) {
	tab := loadSecretTable(t)
	idx := genIndex(t, "testdata/mini.json")

	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		db := filepath.Join(dir, "terminal.db")
		d, conn := startDaemon(t, idx, "--terminal", "--terminal-db", db, "--terminal-share-learned")
		files := func() []byte {
			var out []byte
			for _, f := range []string{db, db + "-wal", db + "-shm"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			return out
		}
		trackSecretTable(t, conn, tab)
		if st, err := os.Stat(db + "-wal"); err != nil || st.Size() == 0 {
			t.Fatalf("no -wal to read while the daemon runs (%v)", err)
		}
		checkSecretTable(t, conn, tab, files(), d)
		wantPrivateFile(t, db+".key", 32)
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-d.done; err != nil {
			t.Fatalf("daemon exit: %v", err)
		}
		d.done <- nil
		checkBytes(t, tab, "the SQLite files after exit", files())
	})

	t.Run("redis", func(t *testing.T) {
		srv := testredis.Start(t)
		key := filepath.Join(t.TempDir(), "keys", "terminal.key")
		d, conn := startDaemon(t, idx, "--terminal", "--state", srv.URL(0), "--terminal-share-learned", "--terminal-key", key)
		trackSecretTable(t, conn, tab)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		checkSecretTable(t, conn, tab, redisBytes(t, rdb), d)
		wantPrivateFile(t, key, 32)
	})
}

// trackSecretTable records the table: each secret prompt twice (prompt
// type "text" in session teach, unset in session teach-auto), each
// ordinary prompt once in teach.
func trackSecretTable(t *testing.T, conn *grpc.ClientConn, tab secretTable) {
	t.Helper()
	c := pb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, e := range tab.Secret {
		for session, typ := range map[string]string{"teach": "text", "teach-auto": ""} {
			r, err := c.TrackInputEvent(ctx, &pb.TrackInputEventRequest{SessionId: session, PromptText: e.Prompt, InputText: secretAnswer(i),
				Success: true, InputSource: "user_typed", PromptType: typ})
			if err != nil {
				t.Fatalf("TrackInputEvent(%s %q, type %q): %v", e.Lang, e.Prompt, typ, err)
			}
			if !r.GetRecorded() || r.GetPatternUpdated() {
				t.Errorf("TrackInputEvent(%s %q, type %q): %v; want recorded, not learned", e.Lang, e.Prompt, typ, r)
			}
		}
	}
	for _, e := range tab.Ordinary {
		r, err := c.TrackInputEvent(ctx, &pb.TrackInputEventRequest{SessionId: "teach", PromptText: e.Prompt, InputText: e.Input,
			Success: true, InputSource: "user_typed", PromptType: "text"})
		if err != nil {
			t.Fatalf("TrackInputEvent(%s %q): %v", e.Lang, e.Prompt, err)
		}
		if !r.GetPatternUpdated() {
			t.Errorf("TrackInputEvent(%s %q): %v; want learned", e.Lang, e.Prompt, r)
		}
	}
}

func checkSecretTable(t *testing.T, conn *grpc.ClientConn, tab secretTable, stored []byte, d *daemon) {
	t.Helper()
	c := pb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, session := range []string{"teach", "teach-auto"} {
		h, err := c.GetSessionHistory(ctx, &pb.GetSessionHistoryRequest{SessionId: session, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		want := len(tab.Secret)
		if session == "teach" {
			want += len(tab.Ordinary)
		}
		if len(h.GetEvents()) != want {
			t.Fatalf("history of %s: %d events, want %d", session, len(h.GetEvents()), want)
		}
		for i, ev := range h.GetEvents() {
			if i < len(tab.Secret) && ev.GetInputText() != "[REDACTED]" {
				t.Errorf("history of %s: %q answered %q, want [REDACTED]", session, ev.GetPromptText(), ev.GetInputText())
			}
			if i >= len(tab.Secret) && ev.GetInputText() != tab.Ordinary[i-len(tab.Secret)].Input {
				t.Errorf("history of %s: %q answered %q, want %q", session, ev.GetPromptText(), ev.GetInputText(), tab.Ordinary[i-len(tab.Secret)].Input)
			}
		}
	}
	for i, e := range tab.Secret {
		for _, session := range []string{"teach", "someone-else", ""} {
			r, err := c.InferExpectedInput(ctx, &pb.InferExpectedInputRequest{PromptText: e.Prompt, SessionId: session})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range r.GetSuggestions() {
				if strings.Contains(s.GetInputText(), secretAnswer(i)) || s.GetSource() == "pattern_learning" {
					t.Errorf("InferExpectedInput(%s %q) to session %q suggests %q (%s)", e.Lang, e.Prompt, session, s.GetInputText(), s.GetSource())
				}
			}
		}
	}
	for _, e := range tab.Ordinary {
		r, err := c.InferExpectedInput(ctx, &pb.InferExpectedInputRequest{PromptText: e.Prompt, SessionId: "someone-else", PromptType: "text"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range r.GetSuggestions() {
			found = found || (s.GetInputText() == e.Input && s.GetSource() == "pattern_learning")
		}
		if !found {
			t.Errorf("InferExpectedInput(%s %q) to another session: %v, want the learned %q", e.Lang, e.Prompt, r.GetSuggestions(), e.Input)
		}
	}
	checkBytes(t, tab, "the store", stored)
	for i, e := range tab.Secret {
		if strings.Contains(d.stderr.String(), secretAnswer(i)) {
			t.Errorf("the answer to %q is in the log", e.Prompt)
		}
	}
}

// checkBytes fails if a secret answer is in b, or (b not nil) if an
// ordinary answer is not.
func checkBytes(t *testing.T, tab secretTable, what string, b []byte) {
	t.Helper()
	for i, e := range tab.Secret {
		if bytes.Contains(b, []byte(secretAnswer(i))) {
			t.Errorf("the answer to %s %q is in %s", e.Lang, e.Prompt, what)
		}
	}
	if b == nil {
		return
	}
	for _, e := range tab.Ordinary {
		if !bytes.Contains(b, []byte(e.Input)) {
			t.Errorf("the ordinary answer %q is not in %s: the scan does not see what is stored", e.Input, what)
		}
	}
}

// redisBytes is every key of the Redis database and every value under it
// (DUMP, and the fields, values and members of hashes and sorted sets).
func redisBytes(t *testing.T, rdb *redis.Client) []byte {
	t.Helper()
	ctx := context.Background()
	var out []byte
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	n := 0
	for iter.Next(ctx) {
		k := iter.Val()
		n++
		out = append(out, k...)
		dump, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, dump...)
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				out = append(out, f+"\x00"+v+"\x00"...)
			}
		case "zset":
			out = append(out, strings.Join(rdb.ZRange(ctx, k, 0, -1).Val(), "\x00")...)
		case "string":
			out = append(out, rdb.Get(ctx, k).Val()...)
		}
	}
	if err := iter.Err(); err != nil || n == 0 {
		t.Fatalf("scanned %d keys: %v", n, err)
	}
	return out
}

// wantPrivateFile checks that path is a regular file of size bytes that
// only its owner can read and write.
func wantPrivateFile(t *testing.T, path string, size int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o600 || st.Size() != size {
		t.Fatalf("%s: mode %v size %d, want -rw------- and %d bytes", path, st.Mode(), st.Size(), size)
	}
}

// TestTerminalLogDirPrivate checks the --terminal-logs directory the
// daemon creates is 0700 whatever the umask: it holds whole terminal
// sessions (what was typed and echoed), and its file names are session
// ids, which a local user must not be able to list.
func TestTerminalLogDirPrivate(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	dir := t.TempDir()
	logs := filepath.Join(dir, "sessions", "logs")
	startDaemon(t, idx, "--terminal", "--terminal-db", filepath.Join(dir, "terminal.db"), "--terminal-logs", logs)
	for _, d := range []string{logs, filepath.Dir(logs)} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s is %v, want 0700", d, st.Mode().Perm())
		}
	}
}

// TestHostileCommandLineSecrets is the fifth hostile pass's finding through
// the real daemon: passwords typed on a shell command line in forms the
// earlier passes did not try (a password echoed into a program that reads
// it from its input, a here-string, keytool's -storepass, zip's -P,
// rar's -p, nmcli, wpa_passphrase, net user) were stored in clear,
// returned by GetSessionHistory and suggested back by InferExpectedInput.
// Each must now be redacted everywhere, and ordinary command lines (one
// with a variable where the password would be) still kept, so the scan
// sees what is stored.
func TestHostileCommandLineSecrets(t *testing.T) {
	const pw = "qZx5pw"
	secret := []string{
		"echo " + pw + "01 | docker login -u bob --password-stdin registry.example",
		"echo '" + pw + "02' | sudo -S apt-get update",
		"printf '" + pw + "03\\n' | passwd --stdin bob",
		"echo 'bob:" + pw + "04' | chpasswd",
		"cryptsetup luksOpen /dev/sdb vault --key-file=- <<< " + pw + "05",
		"sudo -S ls /root <<< " + pw + "06",
		"keytool -list -keystore k.jks -storepass " + pw + "07",
		"jarsigner -keypass " + pw + "08 app.jar mykey",
		"zip -e -P " + pw + "09 backup.zip notes.txt",
		"unzip -P " + pw + "10 backup.zip",
		"unrar x -p" + pw + "11 backup.rar",
		"nmcli dev wifi connect HomeNet password " + pw + "12",
		"wpa_passphrase HomeNet " + pw + "13",
		"net user bob " + pw + "14 /add",
		"mosquitto_pub -u bob -P " + pw + "15 -t a -m b",
		"psql 'host=db user=bob password=" + pw + "16'",
	}
	ordinary := []string{
		"echo $HOME | wc -c",
		"zip -r backup.zip notes",
		"unzip -l backup.zip",
		"nmcli dev wifi list",
		"echo hello | grep h",
	}
	idx := genIndex(t, "testdata/mini.json")
	db := filepath.Join(t.TempDir(), "terminal.db")
	d, conn := startDaemon(t, idx, "--terminal", "--terminal-db", db, "--terminal-share-learned")
	c := pb.NewTerminalServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const prompt = "bob@host:~$ "
	for _, line := range append(append([]string{}, secret...), ordinary...) {
		if _, err := c.TrackInputEvent(ctx, &pb.TrackInputEventRequest{SessionId: "shell", PromptText: prompt, InputText: line,
			Success: true, InputSource: "user_typed"}); err != nil {
			t.Fatalf("TrackInputEvent(%q): %v", line, err)
		}
	}
	h, err := c.GetSessionHistory(ctx, &pb.GetSessionHistoryRequest{SessionId: "shell", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var returned []string
	for _, ev := range h.GetEvents() {
		returned = append(returned, ev.GetInputText())
	}
	for _, session := range []string{"shell", "other"} {
		r, err := c.InferExpectedInput(ctx, &pb.InferExpectedInputRequest{PromptText: prompt, SessionId: session, PromptType: "command"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.GetSuggestions() {
			returned = append(returned, s.GetInputText())
		}
	}
	var stored []byte
	for _, f := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		stored = append(stored, b...)
	}
	all := strings.Join(returned, "\n")
	for i, line := range secret {
		p := fmt.Sprintf("%s%02d", pw, i+1)
		if strings.Contains(all, p) {
			t.Errorf("%q: its password was returned or suggested", line)
		}
		if bytes.Contains(stored, []byte(p)) {
			t.Errorf("%q: its password is in the SQLite files", line)
		}
		if strings.Contains(d.stderr.String(), p) {
			t.Errorf("%q: its password is in the log", line)
		}
	}
	for _, line := range ordinary {
		if !strings.Contains(all, line) || !bytes.Contains(stored, []byte(line)) {
			t.Errorf("ordinary %q was not returned and stored: the scan does not see what is stored", line)
		}
	}
}
