package terminal

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClean(t *testing.T) {
	cases := []struct {
		raw     string
		last    string
		partial bool
	}{
		{"a\nb\n", "b", false},
		{"a\nPassword: ", "Password: ", true},
		{"\x1b[1;32mok\x1b[0m\n\x1b]0;title\x07$ ", "$ ", true},
		{"10%\r50%\r100%\n", "100%", false},
		{"10%\r50%\r100%", "100%", true},
		{"x\r\nContinue? [y/N] ", "Continue? [y/N] ", true},
		{"\x1b[?2004hsqlite> ", "sqlite> ", true},
	}
	for _, tc := range cases {
		lines, partial := Clean([]byte(tc.raw))
		if got := lines[len(lines)-1].Text; got != tc.last || partial != tc.partial {
			t.Errorf("Clean(%q): last %q partial %v, want %q %v", tc.raw, got, partial, tc.last, tc.partial)
		}
	}
	lines, _ := Clean([]byte("ab\ncd\nef"))
	if lines[2].Pos != 6 || lines[1].Pos != 3 {
		t.Fatalf("positions %+v", lines)
	}
}

func TestPatternKey(t *testing.T) {
	same := [][2]string{
		{"Delete 3 tables?", "Delete 5 tables?"},
		{"rm: remove regular file 'a.txt'?", "rm: remove regular file 'b.log'?"},
		{"Overwrite /tmp/x/y.conf? [y/N]", "Overwrite /etc/z.conf? [y/N]"},
		{"Commit deadbeefcafe1234?", "Commit 0123456789abcdef?"},
		{"  Continue?   [Y/n] ", "continue? [y/n]"},
	}
	for _, p := range same {
		if PatternKey(p[0]) != PatternKey(p[1]) {
			t.Errorf("%q -> %q, %q -> %q", p[0], PatternKey(p[0]), p[1], PatternKey(p[1]))
		}
	}
	if PatternKey("Delete 3 tables?") == PatternKey("Create 3 tables?") {
		t.Error("different prompts share a key")
	}
}

func TestDangerous(t *testing.T) {
	cases := []struct {
		prompt, typ string
		ctx         []string
		want        bool
	}{
		{"Delete 3 tables? (yes/no):", TypeYesNo, nil, true},
		{"Proceed anyway? (y,N)", TypeYesNo, []string{"disk.img contains a ext4 file system"}, true},
		{"Proceed anyway? (y,N)", TypeYesNo, []string{"WARNING: data on /dev/sdb will be lost"}, true},
		{"Do you want to continue? [Y/n]", TypeYesNo, []string{"Need to get 2 MB of archives."}, false},
		{"[sudo] password for root:", TypePassword, []string{"rm -rf /"}, false},
		{"Are you sure you want to reset the cluster? [y/N]", TypeYesNo, nil, true},
		{"Continue? [y/N]", TypeYesNo, []string{"The following packages will be REMOVED:"}, true},
	}
	for _, tc := range cases {
		if got, why := Dangerous(tc.prompt, tc.typ, tc.ctx); got != tc.want {
			t.Errorf("Dangerous(%q, %v) = %v (%s), want %v", tc.prompt, tc.ctx, got, why, tc.want)
		}
	}
}

func TestInfer(t *testing.T) {
	s, w := Infer("Password:", TypePassword, nil, []Learned{{Input: "hunter2", Successes: 9, Total: 9}})
	if len(s) != 0 || len(w) == 0 {
		t.Fatalf("password: %v %v", s, w)
	}
	s, _ = Infer("Continue? [y/N]", TypeYesNo, nil, nil)
	if s[0].Input != "n" || s[1].Input != "y" {
		t.Fatalf("[y/N] default: %v", s)
	}
	// However often "yes" was taught, a dangerous prompt's first
	// suggestion declines (issue 14: learned answers used to rank first).
	s, w = Infer("Wipe the disk? (yes/no)", TypeYesNo, nil, []Learned{{Input: "yes", Successes: 10, Total: 10}})
	if s[0].Input != "no" || s[1].Input != "yes" || s[1].Source != SourceLearned || !strings.Contains(s[1].Reasoning, "10/10") || !strings.Contains(w[0], "dangerous") {
		t.Fatalf("the safe answer is not first: %v %v", s, w)
	}
	// A prompt worded as a secret gets no suggestion whatever type the
	// client claims, and a learned value that looks like a key is dropped.
	if s, _ = Infer("API token:", TypeText, nil, []Learned{{Input: "abc", Successes: 1, Total: 1}}); len(s) != 0 {
		t.Fatalf("secret prompt typed text: %v", s)
	}
	if s, _ = Infer("Name:", TypeText, nil, []Learned{{Input: "ghp_" + strings.Repeat("a1B2", 9), Successes: 1, Total: 1}}); len(s) == 0 || s[0].Source == SourceLearned {
		t.Fatalf("secret-looking learned value: %v", s)
	}
	s, _ = Infer("Which fruit?", TypeChoice, []string{"[1] apple", "[2] pear", "a) all"}, nil)
	if len(s) != 3 || s[2].Input != "a" {
		t.Fatalf("menu: %v", s)
	}
	s, _ = Infer("Save as (report.pdf):", TypePath, nil, nil)
	if s[0].Input != "report.pdf" || s[1].Input != "./report.pdf" || !strings.HasPrefix(s[2].Input, os.TempDir()) {
		t.Fatalf("path: %v", s)
	}
}

