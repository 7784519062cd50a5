package terminal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
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
// semantic classifier, and the danger model) is learned from the other
// programs' captures only, then the held-out program's captures are
// detected, with the evidence ev: the screen only, the command line and
// program name too, or those and the pty's recorded signals.
func LeaveProgramOut(ctx context.Context, d *Detector, caps []Capture, minConf float64, ev Evidence) ([]CaseResult, error) {
	return LeaveGroupOut(ctx, d, caps, minConf, ev, func(c Capture) string { return c.Program })
}

// LeaveFamilyOut is LeaveProgramOut one family at a time: nothing learned
// for a family's captures saw that family, nor any capture of a program
// the family has.
func LeaveFamilyOut(ctx context.Context, d *Detector, caps []Capture, minConf float64, ev Evidence) ([]CaseResult, error) {
	return LeaveGroupOut(ctx, d, caps, minConf, ev, func(c Capture) string { return c.Family })
}

// LeaveGroupOut evaluates d on caps one group at a time (group names a
// capture's group). For each group the detector learns its examples and
// its danger model from the captures of the other groups, less those of
// any program the group has; the danger model's settings are chosen by
// leave-one-family-out within those captures alone.
func LeaveGroupOut(ctx context.Context, d *Detector, caps []Capture, minConf float64, ev Evidence, group func(Capture) string) ([]CaseResult, error) {
	memo := &memoEmbedder{emb: d.emb, vecs: map[string][]float32{}}
	base := d.base()
	base.emb = memo
	byGroup := map[string][]int{}
	var groups []string
	for i, c := range caps {
		g := group(c)
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], i)
	}
	sort.Strings(groups)
	examples := make([]Example, len(caps))
	samples := make([]DangerSample, len(caps))
	for i, c := range caps {
		examples[i] = ExampleFrom(c.Raw, c.Waiting, c.Type)
		samples[i] = DangerSampleOf(c, c.Family)
	}
	out := make([]CaseResult, len(caps))
	for _, g := range groups {
		held := map[string]bool{}
		for _, i := range byGroup[g] {
			held[caps[i].Program] = true
		}
		var train []Example
		var trainDanger []DangerSample
		for i, c := range caps {
			if group(c) == g || held[c.Program] {
				continue
			}
			if examples[i].Text != "" {
				train = append(train, examples[i])
			}
			trainDanger = append(trainDanger, samples[i])
		}
		danger, err := FitDangerHeldOut(trainDanger)
		if err != nil {
			return nil, err
		}
		fold, err := base.WithExamples(ctx, train)
		if err != nil {
			return nil, err
		}
		if fold, err = fold.WithDangerModel(danger); err != nil {
			return nil, err
		}
		for _, i := range byGroup[g] {
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

// Calibration is how far danger_confidence means what it says on results:
// the Brier score and the expected calibration error over bins of width
// 0.1, among the detected captures.
func Calibration(results []CaseResult) (brier, ece float64, n int) {
	var bins [10]struct{ n, sumP, pos float64 }
	for _, c := range results {
		if !c.Got.Detected {
			continue
		}
		p := c.Got.DangerConfidence
		y := 0.0
		if c.Label.Dangerous {
			y = 1
		}
		brier += (p - y) * (p - y)
		b := min(int(p*10), 9)
		bins[b].n++
		bins[b].sumP += p
		bins[b].pos += y
		n++
	}
	if n == 0 {
		return 0, 0, 0
	}
	for _, b := range bins {
		if b.n > 0 {
			ece += b.n / float64(n) * math.Abs(b.sumP/b.n-b.pos/b.n)
		}
	}
	return brier / float64(n), ece, n
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
