package terminal

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sixteenthPassPrompts are the sixteenth hostile pass's (A) prompts ending
// in '>' whose name holds a secret word glued to others: judged shell
// prompts (the detector says command), their answers were kept in clear in
// GetSessionHistory and terminal.db and suggested by InferExpectedInput.
// The rest were already redacted and must stay so.
var sixteenthPassPrompts = []string{"MASTERKEY> ", "masterkey> ", "SIGNINGKEY> ", "ADMINPASS> ", "mypass> ", "keystore> ",
	"redis mypass> ", "MASTERKEY>", "Password> ", "KEY> ", "token> ", "MASTERKEY: ", "dbpasswd>"}

// sixteenthPassShells are ordinary shell and REPL prompts, '>'-ended or
// not, with a command typed at each: it must still be stored, learned and
// suggested when the prompt type is command.
var sixteenthPassShells = [][2]string{
	{"user@host:~$ ", "ls -la"}, {"mysql> ", "SELECT 1;"}, {">>> ", "print(1)"}, {"irb(main):001:0> ", "puts 1"},
	{`PS C:\Users\bob> `, "Get-ChildItem"}, {"sqlite> ", ".tables"}, {"redis 127.0.0.1:6379> ", "GET foo"},
	{"(gdb) ", "info registers"}, {"ftp> ", "get notes.txt"}, {"psql=# ", "SELECT now();"},
	{"cqlsh:mykeyspace> ", "DESCRIBE TABLES;"}, {`PS C:\Users\mickey> `, "dir"}, {"(Pdb) ", "next"},
	// Names that hold a secret word's letters but name a database or a
	// tool (the review of the sixteenth pass's fix).
	{"keycloak=> ", "SELECT 1;"}, {"keycloak> ", "help"}, {"hotkeys> ", "list"},
}

// sixteenthPassCommands are command lines holding a secret (the second
// of each pair) in shapes the earlier passes did not know: fish's set -x,
// Windows' setx, net use and cmdkey, csh's setenv, PowerShell's $env:,
// aws configure set, httpie, iwconfig, wpa_cli.
var sixteenthPassCommands = [][2]string{
	{"set -x DB_PASSWORD qZx16c01", "qZx16c01"},
	{"set -gx API_TOKEN qZx16c02", "qZx16c02"},
	{"setx API_TOKEN qZx16c03", "qZx16c03"},
	{`net use \\srv\share /user:alice qZx16c04!`, "qZx16c04"},
	{"aws configure set aws_secret_access_key qZx16c05", "qZx16c05"},
	{`net use Z: \\srv\share qZx16c06 /user:alice`, "qZx16c06"},
	{"setenv DB_PASSWORD qZx16c07", "qZx16c07"},
	{"set -Ux GITHUB_TOKEN qZx16c08", "qZx16c08"},
	{"$env:API_KEY = 'qZx16c09'", "qZx16c09"},
	{"Set-Item env:API_KEY qZx16c21", "qZx16c21"}, {"Set-Item -Path env:DB_PASSWORD -Value 'qZx16c22'", "qZx16c22"},
	{"cmdkey /add:srv /user:u /pass:qZx16c10", "qZx16c10"},
	{"http -a alice:qZx16c11 example.org", "qZx16c11"},
	{"iwconfig wlan0 key s:qZx16c12", "qZx16c12"},
	{`wpa_cli set_network 0 psk '"qZx16c13"'`, "qZx16c13"},
	{"aws configure set default.aws_session_token qZx16c14", "qZx16c14"},
}

// shellPrompt16 is the shell prompt the commands are typed at.
const shellPrompt16 = "bob@host:~/src$ "

// sixteenthPassOrdinary are commands of the same programs without a
// secret: they must still be stored and learned.
var sixteenthPassOrdinary = []string{"set -x PATH /usr/local/bin", "set -o pipefail", "aws configure set region eu-west-1",
	`setx PATH C:\bin`, `net use Z: \\srv\share`, `net use \\srv\share /user:alice *`, "cmdkey /list",
	"$env:Path = 'C:\\bin'", "kubectl set image deploy/web web=nginx:1.27", "http GET example.org", "iwconfig wlan0"}

