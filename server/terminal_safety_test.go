package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/terminal"
)

// Issue 14: secrets, poisoning, bounds and retention, through bufconn with
// the generated client and a real SQLite store.

func track(t *testing.T, c terminalpb.TerminalServiceClient, req *terminalpb.TrackInputEventRequest) *terminalpb.TrackInputEventResponse {
	t.Helper()
	if req.InputSource == "" {
		req.InputSource = "user_typed"
	}
	r, err := c.TrackInputEvent(context.Background(), req)
	if err != nil {
		t.Fatalf("TrackInputEvent(%q): %v", req.GetPromptText(), err)
	}
	return r
}

func TestTerminalSecretsNeverStoredOrReturned(t *testing.T) {
	c, _, path := newTerminalServer(t, zeroEmbedder{}, terminal.StoreConfig{ShareLearned: true})
	ctx := context.Background()
	bp := func(b bool) *bool { return &b }
	cases := []struct {
		name, prompt, typ, input string
		echoOff, canonical       *bool
	}{
		{"git credential prompt claimed text", "Password for 'https://alice@github.com':", "text", "Pw-one-typed-1", nil, nil},
		{"api token claimed text", "API token:", "text", "Pw-two-typed-2", nil, nil},
		{"ssh passphrase, no hint", "Enter passphrase for key '/home/a/.ssh/id_ed25519':", "", "Pw-three-typed-3", nil, nil},
		{"aws secret key claimed text", "AWS Secret Access Key [None]:", "text", "Pw-four-typed-4", nil, nil},
		{"one-time code claimed text", "Enter the one-time code from your app:", "text", "731904", nil, nil},
		// Eight digits: the store keeps random hex (event ids, MACs), in
		// which a four-digit secret turns up by chance (CI saw "4711" in
		// the WAL once); eight digits turn up about once in 4e9 positions.
		{"pin claimed yes_no", "Enter PIN:", "yes_no", "47118203", nil, nil},
		{"verification code", "Verification code:", "text", "552201", nil, nil},
		{"2fa", "2FA code:", "text", "883344", nil, nil},
		{"sudo password claimed command", "[sudo] password for alice:", "command", "Pw-five-typed-5", nil, nil},
		{"echo off in canonical mode", "Enter value:", "text", "Pw-six-typed-6", bp(true), bp(true)},
		{"echo off, mode unknown", "Value:", "text", "Pw-seven-typed-7", bp(true), nil},
		{"github token at a name prompt", "Name:", "text", "ghp_" + strings.Repeat("Zq9x", 9), nil, nil},
		{"aws key id at a text prompt", "Value:", "text", "AKIAQWERTYUIOPASDFGH", nil, nil},
		{"slack token", "Value:", "text", "xoxb-2048-abcdefghijklmnop", nil, nil},
		{"jwt", "Header:", "text", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl", nil, nil},
		{"pem private key", "Paste:", "text", "-----BEGIN RSA PRIVATE KEY-----", nil, nil},
		{"long hex", "Value:", "text", strings.Repeat("3fa9c2", 8), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "sec", PromptText: tc.prompt, PromptType: tc.typ,
				InputText: tc.input, Success: true, EchoOff: tc.echoOff, CanonicalMode: tc.canonical})
			if r.GetPatternUpdated() {
				t.Fatalf("a secret taught a pattern")
			}
			inf, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: tc.prompt, PromptType: tc.typ, SessionId: "sec"})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range inf.GetSuggestions() {
				if s.GetInputText() == tc.input {
					t.Fatalf("secret suggested back: %v", inf)
				}
			}
		})
	}
	h, err := c.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "sec", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetEvents()) != len(cases) {
		t.Fatalf("got %d events, want %d", len(h.GetEvents()), len(cases))
	}
	for _, e := range h.GetEvents() {
		if e.GetInputText() != terminal.Redacted {
			t.Errorf("history returns %q for %q", e.GetInputText(), e.GetPromptText())
		}
	}
	for _, f := range []string{path, path + "-wal"} {
		raw, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, tc := range cases {
			if bytes.Contains(raw, []byte(tc.input)) {
				t.Errorf("%s holds the secret of %q", filepath.Base(f), tc.name)
			}
		}
	}

	t.Run("echo off in raw mode alone is no evidence", func(t *testing.T) {
		// Line editors turn echo and canonical mode off and echo
		// themselves; the prompt and value still decide.
		no, yes := false, true
		track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "raw", PromptText: "sqlite>", PromptType: "command",
			InputText: "select 1;", Success: true, EchoOff: &yes, CanonicalMode: &no})
		h, err := c.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "raw"})
		if err != nil || h.GetEvents()[0].GetInputText() != "select 1;" {
			t.Fatalf("got %v, %v", h, err)
		}
	})
	t.Run("a secret prompt gets no suggestion whatever prompt_type says", func(t *testing.T) {
		inf, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: "Password for 'https://bob@host':", PromptType: "text"})
		if err != nil || len(inf.GetSuggestions()) != 0 || len(inf.GetWarnings()) == 0 {
			t.Fatalf("got %v, %v", inf, err)
		}
	})
}

