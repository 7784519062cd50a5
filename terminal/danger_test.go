package terminal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDangerEvidence: each kind of evidence the issue names is found, by
// its meaning, in prompts and command lines of programs the corpus does not
// have.
func TestDangerEvidence(t *testing.T) {
	cases := []struct {
		name string
		in   dangerInput
		want []string
	}{
		{"overwrite question", dangerInput{Prompt: "backup.tgz exists. Overwrite? [y/N]", Type: TypeYesNo},
			[]string{"prompt_overwrite", "default_no", "question_says_destroy"}},
		{"keyed answers", dangerInput{Prompt: "(K)eep, (D)elete it, (Q)uit:", Type: TypeChoice}, []string{"prompt_destroy", "question_says_destroy"}},
		{"lose changes", dangerInput{Prompt: "Quit without saving changes? [y/N]", Type: TypeYesNo}, []string{"prompt_lose"}},
		{"question after a warning", dangerInput{Prompt: "Continue? ", Type: TypeYesNo, Context: []string{"WARNING: all data on the volume will be lost"}},
			[]string{"context_warning", "context_irreversible", "question_after_destroy"}},
		{"console in a writing mode", dangerInput{Prompt: "ntfs_db> ", Type: TypeCommand, CommandLine: "ntfs_db --write /dev/sdc1"},
			[]string{"command_write_mode", "command_disk_target", "console_writing"}},
		{"disk tool's console", dangerInput{Prompt: "vgsh> ", Type: TypeCommand, Program: "vgsh"}, []string{"program_disk_tool", "console_disk_tool"}},
		{"read-only console", dangerInput{Prompt: "xfs_db> ", Type: TypeCommand, CommandLine: "xfs_db -r disk.img"}, []string{"command_read_only"}},
		{"secret for a deletion", dangerInput{Prompt: "Store password: ", Type: TypePassword, CommandLine: "certstore --delete-entry web"},
			[]string{"command_destroy", "type_password", "secret_for_destruction"}},
		{"secret for a login", dangerInput{Prompt: "Password: ", Type: TypePassword, CommandLine: "ssh alice@example.com"}, []string{"type_password"}},
		{"an extraction's question", dangerInput{Prompt: "notes.txt? (y/n)", Type: TypeYesNo, CommandLine: "star -xw -f backup.tar"}, []string{"question_of_extraction"}},
		{"an extract subcommand", dangerInput{Prompt: "Write notes.txt? [y/n]", Type: TypeYesNo, CommandLine: "lha x backup.lzh"}, []string{"question_of_extraction"}},
		{"a listing is no extraction", dangerInput{Prompt: "Continue? [y/n]", Type: TypeYesNo, CommandLine: "star -tv -f backup.tar"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, why := tc.in.features()
			var got []string
			for i, v := range x {
				if v != 0 {
					got = append(got, dangerEvidence[i].name)
				}
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("evidence %v, want %s among it", got, w)
				}
			}
			if tc.want == nil && slices.Contains(got, "question_of_extraction") {
				t.Errorf("evidence %v: a listing extracts nothing", got)
			}
			if tc.name == "secret for a login" && slices.Contains(got, "secret_for_destruction") {
				t.Errorf("evidence %v: a login's secret is not for a deletion", got)
			}
			for i := range x {
				if x[i] == 0 && why[i] != "" {
					t.Errorf("%s has a reason %q but no evidence", dangerEvidence[i].name, why[i])
				}
			}
		})
	}
}

