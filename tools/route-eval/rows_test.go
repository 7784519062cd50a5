package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
)

// writeRows writes rows as --dump does for three catalogs whose
// candidates are needed with probability σ(4·score), a twin lowering it
// in the third, and returns the file.
func writeRows(t *testing.T, drop string) string {
	t.Helper()
	r := rand.New(rand.NewSource(1))
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for c, name := range []string{"a", "b", "c"} {
		for task := range 200 {
			for k := range 5 {
				m := map[string]any{"catalog": name, "task": task, "server": "s" + string(rune('0'+k)), "needs": 1, "kind": "", "synthetic": task >= 180}
				for _, f := range calibrate.EvidenceFeatures {
					if f != drop && !(drop == "derived" && calibrate.DerivedEvidence(f)) {
						m[f] = 0.0
					}
				}
				m["first"], m["n_parts"] = float64(1-min(k, 1)), 2.0
				score, twin := r.NormFloat64(), 0.5*float64(c)
				m["score"] = score
				if drop != "twin" {
					m["twin"] = twin
				}
				m["needed"] = r.Float64() < 1/(1+math.Exp(-(4*score-3*twin)))
				if err := enc.Encode(m); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadRows(t *testing.T) {
	all, err := loadRows(writeRows(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].name != "a" || all[2].name != "c" {
		t.Fatalf("catalogs %d, want a, b, c in order", len(all))
	}
	for _, r := range all {
		if r.tasks != 200 || len(r.samples) != 1000 || len(r.real) != 900 {
			t.Errorf("%s: %d tasks, %d samples, %d real; want 200, 1000, 900", r.name, r.tasks, len(r.samples), len(r.real))
		}
		if w := r.samples[0].Weight; math.Abs(w-1.0/200) > 1e-12 {
			t.Errorf("%s: weight %v, want 1/tasks", r.name, w)
		}
		if r.id[0] != "s0" {
			t.Errorf("%s: server %q, want s0", r.name, r.id[0])
		}
	}
	if _, err := loadRows(writeRows(t, "twin")); err == nil || !strings.Contains(err.Error(), `"twin"`) {
		t.Errorf("rows without a feature: err %v, want one naming it", err)
	}
	// Rows dumped before the derived features existed get them as route
	// computes them.
	old, err := loadRows(writeRows(t, "derived"))
	if err != nil {
		t.Fatalf("rows without the derived features: %v", err)
	}
	at := slices.Index(calibrate.EvidenceFeatures, "other_parts")
	for i, want := range []float64{0, math.Log(3)} { // first, then a runner-up of two parts
		if got := old[0].samples[i].X[at]; math.Abs(got-want) > 1e-12 {
			t.Errorf("sample %d: other_parts %v, want %v", i, got, want)
		}
	}
}

// TestRowsLeftOut runs route-eval on dumped rows without a model: the
// settings given, each catalog's left-out figures; a map weighing the twin
// fits the third catalog better than one without it.
func TestRowsLeftOut(t *testing.T) {
	path := writeRows(t, "")
	loss := func(features string) string {
		var out, errb bytes.Buffer
		if err := run(context.Background(), []string{"--rows", path, "--features", features, "--l2", "0.01"}, &out, &errb); err != nil {
			t.Fatalf("%v: %s", err, errb.String())
		}
		if !strings.Contains(out.String(), "leave-one-catalog-out log-loss") {
			t.Fatalf("output %q", out.String())
		}
		return out.String()
	}
	all, err := loadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	with, err := fitWithout(all, "", choice{features: []string{"score", "twin"}, l2: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	without, err := fitWithout(all, "", choice{features: []string{"score"}, l2: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if lw, lo := with.LogLoss(all[2].real), without.LogLoss(all[2].real); !(lw < lo) {
		t.Errorf("catalog c: log-loss with the twin %.4f, without %.4f", lw, lo)
	}
	if a, b := loss("score,twin"), loss("score"); a == b {
		t.Errorf("the same figures with and without the twin: %q", a)
	}
}