func TestTerminalStoreFilePermissions(t *testing.T) {
	old := syscall.Umask(0) // the most permissive umask: modes must not depend on it
	defer syscall.Umask(old)
	c, _, path := newTerminalServer(t, zeroEmbedder{}, terminal.StoreConfig{})
	track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "p", PromptText: "Continue? [y/N]", PromptType: "yes_no", InputText: "n", Success: true})
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", filepath.Base(f), st.Mode().Perm())
		}
	}
	st, err := os.Stat(filepath.Dir(path))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v, %v, want 0700", st.Mode().Perm(), err)
	}
}

func TestTerminalLearnedAnswersAreScoped(t *testing.T) {
	ctx := context.Background()
	const dangerous = "Delete all tables in prod? [y/N]"
	teach := func(t *testing.T, c terminalpb.TerminalServiceClient) {
		for i := 0; i < 10; i++ {
			track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "attacker", PromptText: dangerous, PromptType: "yes_no", InputText: "y", Success: true})
			track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "attacker", PromptText: "Environment name:", PromptType: "text", InputText: "staging", Success: true})
		}
	}
	first := func(t *testing.T, c terminalpb.TerminalServiceClient, session, prompt string) (*terminalpb.InputSuggestion, []*terminalpb.InputSuggestion) {
		t.Helper()
		r, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: prompt, SessionId: session})
		if err != nil || len(r.GetSuggestions()) == 0 {
			t.Fatalf("InferExpectedInput(%s): %v, %v", session, r, err)
		}
		return r.GetSuggestions()[0], r.GetSuggestions()
	}
	learnedY := func(sugs []*terminalpb.InputSuggestion, input string) bool {
		for _, s := range sugs {
			if s.GetInputText() == input && s.GetSource() == "pattern_learning" {
				return true
			}
		}
		return false
	}

	t.Run("not shared", func(t *testing.T) {
		c, _, _ := newTerminalServer(t, zeroEmbedder{}, terminal.StoreConfig{})
		teach(t, c)
		for _, session := range []string{"victim", ""} {
			f, all := first(t, c, session, dangerous)
			if f.GetInputText() != "n" || learnedY(all, "y") {
				t.Fatalf("session %q: got %v, want n first and no learned y", session, all)
			}
			if _, all = first(t, c, session, "Environment name:"); learnedY(all, "staging") {
				t.Fatalf("session %q learned another session's answer: %v", session, all)
			}
		}
		// The teacher is suggested its own answers, but a dangerous
		// prompt's first suggestion still declines.
		f, all := first(t, c, "attacker", dangerous)
		if f.GetInputText() != "n" || !learnedY(all, "y") {
			t.Fatalf("attacker: %v", all)
		}
		if f, _ := first(t, c, "attacker", "Environment name:"); f.GetInputText() != "staging" {
			t.Fatalf("attacker lost its own answer: %v", f)
		}
	})
	t.Run("shared by the operator", func(t *testing.T) {
		c, _, _ := newTerminalServer(t, zeroEmbedder{}, terminal.StoreConfig{ShareLearned: true})
		teach(t, c)
		f, all := first(t, c, "victim", dangerous)
		if f.GetInputText() != "n" || !learnedY(all, "y") {
			t.Fatalf("shared, dangerous: %v", all)
		}
		if f, _ := first(t, c, "victim", "Environment name:"); f.GetInputText() != "staging" {
			t.Fatalf("shared, safe: %v", f)
		}
	})
}

// recordingEmbedder is zeroEmbedder that remembers the longest word it
// was given and can block until its context ends.
type recordingEmbedder struct {
	mu      sync.Mutex
	longest int
	block   bool
}

func (e *recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	for _, tx := range texts {
		for _, w := range strings.Fields(tx) {
			e.longest = max(e.longest, len(w))
		}
	}
	block := e.block
	e.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return zeroEmbedder{}.Embed(ctx, texts)
}

