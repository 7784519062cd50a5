package main

import (
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseSteps(t *testing.T) {
	got, err := parseSteps("1, 8,2000")
	if err != nil || !slices.Equal(got, []int{1, 8, 2000}) {
		t.Fatalf("got %v, %v; want [1 8 2000]", got, err)
	}
	for _, bad := range []string{"", "0", "-1", "a", "1,,2", "20000"} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("parseSteps(%q): no error", bad)
		}
	}
}

func TestLoadQueries(t *testing.T) {
	q, err := loadQueries("../../data/catalogs/default.eval.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) < 100 || q[0] == "" {
		t.Fatalf("%d queries, first %q: want the eval file's texts", len(q), q[0])
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"empty": "", "blank": `{"text": "  "}` + "\n", "broken": "{"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadQueries(p); err == nil {
			t.Errorf("%s file: no error", name)
		}
	}
}

func TestCPUReaders(t *testing.T) {
	cpu, err := procCPU(os.Getpid())
	if err != nil || cpu < 0 {
		t.Fatalf("procCPU(self) = %v, %v", cpu, err)
	}
	busy, total, err := machineCPU()
	if err != nil || total <= 0 || busy < 0 || busy > total {
		t.Fatalf("machineCPU = %d busy of %d, %v", busy, total, err)
	}
	if _, err := procCPU(-1); err == nil {
		t.Fatal("procCPU of no process: no error")
	}
}

func TestSaturationPNG(t *testing.T) {
	steps := []step{
		{Clients: 1, RPS: 400, P50ms: 2, P99ms: 6},
		{Clients: 8, RPS: 800, P50ms: 9, P99ms: 30, RejectRate: 0.01},
		{Clients: 2000, RPS: 750, P50ms: 20, P99ms: 48, RejectRate: 0.9},
		{Clients: 4000}, // nothing answered: drawn without latency points
	}
	path := filepath.Join(t.TempDir(), "c.png")
	if err := writeSaturationPNG(path, "test", steps, 1400, []scenario{{Name: "fair", Ratio: 1.5, P50ms: 3, IdleP50: 2}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// 700 for the curve, 40 + 16 a line for one scenario and its target.
	if b := img.Bounds(); b.Dx() != 900 || b.Dy() != 700+40+2*16 {
		t.Fatalf("image %v, want 900x772", b)
	}
	if err := writeSaturationPNG(filepath.Join(t.TempDir(), "no", "dir.png"), "x", steps, 1, nil); err == nil {
		t.Fatal("writing into a missing directory: no error")
	}
	// --replot draws the same chart from a run's JSON.
	js := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(js, []byte(`{"bare_texts_per_s": 1400, "steps": [{"clients": 1, "route_per_s": 400, "p50_ms": 2, "p99_ms": 6}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replot(js, filepath.Join(t.TempDir(), "r.png"), "t"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(js, []byte(`{"steps": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := replot(js, filepath.Join(t.TempDir(), "r.png"), "t"); err == nil {
		t.Fatal("replot of a run without steps: no error")
	}
}

func TestHistogramQuantile(t *testing.T) {
	page := func(c1, c2, c3 int) string {
		return fmt.Sprintf(`# HELP h x
# TYPE h histogram
h_bucket{le="0.01"} %d
h_bucket{le="0.05"} %d
h_bucket{le="+Inf"} %d
h_sum 1
h_count %d
other_bucket{le="0.01"} 7
`, c1, c2, c3, c3)
	}
	before, err := parseHistograms(strings.NewReader(page(10, 10, 10)), "h")
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseHistograms(strings.NewReader(page(60, 110, 110)), "h")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after["other"]; ok {
		t.Fatal("parsed a histogram that was not asked for")
	}
	d, ok := after["h"].sub(before["h"])
	if !ok {
		t.Fatal("same buckets reported as different")
	}
	// 100 new observations: 50 up to 10 ms, 50 in (10, 50] ms.
	for _, c := range []struct{ q, want float64 }{{0.5, 0.01}, {0.99, 0.01 + 0.04*49/50}, {0.25, 0.005}} {
		if got := d.quantile(c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := histP99ms(after["h"], before["h"]); math.Abs(got-1000*(0.01+0.04*49/50)) > 1e-9 {
		t.Errorf("histP99ms = %v ms", got)
	}
	if got := histP99ms(before["h"], before["h"]); got != 0 {
		t.Errorf("p99 of no observations = %v, want 0", got)
	}
	if got := histP99ms(histogram{}, histogram{}); got != 0 {
		t.Errorf("p99 of a missing histogram = %v, want 0", got)
	}
	if _, err := parseHistograms(strings.NewReader(`h_bucket{le="0.05"} 1`+"\n"+`h_bucket{le="0.01"} 1`), "h"); err == nil {
		t.Error("buckets out of order and without +Inf: no error")
	}
}
