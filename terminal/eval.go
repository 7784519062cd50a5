package terminal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Label is the truth for one captured output (testdata/*/labels.jsonl).
// Program, Family and Command are set in the corpus only.
type Label struct {
	Name      string `json:"name"`
	Waiting   bool   `json:"waiting"`
	Type      string `json:"prompt_type"`
	Dangerous bool   `json:"dangerous"`
	Program   string `json:"program"`
	Family    string `json:"family"`
	Command   string `json:"command"`
}

// Capture is one labelled capture, its raw bytes and, where the capture
// tool recorded them (dir/signals.jsonl), its pty's signals.
type Capture struct {
	Label
	Raw     []byte
	Signals *PtySignals
}

// PtySignals is what the kernel said about a capture's pty as it ended
// (package ptysignal), as recorded by tools/capture-prompts.
type PtySignals struct {
	Name         string `json:"name"`
	ReadingInput bool   `json:"reading_input"`
	EchoOff      bool   `json:"echo_off"`
	Canonical    bool   `json:"canonical_mode"`
	Exited       bool   `json:"exited"`
}

// Hints are the signals as DetectWithHints takes them.
func (s *PtySignals) hints(h Hints) Hints {
	if s == nil {
		return h
	}
	reading, echoOff, canonical := s.ReadingInput && !s.Exited, s.EchoOff, s.Canonical
	h.ReadingInput, h.EchoOff, h.Canonical = &reading, &echoOff, &canonical
	return h
}

// Evidence is what leave-program-out passes the detector besides the screen.
type Evidence int

const (
	// ScreenOnly: the output alone.
	ScreenOnly Evidence = iota
	// WithCommand: the command line and program name as hints.
	WithCommand
	// WithPty: those and the pty's signals a hub can read.
	WithPty
)

// LoadCaptures reads dir/labels.jsonl and every capture it names.
func LoadCaptures(dir string) ([]Capture, error) {
	f, err := os.Open(filepath.Join(dir, "labels.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Capture
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Capture
		if err := json.Unmarshal(sc.Bytes(), &c.Label); err != nil {
			return nil, fmt.Errorf("labels: %w", err)
		}
		if c.Raw, err = os.ReadFile(filepath.Join(dir, c.Name+".txt")); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, loadSignals(filepath.Join(dir, "signals.jsonl"), out)
}

// loadSignals attaches recorded pty signals to caps; a missing file means
// none were recorded.
func loadSignals(path string, caps []Capture) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	byName := map[string]*PtySignals{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		s := new(PtySignals)
		if err := json.Unmarshal(line, s); err != nil {
			return fmt.Errorf("signals: %w", err)
		}
		byName[s.Name] = s
	}
	for i := range caps {
		caps[i].Signals = byName[caps[i].Name]
	}
	return nil
}

// CaseResult is the detector's answer on one capture.
type CaseResult struct {
	Label
	Got Detection
}

// Report summarises detection quality on a labelled set.
type Report struct {
	Cases           int     `json:"cases"`
	Waiting         int     `json:"waiting"`
	Precision       float64 `json:"waiting_precision"`
	Recall          float64 `json:"waiting_recall"`
	F1              float64 `json:"waiting_f1"`
	TypeAccuracy    float64 `json:"type_accuracy"`
	Dangerous       int     `json:"dangerous"`
	DangerousRecall float64 `json:"dangerous_recall"`
	DangerousFP     int     `json:"dangerous_false_positives"`
	// DangerousFPRate is DangerousFP over the captures labelled not
	// dangerous (waiting or not).
	DangerousFPRate float64 `json:"dangerous_false_positive_rate"`
}

// Summarise scores results against their labels. Type accuracy is over the
// waiting captures the detector found; dangerous recall counts a dangerous
// capture as found only when it was detected and called dangerous.
func Summarise(results []CaseResult) Report {
	var rep Report
	var tp, fp, fn, typeRight, dangerHit, safe int
	for _, c := range results {
		rep.Cases++
		got := c.Got
		switch {
		case c.Waiting && got.Detected:
			tp++
			if got.Type == c.Type {
				typeRight++
			}
		case !c.Waiting && got.Detected:
			fp++
		case c.Waiting && !got.Detected:
			fn++
		}
		if c.Waiting {
			rep.Waiting++
		}
		if c.Label.Dangerous {
			rep.Dangerous++
			if got.Detected && got.Dangerous {
				dangerHit++
			}
		} else {
			safe++
			if got.Detected && got.Dangerous {
				rep.DangerousFP++
			}
		}
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	rep.Precision, rep.Recall = ratio(tp, tp+fp), ratio(tp, tp+fn)
	if rep.Precision+rep.Recall > 0 {
		rep.F1 = 2 * rep.Precision * rep.Recall / (rep.Precision + rep.Recall)
	}
	rep.TypeAccuracy, rep.DangerousRecall = ratio(typeRight, tp), ratio(dangerHit, rep.Dangerous)
	rep.DangerousFPRate = ratio(rep.DangerousFP, safe)
	return rep
}

// Evaluate runs the detector over every labelled capture in dir at the
// given threshold, screen only.
func Evaluate(ctx context.Context, d *Detector, dir string, minConf float64) (Report, []CaseResult, error) {
	caps, err := LoadCaptures(dir)
	if err != nil {
		return Report{}, nil, err
	}
	var out []CaseResult
	for _, c := range caps {
		got, err := d.Detect(ctx, c.Raw, minConf)
		if err != nil {
			return Report{}, nil, err
		}
		out = append(out, CaseResult{Label: c.Label, Got: got})
	}
	return Summarise(out), out, nil
}

// DevHalf reports whether a program is in the half of the corpus looked at
// while writing the detector's rules; the other half is only scored. The
// split is a fixed hash of the program's name, so it does not move when
// captures are added.
func DevHalf(program string) bool {
	h := fnv.New32a()
	h.Write([]byte(program))
	return h.Sum32()%2 == 0
}

// LeaveProgramOut evaluates d on caps one program at a time: what is
// learnable (the candidate prompt lines of captures, as examples for the
// semantic classifier) is learned from the other programs' captures only,
// then the held-out program's captures are detected, with the evidence
// ev: the screen only, the command line and program name too, or those
// and the pty's recorded signals.
func LeaveProgramOut(ctx context.Context, d *Detector, caps []Capture, minConf float64, ev Evidence) ([]CaseResult, error) {
	memo := &memoEmbedder{emb: d.emb, vecs: map[string][]float32{}}
	base := d.base()
	base.emb = memo
	byProgram := map[string][]int{}
	var programs []string
	for i, c := range caps {
		if _, ok := byProgram[c.Program]; !ok {
			programs = append(programs, c.Program)
		}
		byProgram[c.Program] = append(byProgram[c.Program], i)
	}
	sort.Strings(programs)
	examples := make([]Example, len(caps))
	for i, c := range caps {
		examples[i] = ExampleFrom(c.Raw, c.Waiting, c.Type)
	}
	out := make([]CaseResult, len(caps))
	for _, p := range programs {
		var train []Example
		for i, c := range caps {
			if c.Program != p && examples[i].Text != "" {
				train = append(train, examples[i])
			}
		}
		fold, err := base.WithExamples(ctx, train)
		if err != nil {
			return nil, err
		}
		for _, i := range byProgram[p] {
			c := caps[i]
			var h Hints
			if ev >= WithCommand {
				h = Hints{CommandLine: c.Command, Program: c.Program}
			}
			if ev == WithPty {
				h = c.Signals.hints(h)
			}
			got, err := fold.DetectWithHints(ctx, c.Raw, h, minConf)
			if err != nil {
				return nil, err
			}
			out[i] = CaseResult{Label: c.Label, Got: got}
		}
	}
	return out, nil
}

// memoEmbedder remembers vectors by text: leave-program-out embeds the
// same example lines once per fold.
type memoEmbedder struct {
	emb  Embedder
	mu   sync.Mutex
	vecs map[string][]float32
}

func (m *memoEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for _, t := range texts {
		if _, ok := m.vecs[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		vecs, err := m.emb.Embed(ctx, missing)
		if err != nil {
			return nil, err
		}
		if len(vecs) != len(missing) {
			return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrEmbedding, len(vecs), len(missing))
		}
		for i, t := range missing {
			m.vecs[t] = vecs[i]
		}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = m.vecs[t]
	}
	return out, nil
}
