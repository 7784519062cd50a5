package terminal

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	d := fakeDetector(t)
	cases := []struct {
		name, out string
		detected  bool
		typ       string
		dangerous bool
	}{
		{"password", "Connecting...\nPassword: ", true, TypePassword, false},
		{"sudo", "[sudo] password for alice: ", true, TypePassword, false},
		{"yes/no", "Need to get 2 MB.\nDo you want to continue? [Y/n] ", true, TypeYesNo, false},
		{"dangerous prompt", "Delete 3 tables? (yes/no): ", true, TypeYesNo, true},
		{"after a warning", "WARNING: data on /dev/sdb will be lost\nProceed anyway? (y,N) ", true, TypeYesNo, true},
		{"shell", "build ok\n$ ", true, TypeCommand, false},
		{"python", ">>> ", true, TypeCommand, false},
		{"finished line", "Password:\n", false, TypePassword, false},
		{"plain output", "Build succeeded.\n", false, "", false},
		{"nothing", "\n\n", false, "", false},
		{"whitespace", " \t\r\n ", false, "", false},
		{"spinner", "fetching\n\u2819", false, "", false},
		{"full screen", "\x1b[?1049h\x1b[H\x1b[2Jsome page\x1b[40;1H", true, TypeCommand, false},
		{"full screen left", "\x1b[?1049hpage\x1b[?1049l\nbye\n", false, "", false},
		{"editor", "\x1b[?1049hhello\n^G Help   ^O Write Out   ^X Exit", true, TypeText, false},
		{"more answers", "(enter ? for help) [Ynesfdaq?] ", true, TypeChoice, false},
		{"fix", "Inode 2 ref count is 7, should be 3.  Fix<y>? ", true, TypeYesNo, true},
		{"token", "API token: ", true, TypePassword, false},
		// Shells' own confirmations (tcsh's rmstar, zsh's rm *).
		{"shell's confirmation", "# rm *\nDo you really want to delete all files? [n/y] ", true, TypeYesNo, true},
		{"zsh's confirmation", "zsh: sure you want to delete all 3 files in /tmp/x [yn]? ", true, TypeYesNo, true},
		{"zsh's correction", "zsh: correct 'sl' to 'ls' [nyae]? ", true, TypeChoice, false},
		{"confirming a command", "rm old.log?...", true, TypeYesNo, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Detect(context.Background(), []byte(tc.out), 0.7)
			if err != nil {
				t.Fatal(err)
			}
			if got.Detected != tc.detected {
				t.Fatalf("detected %v (%.3f, %s), want %v", got.Detected, got.Confidence, got.MatchedPattern, tc.detected)
			}
			if tc.typ != "" && got.Type != tc.typ {
				t.Errorf("type %s (%s), want %s", got.Type, got.MatchedPattern, tc.typ)
			}
			if got.Dangerous != tc.dangerous {
				t.Errorf("dangerous %v (%s), want %v", got.Dangerous, got.DangerReason, tc.dangerous)
			}
		})
	}
}

func TestDetectPosition(t *testing.T) {
	got, err := fakeDetector(t).Detect(context.Background(), []byte("one\ntwo\nPassword: "), 0.7)
	if err != nil {
		t.Fatal(err)
	}
	if got.Position != 8 || got.PromptText != "Password:" {
		t.Fatalf("position %d prompt %q, want 8 %q", got.Position, got.PromptText, "Password:")
	}
}

func TestDetectErrors(t *testing.T) {
	d := fakeDetector(t)
	for _, c := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := d.Detect(context.Background(), []byte("Password: "), c); !errors.Is(err, ErrBadConfidence) {
			t.Errorf("min confidence %v: got %v, want ErrBadConfidence", c, err)
		}
	}

	boom := errors.New("boom")
	d.emb = &fakeEmbedder{dims: 64, err: boom}
	if _, err := d.Detect(context.Background(), []byte("Password: "), 0.7); !errors.Is(err, boom) {
		t.Errorf("embedder failure: got %v, want it wrapped", err)
	}
	if _, err := NewDetector(context.Background(), &fakeEmbedder{dims: 64, err: boom}); !errors.Is(err, boom) {
		t.Errorf("NewDetector with a failing embedder: got %v, want it wrapped", err)
	}
}