func TestCheckSessionID(t *testing.T) {
	for _, id := range []string{"", "..", "../x", "a/b", "a\\b", ".hidden", "a..b", strings.Repeat("x", 129), "a b", "x\x00"} {
		if CheckSessionID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
	for _, id := range []string{"abc", "build-42", "s_1.2"} {
		if err := CheckSessionID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
}

func TestStoreConcurrentWriters(t *testing.T) {
	forEachStore(t, StoreConfig{}, testStoreConcurrentWriters)
}

func testStoreConcurrentWriters(t *testing.T, s store) {
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				if _, _, err := s.Record(context.Background(), Event{SessionID: "w", PromptText: "Continue? [y/N]", Input: "y",
					Success: true, Source: "user_typed", PromptType: TypeYesNo}); err != nil {
					errs <- err
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
	l, err := s.Learned(context.Background(), "Continue? [y/N]", "w")
	if err != nil || len(l) != 1 || l[0].Successes != 500 {
		t.Fatalf("learned %+v %v", l, err)
	}
	h, err := s.History(context.Background(), "w", 1000)
	if err != nil || len(h) != 500 {
		t.Fatalf("history %d %v", len(h), err)
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"a\nb", "\x1b[31mx\x1b[0m\r\ny", "\r\r\n", "\x1b]0;t\x07$ "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, _ := Clean(b)
		for _, l := range lines {
			if strings.ContainsAny(l.Text, "\x1b\r\n") || l.Pos > len(b) {
				t.Fatalf("line %q at %d", l.Text, l.Pos)
			}
		}
	})
}

func TestSafeAnswer(t *testing.T) {
	for _, tc := range []struct {
		prompt, typ string
		context     []string
		want        string
	}{
		{"Delete everything? [y/N]", TypeYesNo, nil, "n"},
		{"Drop database prod? (yes/no):", TypeYesNo, nil, "no"},
		{"Discard this hunk from worktree [y,n,q,a,d,e,?]?", TypeYesNo, nil, "n"},
		{"Overwrite? (o)verwrite, (s)kip [o,s,q]", TypeChoice, nil, "q"},
		{"Select:", TypeChoice, []string{"1) wipe disk", "2) cancel"}, "2"},
		{"rm: remove regular file 'a'?", TypeYesNo, nil, "n"},
	} {
		got, ok := safeAnswer(tc.prompt, tc.typ, tc.context)
		if !ok || got != tc.want {
			t.Errorf("safeAnswer(%q): got %q %v, want %q", tc.prompt, got, ok, tc.want)
		}
	}
}

func TestSecretPrompt(t *testing.T) {
	for _, p := range []string{"Password for 'https://user@github.com':", "API token:", "Enter passphrase for key '/root/.ssh/id_rsa':",
		"AWS Secret Access Key [None]:", "Enter the one-time code:", "Enter PIN:", "Verification code:", "2FA code:",
		"[sudo] password for alice:", "Two-factor authentication code:", "Enter OTP:", "Access key ID:", "Recovery code:"} {
		if !SecretPrompt(p) {
			t.Errorf("SecretPrompt(%q) = false", p)
		}
	}
	for _, p := range []string{"Continue? [y/N]", "Username:", "Did the tests pass?", "Enter file in which to save the key (/root/.ssh/id_rsa):", "Save as:"} {
		if SecretPrompt(p) {
			t.Errorf("SecretPrompt(%q) = true", p)
		}
	}
}

func TestSecretValue(t *testing.T) {
	for _, v := range []string{"AKIAIOSFODNN7EXAMPLE", "ghp_" + strings.Repeat("aB3d", 9), "github_pat_11ABCDEFG0123456789_abcdefghijkl",
		"xoxb-1234567890-abcdefghij", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "-----BEGIN OPENSSH PRIVATE KEY-----",
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"hunter2-S3cret!xQ", "export TOKEN=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo"} {
		if !SecretValue(v) {
			t.Errorf("SecretValue(%q) = false", v)
		}
	}
	for _, v := range []string{"y", "no", "./", "/home/alice/Projects/classifierd-2", "alice@example.com", "Fix the parser for long words",
		"3", "/tmp/report.pdf", "internationalization"} {
		if SecretValue(v) {
			t.Errorf("SecretValue(%q) = true", v)
		}
	}
}

func TestStoreRetentionByAge(t *testing.T) {
	forEachStore(t, StoreConfig{MaxAge: time.Hour}, testStoreRetentionByAge)
}

func testStoreRetentionByAge(t *testing.T, s store) {
	ctx := context.Background()
	for _, when := range []time.Time{time.Now().Add(-2 * time.Hour), time.Now()} {
		if _, _, err := s.Record(ctx, Event{SessionID: "a", PromptText: "Continue? [y/N]", Input: "y", Success: true,
			Source: "user_typed", PromptType: TypeYesNo, Time: when}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(ctx, "a"); err != nil || n != 1 {
		t.Fatalf("got %d events (%v), want the recent one", n, err)
	}
}

// TestCorpusExamplesAreCurrent fails when the corpus changed and the
// examples the daemon ships were not regenerated.
func TestCorpusExamplesAreCurrent(t *testing.T) {
	caps, err := LoadCaptures("testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	want, err := MarshalCorpusExamples(CorpusExamplesOf(caps))
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(corpusJSON) {
		t.Fatalf("%s does not match the corpus: run `go run ./tools/terminal-eval -write-examples`", CorpusExamplesFile)
	}
	shipped, err := ShippedCorpusExamples()
	if err != nil || len(shipped) < 300 {
		t.Fatalf("shipped examples: %d, %v; want the corpus's 300+", len(shipped), err)
	}
}
