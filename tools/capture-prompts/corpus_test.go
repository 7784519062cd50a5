package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/terminal"
)

const corpusDir = "../../terminal/testdata/corpus"

// label is one line of the corpus labels.jsonl, decoded strictly: the
// evaluator's terminal.Label and the reason a dangerous prompt is.
type label struct {
	terminal.Label
	Why string `json:"why"`
}

var promptTypes = map[string]bool{
	"password": true, "yes_no": true, "choice": true, "path": true,
	"text": true, "command": true, "unknown": true,
}

func readLabels(t *testing.T) []label {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusDir, "labels.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var labels []label
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var l label
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("labels.jsonl line %d: %v", n, err)
		}
		labels = append(labels, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return labels
}

func TestCorpusLabels(t *testing.T) {
	labels := readLabels(t)
	names := map[string]bool{}
	programs := map[string]bool{}
	waiting := 0
	for i, l := range labels {
		if i > 0 && labels[i-1].Name >= l.Name {
			t.Errorf("labels not sorted by name: %q then %q", labels[i-1].Name, l.Name)
		}
		names[l.Name] = true
		programs[l.Program] = true
		if l.Program == "" || l.Command == "" {
			t.Errorf("%s: program %q, command %q; want both", l.Name, l.Program, l.Command)
		}
		if _, err := os.Stat(filepath.Join(corpusDir, l.Name+".txt")); err != nil {
			t.Errorf("%s: no capture: %v", l.Name, err)
		}
		switch {
		case l.Waiting && !promptTypes[l.Type]:
			t.Errorf("%s: prompt_type %q is not one of the known types", l.Name, l.Type)
		case !l.Waiting && (l.Type != "" || l.Dangerous):
			t.Errorf("%s: not waiting but prompt_type %q, dangerous %v", l.Name, l.Type, l.Dangerous)
		case l.Dangerous && l.Why == "":
			t.Errorf("%s: dangerous without a why", l.Name)
		case !l.Dangerous && l.Why != "":
			t.Errorf("%s: a why on a prompt that is not dangerous", l.Name)
		}
		if l.Waiting {
			waiting++
		}
	}
	captures, err := filepath.Glob(filepath.Join(corpusDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range captures {
		if name := strings.TrimSuffix(filepath.Base(c), ".txt"); !names[name] {
			t.Errorf("capture %s has no label", name)
		}
	}
	if got, want := len(programs), 150; got < want {
		t.Errorf("got %d distinct programs, want at least %d", got, want)
	}
	if notWaiting := len(labels) - waiting; notWaiting*4 < len(labels) {
		t.Errorf("got %d of %d captures not waiting, want at least a quarter", notWaiting, len(labels))
	}
}

// TestCorpusScenarios checks the scenario list itself: names unique, every
// scenario labelled with its program, and every label in labels.jsonl
// still matching the scenario that made it.
func TestCorpusScenarios(t *testing.T) {
	byName := map[string]scenario{}
	for _, sc := range corpusScenarios {
		if _, dup := byName[sc.Name]; dup {
			t.Errorf("scenario %q listed twice", sc.Name)
		}
		byName[sc.Name] = sc
		if sc.Program == "" {
			t.Errorf("%s: no program", sc.Name)
		}
	}
	var stale []string
	for _, l := range readLabels(t) {
		sc, ok := byName[l.Name]
		if !ok {
			stale = append(stale, l.Name)
			continue
		}
		got := l
		want := label{terminal.Label{Name: sc.Name, Waiting: sc.Waiting, Type: sc.Type, Dangerous: sc.Dangerous,
			Program: sc.Program, Family: sc.Family, Command: sc.cmd}, sc.Why}
		if got != want {
			t.Errorf("%s: labels.jsonl has %+v, corpus.go says %+v; re-run the capture", l.Name, got, want)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("labels without a scenario: %v", stale)
	}
}

// TestCorpusSignals checks that every capture has the pty signals a hub
// would have sent with it (signals.jsonl, recorded by -signals-only), so
// the "pty signals" column of docs/terminal.md covers the whole corpus.
func TestCorpusSignals(t *testing.T) {
	caps, err := terminal.LoadCaptures(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		if c.Signals == nil {
			t.Errorf("%s has no pty signals: run go run ./tools/capture-prompts -set corpus -signals-only -run '^%s$'", c.Name, c.Name)
		}
	}
}