// TestDetectShape checks that vectors of the wrong number or length are
// ErrEmbedding, never a vek panic.
func TestDetectShape(t *testing.T) {
	ragged := func(v [][]float32) [][]float32 { v[len(v)-1] = v[len(v)-1][:10]; return v }
	short := func(v [][]float32) [][]float32 { return v[:len(v)-1] }
	empty := func(v [][]float32) [][]float32 {
		for i := range v {
			v[i] = nil
		}
		return v
	}
	for name, reshape := range map[string]func([][]float32) [][]float32{"ragged": ragged, "short": short, "empty": empty} {
		t.Run("NewDetector/"+name, func(t *testing.T) {
			if _, err := NewDetector(context.Background(), &fakeEmbedder{dims: 64, reshape: reshape}); !errors.Is(err, ErrEmbedding) {
				t.Fatalf("got %v, want ErrEmbedding", err)
			}
		})
	}
	d := fakeDetector(t)
	for name, emb := range map[string]*fakeEmbedder{
		"other length": {dims: 32},
		"no vector":    {dims: 64, reshape: func([][]float32) [][]float32 { return nil }},
	} {
		t.Run("Detect/"+name, func(t *testing.T) {
			d.emb = emb
			if _, err := d.Detect(context.Background(), []byte("Password: "), 0.7); !errors.Is(err, ErrEmbedding) {
				t.Fatalf("got %v, want ErrEmbedding", err)
			}
		})
	}
}

func TestDetectHints(t *testing.T) {
	d := fakeDetector(t)
	cases := []struct {
		name, out string
		h         Hints
		dangerous bool
	}{
		{"partition editor", "Command (m for help): ", Hints{CommandLine: "fdisk disk.img", Program: "fdisk"}, true},
		{"program from the command line", "Command (m for help): ", Hints{CommandLine: "/sbin/gdisk disk.img"}, true},
		{"discarding hunks", "(1/2) Discard this hunk from worktree [y,n,q,a,d,s,e,?]? ", Hints{CommandLine: "git checkout -p"}, true},
		{"staging hunks", "(1/2) Stage this hunk [y,n,q,a,d,s,e,?]? ", Hints{CommandLine: "git add -p"}, false},
		{"removing a package", "Do you want to continue? [Y/n] ", Hints{CommandLine: "apt-get remove nano"}, true},
		{"installing one", "Do you want to continue? [Y/n] ", Hints{CommandLine: "apt-get install cowsay"}, false},
		{"screen only", "Command (m for help): ", Hints{}, false},
		{"password", "Password: ", Hints{CommandLine: "ssh alice@example.com"}, false},
		// A secret asked for by a command that deletes: typing it
		// confirms the deletion (keytool -delete, cryptsetup luksRemoveKey).
		{"secret confirming a deletion", "Enter keystore password:  ", Hints{CommandLine: "keytool -delete -alias web -keystore ks.p12"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.DetectWithHints(context.Background(), []byte(tc.out), tc.h, 0.7)
			if err != nil || !got.Detected {
				t.Fatalf("got %+v, %v, want detected", got, err)
			}
			if got.Dangerous != tc.dangerous || got.Dangerous && got.DangerReason == "" {
				t.Fatalf("dangerous %v (%q), want %v with a reason", got.Dangerous, got.DangerReason, tc.dangerous)
			}
		})
	}
	if _, err := d.DetectWithHints(context.Background(), []byte("$ "), Hints{CommandLine: strings.Repeat("x", MaxCommandLine+1)}, 0.7); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("long command line: got %v, want ErrBadArgument", err)
	}
}