func TestTerminalBounds(t *testing.T) {
	emb := &recordingEmbedder{}
	c, _, _ := newTerminalServer(t, emb, terminal.StoreConfig{})
	ctx := context.Background()
	huge := strings.Repeat("A", 128<<10)

	t.Run("over the limits: INVALID_ARGUMENT before any work", func(t *testing.T) {
		_, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: huge})
		wantCode(t, err, codes.InvalidArgument)
		if errorReason(err) != "INPUT_TOO_LARGE" {
			t.Fatalf("reason %q", errorReason(err))
		}
		for _, req := range []*terminalpb.TrackInputEventRequest{
			{SessionId: "b", PromptText: huge, InputText: "y", InputSource: "user_typed"},
			{SessionId: "b", PromptText: "Name:", InputText: huge, InputSource: "user_typed"},
			{SessionId: "b", PromptText: huge, InputText: "y", InputSource: "nonsense"}, // size is checked first
		} {
			_, err := c.TrackInputEvent(ctx, req)
			wantCode(t, err, codes.InvalidArgument)
			if errorReason(err) != "INPUT_TOO_LARGE" {
				t.Fatalf("reason %q", errorReason(err))
			}
		}
		_, err = c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: "Name:", SessionContext: huge})
		wantCode(t, err, codes.InvalidArgument)
	})
	t.Run("within the limits the work is bounded", func(t *testing.T) {
		emb.mu.Lock()
		emb.longest = 0
		emb.mu.Unlock()
		word := strings.Repeat("B", terminal.TailBytes-64)
		for _, text := range []string{word, "Continue? " + word + " [y/N] ", strings.Repeat("x\n", 30000) + word[:4000]} {
			if _, err := c.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: text}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: "b", PromptText: strings.Repeat("C", 4000),
			InputText: "y", InputSource: "user_typed"}); err != nil {
			t.Fatal(err)
		}
		emb.mu.Lock()
		defer emb.mu.Unlock()
		if emb.longest > 64 {
			t.Fatalf("the model was given a %d-byte word", emb.longest)
		}
	})
	t.Run("deadlines are honoured", func(t *testing.T) {
		emb.mu.Lock()
		emb.block = true
		emb.mu.Unlock()
		defer func() { emb.mu.Lock(); emb.block = false; emb.mu.Unlock() }()
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := c.DetectInputPrompt(dctx, &terminalpb.DetectInputPromptRequest{Text: "Continue? [y/N] "})
		wantCode(t, err, codes.DeadlineExceeded)
	})
}

func TestTerminalRetentionAndDelete(t *testing.T) {
	ctx := context.Background()
	cfg := terminal.StoreConfig{MaxPerSession: 40, MaxEvents: 100}
	c, store, path := newTerminalServer(t, zeroEmbedder{}, cfg)
	big := strings.Repeat("p", terminal.MaxPromptBytes-8)
	// A flood: 8 sessions x 60 events of the largest accepted size.
	for s := 0; s < 8; s++ {
		for i := 0; i < 60; i++ {
			track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "flood" + string(rune('a'+s)), PromptText: big + "?",
				PromptType: "text", InputText: strings.Repeat("i", terminal.MaxInputBytes-64), Success: true})
		}
	}
	for s := 0; s < 8; s++ {
		n, err := store.Count(ctx, "flood"+string(rune('a'+s)))
		if err != nil || n > cfg.MaxPerSession {
			t.Fatalf("session holds %d events (%v), bound %d", n, err, cfg.MaxPerSession)
		}
	}
	if err := store.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := store.Count(ctx, "")
	if err != nil || n > cfg.MaxEvents {
		t.Fatalf("store holds %d events (%v), bound %d", n, err, cfg.MaxEvents)
	}
	// Disk: the documented bound is about 9 KiB per retained event plus
	// the WAL's limit; 480 events were written (about 4 MiB of text).
	var size int64
	for _, f := range []string{path, path + "-wal"} {
		if st, err := os.Stat(f); err == nil {
			size += st.Size()
		}
	}
	if bound := int64(cfg.MaxEvents+64)*9<<10 + terminal.MaxWALBytes; size > bound {
		t.Fatalf("database and WAL take %d bytes, bound %d", size, bound)
	}

	t.Run("DeleteSessionHistory", func(t *testing.T) {
		track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "gone", PromptText: "Environment name:", PromptType: "text", InputText: "staging", Success: true})
		track(t, c, &terminalpb.TrackInputEventRequest{SessionId: "kept", PromptText: "Environment name:", PromptType: "text", InputText: "prod", Success: true})
		r, err := c.DeleteSessionHistory(ctx, &terminalpb.DeleteSessionHistoryRequest{SessionId: "gone"})
		if err != nil || r.GetDeletedEvents() != 1 {
			t.Fatalf("got %v, %v", r, err)
		}
		h, err := c.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "gone"})
		if err != nil || len(h.GetEvents()) != 0 {
			t.Fatalf("history after delete: %v, %v", h, err)
		}
		inf, err := c.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: "Environment name:", SessionId: "gone"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range inf.GetSuggestions() {
			if s.GetInputText() == "staging" {
				t.Fatalf("a deleted session's answer is still learned: %v", inf)
			}
		}
		if h, err := c.GetSessionHistory(ctx, &terminalpb.GetSessionHistoryRequest{SessionId: "kept"}); err != nil || len(h.GetEvents()) != 1 {
			t.Fatalf("another session's history: %v, %v", h, err)
		}
		_, err = c.DeleteSessionHistory(ctx, &terminalpb.DeleteSessionHistoryRequest{SessionId: "../x"})
		wantCode(t, err, codes.InvalidArgument)
		if errorReason(err) != "INVALID_SESSION_ID" {
			t.Fatalf("reason %q", errorReason(err))
		}
		if r, err := c.DeleteSessionHistory(ctx, &terminalpb.DeleteSessionHistoryRequest{SessionId: "never"}); err != nil || r.GetDeletedEvents() != 0 {
			t.Fatalf("unknown session: %v, %v", r, err)
		}
	})
}