// TestSixteenthPassSecrets is the sixteenth hostile pass's (A) finding
// (secrets16a.py: 5 of 95 new cases kept): what was typed at a '>' prompt
// whose name holds a secret word, and the command lines of
// sixteenthPassCommands, were kept in clear. Each is now judged secret
// whatever the prompt type (command, as the detector says, text or
// none), stored with its prompt type password, never returned, learned or
// suggested, in both stores with sharing on; the ordinary shell prompts
// and commands are still commands, stored, learned and suggested.
func TestSixteenthPassSecrets(t *testing.T) {
	answer := func(i int) string { return fmt.Sprintf("qZx16p%02d", i) }
	for i, p := range sixteenthPassPrompts {
		if strings.HasSuffix(strings.TrimSpace(p), ">") && !SecretPrompt(p) {
			t.Errorf("SecretPrompt(%q) = false", p)
		}
		for _, typ := range []string{TypeCommand, TypeText, ""} {
			if !IsSecret(p, typ, answer(i), TTYState{}) {
				t.Errorf("%q answered %q (type %q): not judged secret", p, answer(i), typ)
			}
		}
		if sg, _ := Infer(p, TypeCommand, nil, []Learned{{Input: answer(i), Successes: 3, Total: 3}}); len(sg) != 0 {
			t.Errorf("Infer(%q, command) suggests %+v", p, sg)
		}
	}
	for _, sh := range sixteenthPassShells {
		if SecretPrompt(sh[0]) || IsSecret(sh[0], TypeCommand, sh[1], TTYState{}) || !judgePrompt(sh[0]).shell {
			t.Errorf("shell prompt %q answered %q: judged secret or not a shell prompt", sh[0], sh[1])
		}
	}
	shell := shellPrompt16
	for _, c := range sixteenthPassCommands {
		if !SecretValue(c[0]) || !IsSecret(shell, TypeCommand, c[0], TTYState{}) {
			t.Errorf("%q: not judged secret", c[0])
		}
	}
	for _, c := range sixteenthPassOrdinary {
		if SecretValue(c) || IsSecret(shell, TypeCommand, c, TTYState{}) {
			t.Errorf("ordinary %q: judged secret", c)
		}
	}
	ctx := context.Background()
	forEachStore(t, StoreConfig{ShareLearned: true}, func(t *testing.T, s store) {
		for i, p := range sixteenthPassPrompts {
			got, learned, err := s.Record(ctx, Event{SessionID: "teach-16", PromptText: p, Input: answer(i), Success: true,
				Source: "user_typed", PromptType: TypeCommand})
			if err != nil || learned || got.Input != Redacted || got.SecretMAC == "" {
				t.Fatalf("Record(%q): %+v learned %v %v", p, got, learned, err)
			}
			if SecretPrompt(p) && got.PromptType != TypePassword {
				t.Errorf("Record(%q): stored with prompt type %q, want password", p, got.PromptType)
			}
		}
		for _, sh := range sixteenthPassShells {
			if _, learned, err := s.Record(ctx, Event{SessionID: "teach-16", PromptText: sh[0], Input: sh[1], Success: true,
				Source: "user_typed", PromptType: TypeCommand}); err != nil || !learned {
				t.Fatalf("Record(%q, %q): learned %v %v", sh[0], sh[1], learned, err)
			}
		}
		for _, c := range sixteenthPassCommands {
			if got, learned, err := s.Record(ctx, Event{SessionID: "shell-16", PromptText: shell, Input: c[0], Success: true,
				Source: "user_typed", PromptType: TypeCommand}); err != nil || learned || got.Input != Redacted {
				t.Fatalf("Record(%q): %q learned %v %v", c[0], got.Input, learned, err)
			}
		}
		for _, c := range sixteenthPassOrdinary {
			if _, learned, err := s.Record(ctx, Event{SessionID: "shell-16", PromptText: shell, Input: c, Success: true,
				Source: "user_typed", PromptType: TypeCommand}); err != nil || !learned {
				t.Fatalf("Record(%q): learned %v %v", c, learned, err)
			}
		}
		var returned []string
		for _, session := range []string{"teach-16", "shell-16"} {
			h, err := s.History(ctx, session, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range h {
				returned = append(returned, e.Input)
			}
		}
		suggest := func(prompt string) {
			l, err := s.Learned(ctx, prompt, "another-16")
			if err != nil {
				t.Fatal(err)
			}
			sg, _ := Infer(prompt, TypeCommand, nil, l)
			for _, x := range sg {
				returned = append(returned, x.Input)
			}
		}
		for _, p := range sixteenthPassPrompts {
			suggest(p)
		}
		for _, sh := range sixteenthPassShells {
			suggest(sh[0])
		}
		suggest(shell)
		all, raw := "\n"+strings.Join(returned, "\n")+"\n", string(storeBytes(t, s))
		for i, p := range sixteenthPassPrompts {
			if strings.Contains(all, answer(i)) || strings.Contains(raw, answer(i)) {
				t.Errorf("the answer to %q was returned, suggested or stored", p)
			}
		}
		for _, c := range sixteenthPassCommands {
			if strings.Contains(all, c[1]) || strings.Contains(raw, c[1]) {
				t.Errorf("%q: its secret was returned, suggested or stored", c[0])
			}
		}
		for _, sh := range sixteenthPassShells {
			if strings.Count(all, "\n"+sh[1]+"\n") < 2 || !strings.Contains(raw, sh[1]) {
				t.Errorf("%q at %q was not returned, suggested to another session and stored", sh[1], sh[0])
			}
		}
		for _, c := range sixteenthPassOrdinary {
			if strings.Count(all, "\n"+c+"\n") < 2 || !strings.Contains(raw, c) {
				t.Errorf("ordinary %q was not returned, suggested to another session and stored", c)
			}
		}
	})
}

// TestSixteenthPassRejudgesStored: an answer to "MASTERKEY> " that the
// version 2 rules stored in clear is returned redacted (SecretRules
// version 3 judges it again when it is read).
func TestSixteenthPassRejudgesStored(t *testing.T) {
	s, err := OpenStore(filepath.Join(t.TempDir(), "t.db"), StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, ev := range [][2]string{{"MASTERKEY> ", "qZx16old"}, {shellPrompt16, "set -x DB_PASSWORD qZx16old2"}, {"mysql> ", "SELECT 1;"}} {
		if _, err := s.db.Exec(`INSERT INTO events(id, session_id, prompt_text, input_text, success, input_source, response_time_ms, created_at, prompt_type, pattern_key, rules)
			VALUES (?,?,?,?,1,'user_typed',0,?,?,?,2)`, fmt.Sprint("old", i), "s", ev[0], ev[1], time.Now().Add(time.Duration(i)*time.Millisecond).UnixNano(),
			TypeCommand, PatternKey(ev[0])); err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.History(context.Background(), "s", 10)
	if err != nil || len(h) != 3 {
		t.Fatalf("History: %d events, %v", len(h), err)
	}
	if h[0].Input != Redacted || h[1].Input != Redacted || h[2].Input != "SELECT 1;" {
		t.Errorf("History returned %q, %q, %q; want the first two redacted and the last kept", h[0].Input, h[1].Input, h[2].Input)
	}
}
