package terminal

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
)

// loadLines reads a test data file of one entry a line, "#" lines and
// blank lines skipped, "\n" written for a newline.
func loadLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, strings.ReplaceAll(l, `\n`, "\n"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ninthPassValues are typed at each prompt of the ninth pass's table: a
// four-digit PIN (the probe's default), a short word, a word with a digit,
// none of them secret by its shape alone.
var ninthPassValues = []string{"4921", "hunter", "qZx7j"}

// TestNinthPassSecretPrompts is the ninth hostile pass's finding: 66 of
// its 177 secret prompts (glued identifiers, languages the secret words
// miss, echo-off cues in words, security questions, card numbers, keys
// with an overriding word) kept the typed value in clear. Every value
// typed at every one is now judged secret, never stored in clear, never
// counted as learned and never suggested, in both stores with sharing on.
func TestNinthPassSecretPrompts(t *testing.T) {
	prompts := loadLines(t, "testdata/secret_prompts9.txt")
	if len(prompts) < 170 {
		t.Fatalf("%d prompts, want 170+", len(prompts))
	}
	missed := 0
	for _, p := range prompts {
		for _, v := range ninthPassValues {
			for _, typ := range []string{TypeText, ""} {
				if !IsSecret(p, typ, v, TTYState{}) {
					missed++
					t.Errorf("%q answered %q (type %q): not judged secret", p, v, typ)
				}
			}
		}
	}
	t.Logf("%d prompts, %d answers judged not secret", len(prompts), missed)
	ctx := context.Background()
	forEachStore(t, StoreConfig{ShareLearned: true}, func(t *testing.T, s store) {
		for _, p := range prompts {
			for _, v := range ninthPassValues {
				got, learned, err := s.Record(ctx, Event{SessionID: "teach-9", PromptText: p, Input: v, Success: true,
					Source: "user_typed", PromptType: TypeText})
				if err != nil || learned || got.Input != Redacted || got.SecretLen != len([]rune(v)) || got.SecretMAC == "" {
					t.Fatalf("Record(%q, %q): %+v learned %v %v", p, v, got, learned, err)
				}
			}
		}
		h, err := s.History(ctx, "teach-9", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range h {
			if e.Input != Redacted {
				t.Errorf("history of %q holds %q", e.PromptText, e.Input)
			}
		}
		for _, p := range prompts {
			l, err := s.Learned(ctx, p, "another-9")
			if err != nil || len(l) != 0 {
				t.Errorf("Learned(%q) from another session: %+v %v", p, l, err)
			}
			sg, _ := Infer(p, TypeText, nil, []Learned{{Input: "hunter", Successes: 3, Total: 3}})
			for _, x := range sg {
				if x.Source == SourceLearned {
					t.Errorf("Infer(%q) suggests the learned %q", p, x.Input)
				}
			}
		}
		raw := storeBytes(t, s)
		for _, v := range []string{"hunter", "qZx7j"} {
			if strings.Contains(string(raw), v) {
				t.Errorf("%q is in the store's bytes", v)
			}
		}
	})
}

// commandTable is testdata/secret_commands9.txt: command lines holding a
// secret (with the secret) and ordinary ones.
func commandTable(t testing.TB) (secret [][2]string, ordinary []string) {
	for _, l := range loadLines(t, "testdata/secret_commands9.txt") {
		if c, s, ok := strings.Cut(l, "\t"); ok {
			secret = append(secret, [2]string{c, s})
		} else {
			ordinary = append(ordinary, l)
		}
	}
	return secret, ordinary
}

// TestNinthPassCommands: 25 of the ninth pass's 48 secret values typed at
// a shell prompt were kept in clear (a quoted SQL password, IDENTIFIED
// BY, mysqladmin's password argument, a key in a query string, an
// Authorization header, user,password, user/password@service, az -p,
// usermod -p, openssl passwd, a base32 seed, a card number, a recovery
// phrase). Each command holding a secret is now kept as a length and
// keyed hash only, never returned or suggested; ordinary commands are
// still stored and learned.
func TestNinthPassCommands(t *testing.T) {
	secret, ordinary := commandTable(t)
	const prompt = "bob@host:~/src$ "
	for _, c := range secret {
		if !IsSecret(prompt, "", c[0], TTYState{}) {
			t.Errorf("%q: not judged secret", c[0])
		}
	}
	for _, c := range ordinary {
		if IsSecret(prompt, "", c, TTYState{}) {
			t.Errorf("ordinary %q: judged secret", c)
		}
	}
	ctx := context.Background()
	forEachStore(t, StoreConfig{ShareLearned: true}, func(t *testing.T, s store) {
		for _, c := range secret {
			got, learned, err := s.Record(ctx, Event{SessionID: "shell-9", PromptText: prompt, Input: c[0], Success: true, Source: "user_typed"})
			if err != nil || learned || got.Input != Redacted {
				t.Fatalf("Record(%q): %q learned %v %v", c[0], got.Input, learned, err)
			}
		}
		for _, c := range ordinary {
			if _, learned, err := s.Record(ctx, Event{SessionID: "shell-9", PromptText: prompt, Input: c, Success: true, Source: "user_typed"}); err != nil || !learned {
				t.Fatalf("Record(%q): learned %v %v", c, learned, err)
			}
		}
		h, err := s.History(ctx, "shell-9", 1000)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Learned(ctx, prompt, "another-9")
		if err != nil {
			t.Fatal(err)
		}
		sg, _ := Infer(prompt, TypeCommand, nil, l)
		var returned []string
		for _, e := range h {
			returned = append(returned, e.Input)
		}
		for _, x := range sg {
			returned = append(returned, x.Input)
		}
		all, raw := strings.Join(returned, "\n"), string(storeBytes(t, s))
		for _, c := range secret {
			if strings.Contains(all, c[1]) || strings.Contains(raw, c[1]) {
				t.Errorf("%q: its secret was returned, suggested or stored", c[0])
			}
		}
		for _, c := range ordinary {
			if !strings.Contains(all, c) || !strings.Contains(raw, c) {
				t.Errorf("ordinary %q was not returned and stored", c)
			}
		}
	})
}

// TestNinthPassPromptText: secrets shown in a prompt's own text after a
// label in any language, or in a shape (a card number, user/password@,
// a recovery phrase) are masked in what is stored.
func TestNinthPassPromptText(t *testing.T) {
	for _, l := range loadLines(t, "testdata/secret_prompt_text9.txt") {
		p, secret, _ := strings.Cut(l, "\t")
		got := MaskSecrets(p)
		if strings.Contains(got, secret) || !strings.Contains(got, SecretMask) {
			t.Errorf("MaskSecrets(%q) = %q", p, got)
		}
		if strings.Contains(PatternKey(p), strings.ToLower(secret)) {
			t.Errorf("PatternKey(%q) holds the secret", p)
		}
	}
}

// TestPlainAnswerOnCorpus prints, for the waiting prompts of the
// detection corpus (real programs' screens the non-secret fields were not
// written from), how many would keep a typical answer of their type in
// clear under the inverted default (yes/no "y", a choice "1", a path
// "/tmp/x", a command "ls", a text "alpha"), and fails if a password
// prompt would keep one. Run it with -v for the figures.
func TestPlainAnswerOnCorpus(t *testing.T) {
	ex, err := ShippedCorpusExamples()
	if err != nil {
		t.Fatal(err)
	}
	answer := map[string]string{TypeYesNo: "y", TypeChoice: "1", TypePath: "/tmp/x", TypeCommand: "ls", TypeText: "alpha", TypePassword: "alpha"}
	kept, total := map[string]int{}, map[string]int{}
	for _, e := range ex {
		v, ok := answer[e.Type]
		if !ok {
			continue
		}
		total[e.Type]++
		if IsSecret(e.Text, "", v, TTYState{}) {
			if e.Type != TypePassword {
				t.Logf("no longer learns (%s, %q): %q", e.Type, v, clipText(e.Text, 120))
			}
			continue
		}
		kept[e.Type]++
		if e.Type == TypePassword {
			t.Errorf("password prompt %s keeps %q in clear", e.Program, v)
		}
	}
	for _, typ := range []string{TypeYesNo, TypeChoice, TypePath, TypeCommand, TypeText, TypePassword} {
		t.Logf("%s: %d of %d prompts keep %q in clear", typ, kept[typ], total[typ], answer[typ])
	}
}