func TestDetectPtySignals(t *testing.T) {
	d := fakeDetector(t)
	yes, no := true, false
	cases := []struct {
		name, out string
		h         Hints
		detected  bool
		typ       string
		dangerous bool
	}{
		{"silent program reading", "", Hints{ReadingInput: &yes}, true, TypeUnknown, false},
		{"silent partition editor", "", Hints{ReadingInput: &yes, Program: "sfdisk"}, true, TypeUnknown, true},
		{"count then silence", "6\n", Hints{ReadingInput: &yes}, true, "", false},
		// Not reading: a plain prompt still counts (the hub may have
		// looked a moment early), a doubtful line does not.
		{"plain prompt, not reading", "Password: ", Hints{ReadingInput: &no}, true, TypePassword, false},
		{"doubtful line, not reading", "6\n", Hints{ReadingInput: &no}, false, "", false},
		{"getpass wording-free", "Enter the value: ", Hints{EchoOff: &yes}, true, TypePassword, false},
		{"getpass, line mode said", "Code: ", Hints{EchoOff: &yes, Canonical: &yes, ReadingInput: &yes}, true, TypePassword, false},
		{"silent getpass", "", Hints{EchoOff: &yes, ReadingInput: &yes}, true, TypePassword, false},
		{"line editor is not a secret", "$ ", Hints{EchoOff: &yes, Canonical: &no, ReadingInput: &yes}, true, TypeCommand, false},
		{"secret of a harmless command", "Delete everything: ", Hints{EchoOff: &yes, CommandLine: "ssh alice@example.com"}, true, TypePassword, false},
		{"no signals, silence", "", Hints{}, false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.DetectWithHints(context.Background(), []byte(tc.out), tc.h, 0.7)
			if err != nil {
				t.Fatal(err)
			}
			if got.Detected != tc.detected {
				t.Fatalf("detected %v, want %v (%+v)", got.Detected, tc.detected, got)
			}
			if tc.typ != "" && got.Type != tc.typ {
				t.Errorf("type %q, want %q (%+v)", got.Type, tc.typ, got)
			}
			if got.Dangerous != tc.dangerous || got.Dangerous && got.DangerReason == "" {
				t.Errorf("dangerous %v (%q), want %v with a reason", got.Dangerous, got.DangerReason, tc.dangerous)
			}
			if tc.detected && got.Confidence < 0.9 && (tc.h.ReadingInput == nil || *tc.h.ReadingInput) {
				t.Errorf("confidence %.3f: the kernel's word should count at least 0.9", got.Confidence)
			}
		})
	}
}

func TestDetectLineEditor(t *testing.T) {
	d := fakeDetector(t)
	cases := []struct {
		name, out string
		detected  bool
		typ       string
	}{
		// bc prints a banner, turns bracketed paste on and reads with no prompt.
		{"banner, editor reading, no prompt", "bc 1.07\nFor details type `warranty'. \n\x1b[?2004h", true, TypeCommand},
		{"editor reading after a prompt", "\x1b[?2004hYou have: ", true, ""},
		// The line was accepted (paste mode off): the program is working.
		{"line accepted", "\x1b[?2004hcalc> 1+1\r\n\x1b[?2004l\r2\n", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Detect(context.Background(), []byte(tc.out), 0.7)
			if err != nil {
				t.Fatal(err)
			}
			if got.Detected != tc.detected || tc.typ != "" && got.Type != tc.typ {
				t.Fatalf("got %+v, want detected %v type %q", got, tc.detected, tc.typ)
			}
		})
	}
}

func TestStagedWriteCommandPromptIsDangerous(t *testing.T) {
	d := fakeDetector(t)
	out := "Welcome to fdisk.\nChanges will remain in memory only, until you decide to write them.\n\nCommand (m for help): "
	got, err := d.Detect(context.Background(), []byte(out), 0.7)
	if err != nil || !got.Detected || !got.Dangerous || got.DangerReason == "" {
		t.Fatalf("staged writes: got %+v, %v, want a dangerous command prompt with a reason", got, err)
	}
	got, err = d.Detect(context.Background(), []byte("Build finished.\n(gdb) "), 0.7)
	if err != nil || !got.Detected || got.Dangerous {
		t.Fatalf("an ordinary command prompt: got %+v, %v, want not dangerous", got, err)
	}
}