// TestDangerJudgement is the shipped model on prompts of the kinds,
// and on their harmless look-alikes.
func TestDangerJudgement(t *testing.T) {
	m, err := ShippedDangerModel()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   dangerInput
		want bool
	}{
		{"shell's own confirmation", dangerInput{Prompt: "Do you really want to delete all files? [n/y]", Type: TypeYesNo}, true},
		{"editor's lose-changes question", dangerInput{Prompt: "Lose changes to this file (y,n,^C)?", Type: TypeYesNo}, true},
		{"swap file", dangerInput{Prompt: "[O]pen Read-Only, (E)dit anyway, (R)ecover, (D)elete it, (Q)uit, (A)bort:", Type: TypeChoice}, true},
		{"secret for a deletion", dangerInput{Prompt: "Enter keystore password:", Type: TypePassword, CommandLine: "keytool -delete -alias web -keystore ks.p12"}, true},
		{"console in a writing mode", dangerInput{Prompt: "xfs_db> ", Type: TypeCommand, CommandLine: "xfs_db -x disk.img"}, true},
		{"the same console read-only", dangerInput{Prompt: "xfs_db> ", Type: TypeCommand, CommandLine: "xfs_db -r disk.img"}, false},
		{"installing", dangerInput{Prompt: "Do you want to continue? [Y/n]", Type: TypeYesNo, CommandLine: "apt-get install cowsay"}, false},
		{"a REPL", dangerInput{Prompt: ">>> ", Type: TypeCommand, CommandLine: "python3"}, false},
		{"a login", dangerInput{Prompt: "Password: ", Type: TypePassword, CommandLine: "ssh alice@example.com"}, false},
		{"an extraction asking of each file", dangerInput{Prompt: "extract 'notes.txt'?", Type: TypeYesNo, CommandLine: "star -xw -f backup.tar"}, true},
		{"the same question of a listing", dangerInput{Prompt: "list 'notes.txt'?", Type: TypeYesNo, CommandLine: "star -tw -f backup.tar"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, p, why := m.judge(tc.in)
			if got != tc.want || (got && why == "") {
				t.Fatalf("dangerous %v (%.3f, %q), want %v with a reason", got, p, why, tc.want)
			}
			if p < 0 || p > 1 || (p >= m.Threshold) != got {
				t.Fatalf("confidence %.3f and threshold %.3f disagree with %v", p, m.Threshold, got)
			}
		})
	}
}

// TestFitDanger: fitting moves a weight the way the data points and keeps
// the prior of evidence the data never shows; a probability is calibrated
// on data it was fitted on.
func TestFitDanger(t *testing.T) {
	n := len(dangerEvidence)
	idx := func(name string) int {
		for i, e := range dangerEvidence {
			if e.name == name {
				return i
			}
		}
		t.Fatalf("no evidence %s", name)
		return -1
	}
	sure, never := idx("prompt_sure"), idx("prompt_recover")
	var samples []DangerSample
	// "are you sure" alone: dangerous 9 times in 10.
	for i := 0; i < 40; i++ {
		x := make([]float64, n)
		x[sure] = 1
		samples = append(samples, DangerSample{Group: string(rune('a' + i%4)), X: x, Dangerous: i%10 != 0, Waiting: true})
	}
	// No evidence: never dangerous.
	for i := 0; i < 40; i++ {
		samples = append(samples, DangerSample{Group: string(rune('a' + i%4)), X: make([]float64, n), Waiting: true})
	}
	// Not waiting: not fitted at all.
	x := make([]float64, n)
	x[sure] = 1
	samples = append(samples, DangerSample{Group: "a", X: x, Dangerous: false, Waiting: false})
	m, err := FitDanger(samples, 0.01, DangerThreshold)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.probability(x); math.Abs(got-0.9) > 0.03 {
		t.Errorf("P(dangerous | are you sure) = %.3f, want 0.9 (the data's frequency)", got)
	}
	if got := m.probability(make([]float64, n)); got > 0.05 {
		t.Errorf("P(dangerous | nothing) = %.3f, want near 0", got)
	}
	if w := m.Weights[never].Weight; math.Abs(w-dangerEvidence[never].prior) > 1e-3 {
		t.Errorf("weight of unseen evidence %.3f, want its prior %.3f", w, dangerEvidence[never].prior)
	}
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	lambda, threshold, err := ChooseDanger(samples)
	if err != nil || !slices.Contains(dangerLambdas, lambda) || threshold != DangerThreshold {
		t.Fatalf("ChooseDanger = %v, %v, %v", lambda, threshold, err)
	}
}

