package terminal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Label is the truth for one captured output (testdata/captured/labels.jsonl).
type Label struct {
	Name      string `json:"name"`
	Waiting   bool   `json:"waiting"`
	Type      string `json:"prompt_type"`
	Dangerous bool   `json:"dangerous"`
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
	TypeAccuracy    float64 `json:"type_accuracy"`
	DangerousRecall float64 `json:"dangerous_recall"`
	DangerousFP     int     `json:"dangerous_false_positives"`
}

// Evaluate runs the detector over every labelled capture in dir at the
// given threshold.
func Evaluate(ctx context.Context, d *Detector, dir string, minConf float64) (Report, []CaseResult, error) {
	f, err := os.Open(filepath.Join(dir, "labels.jsonl"))
	if err != nil {
		return Report{}, nil, err
	}
	defer f.Close()
	var rep Report
	var out []CaseResult
	var tp, fp, fn, typeRight, dangerTotal, dangerHit int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l Label
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return Report{}, nil, fmt.Errorf("labels: %w", err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, l.Name+".txt"))
		if err != nil {
			return Report{}, nil, err
		}
		got, err := d.Detect(ctx, raw, minConf)
		if err != nil {
			return Report{}, nil, err
		}
		out = append(out, CaseResult{Label: l, Got: got})
		rep.Cases++
		switch {
		case l.Waiting && got.Detected:
			tp++
			if got.Type == l.Type {
				typeRight++
			}
		case !l.Waiting && got.Detected:
			fp++
		case l.Waiting && !got.Detected:
			fn++
		}
		if l.Waiting {
			rep.Waiting++
		}
		if l.Dangerous {
			dangerTotal++
			if got.Detected && got.Dangerous {
				dangerHit++
			}
		} else if got.Detected && got.Dangerous {
			rep.DangerousFP++
		}
	}
	if err := sc.Err(); err != nil {
		return Report{}, nil, err
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	rep.Precision, rep.Recall = ratio(tp, tp+fp), ratio(tp, tp+fn)
	rep.TypeAccuracy, rep.DangerousRecall = ratio(typeRight, tp), ratio(dangerHit, dangerTotal)
	return rep, out, nil
}