func TestDangerModelCheck(t *testing.T) {
	m := priorModel()
	m.Threshold = 0.5
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	bad := priorModel()
	bad.Weights = bad.Weights[1:]
	if err := bad.check(); !errors.Is(err, ErrDangerModel) {
		t.Errorf("a missing weight: got %v, want ErrDangerModel", err)
	}
	bad = priorModel()
	bad.Weights[0].Feature, bad.Weights[1].Feature = bad.Weights[1].Feature, bad.Weights[0].Feature
	if err := bad.check(); !errors.Is(err, ErrDangerModel) {
		t.Errorf("weights out of order: got %v, want ErrDangerModel", err)
	}
	bad = priorModel()
	bad.Weights[2].Weight = math.NaN()
	if err := bad.check(); !errors.Is(err, ErrDangerModel) {
		t.Errorf("a NaN weight: got %v, want ErrDangerModel", err)
	}
	if _, err := fakeDetector(t).WithDangerModel(bad); !errors.Is(err, ErrDangerModel) {
		t.Errorf("WithDangerModel of a bad model: got %v, want ErrDangerModel", err)
	}
}

// TestDangerModelIsCurrent: the shipped model is what -fit-danger makes of
// the corpus, and records how it was made.
func TestDangerModelIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("fits the model on the corpus")
	}
	caps, err := LoadCaptures(filepath.Join("testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	var samples []DangerSample
	for _, c := range caps {
		samples = append(samples, DangerSampleOf(c, c.Family))
	}
	m, err := FitDangerHeldOut(samples)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := ShippedDangerModel()
	if err != nil {
		t.Fatal(err)
	}
	if shipped.Fit.Data == "" || shipped.Fit.Chosen == "" || shipped.Fit.Command == "" || shipped.Fit.Lambda != m.Fit.Lambda {
		t.Errorf("fit record %+v: want its data, how it was chosen, the command, and lambda %v", shipped.Fit, m.Fit.Lambda)
	}
	got, _ := json.Marshal(shipped.Weights)
	want, _ := json.Marshal(m.Weights)
	if !bytes.Equal(got, want) || shipped.Bias != m.Bias || shipped.Threshold != m.Threshold {
		t.Errorf("%s does not match the corpus: run `go run ./tools/terminal-eval -fit-danger`", DangerModelFile)
	}
	if _, err := os.Stat(filepath.Join("..", DangerModelFile)); err != nil {
		t.Errorf("DangerModelFile: %v", err)
	}
}

// TestDangerConfidence: a detection carries the model's probability, and
// it decides is_dangerous.
func TestDangerConfidence(t *testing.T) {
	d := fakeDetector(t)
	for _, out := range []string{"rm: remove regular file 'a.txt'? ", "Do you want to continue? [Y/n] "} {
		got, err := d.Detect(context.Background(), []byte(out), 0.7)
		if err != nil || !got.Detected {
			t.Fatalf("%q: %+v, %v", out, got, err)
		}
		if got.DangerConfidence <= 0 || got.DangerConfidence >= 1 || got.Dangerous != (got.DangerConfidence >= d.danger.Threshold) {
			t.Errorf("%q: dangerous %v with confidence %.3f (threshold %.3f)", out, got.Dangerous, got.DangerConfidence, d.danger.Threshold)
		}
	}
}

// TestDangerReasonNamesOnlyTheWord: the reason quotes the destructive word
// of a command-line token, not the token, which may carry a secret.
func TestDangerReasonNamesOnlyTheWord(t *testing.T) {
	in := dangerInput{Prompt: "Password: ", Type: TypePassword, CommandLine: "vault --delete-key=s3cr3t-Value-123 prod"}
	_, why := in.features()
	for _, w := range why {
		if bytes.Contains([]byte(w), []byte("s3cr3t")) {
			t.Fatalf("reason %q carries the token's value", w)
		}
	}
	if !slices.Contains(why, "delete") {
		t.Fatalf("reasons %q, want the word delete", why)
	}
}
