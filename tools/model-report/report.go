package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Metric keys: one per figure of the comparison. A model's figures are a
// map from these keys to values; a key that is absent was not measured
// (the step failed), and its cell reads "—".
const (
	mB77Acc       = "banking77_accuracy"
	mB77AccThr    = "banking77_accuracy_at_threshold"
	mB77ECE       = "banking77_ece"
	mDescTop1     = "metatool_desc_top1"
	mDescTop1S    = "metatool_desc_top1_single"
	mDescR5       = "metatool_desc_recall5"
	mDescMulti5   = "metatool_desc_two_tool_top5"
	mDescECE      = "metatool_desc_tool_ece"
	mEx5Top1      = "metatool_ex5_top1"
	mEx5R5        = "metatool_ex5_recall5"
	mEx5Multi5    = "metatool_ex5_two_tool_top5"
	mMLEnglish    = "multilingual_en_accuracy"
	mMLOthers     = "multilingual_non_en_accuracy"
	mMLWorst      = "multilingual_worst_language_accuracy"
	mRouteP50     = "route_default_p50_ms"
	mRouteP99     = "route_default_p99_ms"
	mLargeP50     = "route_large_p50_ms"
	mLargeP99     = "route_large_p99_ms"
	mEmbedShort   = "embed_short_p50_ms"
	mEmbedShort99 = "embed_short_p99_ms"
	mEmbedLong    = "embed_64tok_p50_ms"
	mEmbedLong99  = "embed_64tok_p99_ms"
	mLargeEmbed   = "embed_large_queries_p50_ms"
	mLargeEmbed99 = "embed_large_queries_p99_ms"
	mModelMB      = "model_mb"
	mRSSDefault   = "rss_peak_default_mb"
	mRSSLarge     = "rss_peak_large_mb"
	mRSSNow       = "rss_after_default_mb"
	mGenIndex     = "gen_index_default_s"
	mGenIndexL    = "gen_index_large_s"
	mOtherCPU     = "others_cpu_share"
)

// compare says how a figure is set against the baseline's.
type compare int

const (
	compareNone  compare = iota
	compareDiff          // value − baseline (accuracies, ECE)
	compareRatio         // value ÷ baseline (times, sizes)
)

// column is one column of a rendered table.
type column struct {
	key    string
	header string
	format string // fmt verb for the value
	cmp    compare
	target string // the target, "" when it sets none
}

// accuracyColumns and speedColumns are the two main tables; ratioColumns
// sets each model against the baseline.
var (
	accuracyColumns = []column{
		{mB77Acc, "B77 acc", "%.3f", compareDiff, "≥ 0.92"},
		{mB77AccThr, "B77 acc@thr", "%.3f", compareDiff, ""},
		{mB77ECE, "B77 ECE", "%.3f", compareDiff, "≤ 0.03"},
		{mDescTop1, "MT desc top-1", "%.3f", compareDiff, "≥ 0.70"},
		{mDescR5, "MT desc R@5", "%.3f", compareDiff, "≥ 0.90"},
		{mDescMulti5, "MT desc 2-tool@5", "%.3f", compareDiff, ""},
		{mDescECE, "MT desc tool ECE", "%.3f", compareDiff, ""},
		{mEx5Top1, "MT 5-shot top-1", "%.3f", compareDiff, "≥ 0.80"},
		{mEx5Multi5, "MT 5-shot 2-tool@5", "%.3f", compareDiff, "≥ 0.50"},
		{mMLEnglish, "multilingual: English acc", "%.3f", compareDiff, ""},
		{mMLOthers, "multilingual: other languages acc", "%.3f", compareDiff, "≥ 0.85"},
		{mMLWorst, "multilingual: worst language acc", "%.3f", compareDiff, ""},
	}
	speedColumns = []column{
		{mRouteP50, "Route p50 ms (default)", "%.2f", compareRatio, "≤ 5"},
		{mRouteP99, "Route p99 ms (default)", "%.2f", compareRatio, ""},
		{mLargeP50, "Route p50 ms (LARGE)", "%.2f", compareRatio, "≤ 10"},
		{mLargeP99, "Route p99 ms (LARGE)", "%.2f", compareRatio, ""},
		{mEmbedShort, "Embed p50 ms (short)", "%.2f", compareRatio, ""},
		{mEmbedLong, "Embed p50 ms (64 tokens)", "%.2f", compareRatio, ""},
		{mLargeEmbed, "Embed p50 ms (WORDS-word queries)", "%.2f", compareRatio, ""},
		{mModelMB, "model.onnx MB", "%.1f", compareRatio, ""},
		{mRSSDefault, "RSS peak MB (default)", "%.0f", compareRatio, "≤ 400"},
		{mRSSLarge, "RSS peak MB (LARGE)", "%.0f", compareRatio, ""},
		{mGenIndex, "gen-index s (default)", "%.1f", compareRatio, ""},
	}
	ratioColumns = []column{
		{mB77Acc, "B77 acc", "", compareDiff, ""},
		{mDescTop1, "MT desc top-1", "", compareDiff, ""},
		{mDescR5, "MT desc R@5", "", compareDiff, ""},
		{mEx5Top1, "MT 5-shot top-1", "", compareDiff, ""},
		{mDescMulti5, "MT desc 2-tool@5", "", compareDiff, ""},
		{mRouteP50, "Route p50 (default)", "", compareRatio, ""},
		{mLargeP50, "Route p50 (LARGE)", "", compareRatio, ""},
		{mEmbedShort, "Embed short", "", compareRatio, ""},
		{mEmbedLong, "Embed 64 tok", "", compareRatio, ""},
		{mModelMB, "size", "", compareRatio, ""},
		{mRSSDefault, "RSS", "", compareRatio, ""},
		{mGenIndex, "gen-index", "", compareRatio, ""},
	}
)

// modelResult is everything measured for one model directory.
type modelResult struct {
	Name     string             `json:"name"`
	Dir      string             `json:"dir"`
	Manifest manifestInfo       `json:"manifest"`
	Metrics  map[string]float64 `json:"metrics"`
	// VsBaseline holds, for each metric the baseline has too, the
	// difference (accuracies, ECE) or ratio (times, sizes) to it.
	VsBaseline map[string]float64 `json:"vs_baseline,omitempty"`
	Errors     []string           `json:"errors,omitempty"`
}

func (r *modelResult) set(key string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[key] = v
}

func (r *modelResult) fail(step string, err error) {
	r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", step, err))
}

// manifestInfo is what the report shows of a model directory's manifest.
type manifestInfo struct {
	Name      string         `json:"name,omitempty"`
	Dims      int            `json:"dims,omitempty"`
	Pooling   string         `json:"pooling,omitempty"`
	MaxTokens int            `json:"max_tokens,omitempty"`
	License   string         `json:"license,omitempty"`
	Source    map[string]any `json:"source,omitempty"`
	// Note says where the license came from when there is no manifest.
	Note string `json:"note,omitempty"`
}

// readManifestInfo reads dir/manifest.json. A directory without one (the
// mirrored use-lite-en) is described by the committed manifest named like
// it (models/NAME.json, when run from the repository root) and its
// LICENSE file.
func readManifestInfo(dir string) (manifestInfo, error) {
	var m manifestInfo
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		if err := json.Unmarshal(b, &m); err != nil {
			return m, fmt.Errorf("%s: %w", filepath.Join(dir, "manifest.json"), err)
		}
		return m, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	m.Note = "no manifest.json in the directory; no source recorded"
	committed := filepath.Join("models", filepath.Base(filepath.Clean(dir))+".json")
	if b, err := os.ReadFile(committed); err == nil {
		if err := json.Unmarshal(b, &m); err != nil {
			return m, fmt.Errorf("%s: %w", committed, err)
		}
		m.Note = "no manifest.json in the directory (runs with " + committed + "); no source recorded"
	}
	lic, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
	if err != nil {
		return m, nil
	}
	m.License = licenseName(string(lic))
	return m, nil
}

// licenseName names a license from the opening of its text.
func licenseName(text string) string {
	head := text[:min(len(text), 400)]
	switch {
	case strings.Contains(head, "Apache License") && strings.Contains(head, "Version 2.0"):
		return "Apache-2.0 (LICENSE file in the model directory)"
	case strings.Contains(head, "MIT License"):
		return "MIT (LICENSE file in the model directory)"
	}
	for _, line := range strings.Split(head, "\n") {
		if s := strings.TrimSpace(line); s != "" {
			return s + " (LICENSE file in the model directory)"
		}
	}
	return ""
}

// sourceText renders a manifest's source object in one line.
func sourceText(m manifestInfo) string {
	s := m.Source
	str := func(k string) string { v, _ := s[k].(string); return v }
	var parts []string
	switch {
	case str("package") != "":
		p := str("package") + " " + str("version")
		if h := str("wheel_sha256"); len(h) >= 12 {
			p += " (wheel sha256 " + h[:12] + "…)"
		}
		parts = append(parts, p)
	case str("derived_from") != "":
		parts = append(parts, "derived from "+str("derived_from")+" by "+str("method"))
	case m.Note != "":
		parts = append(parts, m.Note)
	}
	if t := str("tokenizer_from"); t != "" {
		parts = append(parts, "tokenizer from "+t)
	}
	return strings.Join(parts, "; ")
}

// evalReport is the part of gen-index eval's JSON report the comparison
// reads (tools/gen-index/eval.go, type report).
type evalReport struct {
	Model      string `json:"model"`
	N          int    `json:"n"`
	Categories *struct {
		Threshold     float64 `json:"threshold"`
		Accuracy      float64 `json:"accuracy"`
		AccuracyAtThr float64 `json:"accuracy_at_threshold"`
		ECEAfter      float64 `json:"ece_after"`
		ByKind        map[string]struct {
			N        int     `json:"n"`
			Accuracy float64 `json:"accuracy"`
		} `json:"accuracy_by_kind"`
	} `json:"categories"`
	Routing *struct {
		ToolRecall    map[string]float64 `json:"tool_recall_at"`
		ToolTop1      float64            `json:"tool_top1"`
		SingleTop1    float64            `json:"tool_top1_single"`
		MultiFull5    float64            `json:"multi_full_recall_at_5"`
		MultiQueries  int                `json:"multi_queries"`
		SingleQueries int                `json:"single_queries"`
		ECEAfter      float64            `json:"tool_ece_after"`
		// The routing dev sets (devsets.go).
		ServerStepRecall5 float64 `json:"server_step_recall_at_5"`
		ServerTop1        float64 `json:"server_top1"`
		ServerQueries     int     `json:"server_queries"`
	} `json:"routing"`
	BuildSeconds float64 `json:"build_seconds"`
}

// ErrReport reports a gen-index JSON report without the section a figure
// needs.
var ErrReport = errors.New("model-report: gen-index report lacks a section")

func parseEval(data []byte) (evalReport, error) {
	var r evalReport
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("gen-index report: %w", err)
	}
	return r, nil
}

// banking77Metrics takes the closed-set figures from a Banking77 report.
func banking77Metrics(r evalReport) (map[string]float64, error) {
	c := r.Categories
	if c == nil {
		return nil, fmt.Errorf("%w: no categories", ErrReport)
	}
	return map[string]float64{mB77Acc: c.Accuracy, mB77AccThr: c.AccuracyAtThr, mB77ECE: c.ECEAfter}, nil
}

// minLanguageQueries is how many queries a language needs to count for the
// worst-language figure of the multilingual check (a dozen sentences make
// a figure too noisy to rank by).
const minLanguageQueries = 90

// multilingualMetrics takes the multilingual check's figures (English
// catalog, queries in some 60 languages, kind = language): top-1 accuracy
// on English, on all other queries pooled, and on the worst language with
// at least minLanguageQueries queries.
func multilingualMetrics(r evalReport) (map[string]float64, error) {
	c := r.Categories
	if c == nil || len(c.ByKind) == 0 {
		return nil, fmt.Errorf("%w: no per-language accuracy", ErrReport)
	}
	en, ok := c.ByKind["en"]
	if !ok {
		return nil, fmt.Errorf("%w: no English queries", ErrReport)
	}
	var right, n float64
	worst := 1.0
	for lang, a := range c.ByKind {
		if lang == "en" {
			continue
		}
		right += a.Accuracy * float64(a.N)
		n += float64(a.N)
		if a.N >= minLanguageQueries {
			worst = min(worst, a.Accuracy)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no queries in other languages", ErrReport)
	}
	return map[string]float64{mMLEnglish: en.Accuracy, mMLOthers: right / n, mMLWorst: worst}, nil
}

// metatoolMetrics takes the routing figures from a MetaTool report: desc
// says whether the catalog was description-only (keys metatool_desc_*)
// or 5-shot (metatool_ex5_*).
func metatoolMetrics(r evalReport, desc bool) (map[string]float64, error) {
	rr := r.Routing
	if rr == nil {
		return nil, fmt.Errorf("%w: no routing", ErrReport)
	}
	r5, ok := rr.ToolRecall["5"]
	if !ok {
		return nil, fmt.Errorf("%w: no tool recall at 5", ErrReport)
	}
	if desc {
		return map[string]float64{mDescTop1: rr.ToolTop1, mDescTop1S: rr.SingleTop1, mDescR5: r5,
			mDescMulti5: rr.MultiFull5, mDescECE: rr.ECEAfter}, nil
	}
	return map[string]float64{mEx5Top1: rr.ToolTop1, mEx5R5: r5, mEx5Multi5: rr.MultiFull5}, nil
}

// vsBaseline sets a against base column by column: the difference for
// accuracies and ECE, the ratio for times and sizes. A metric missing on
// either side, or a ratio to zero, is left out.
func vsBaseline(a, base map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, cols := range [][]column{accuracyColumns, speedColumns, devColumns} {
		for _, c := range cols {
			v, ok := a[c.key]
			b, okb := base[c.key]
			if !ok || !okb {
				continue
			}
			switch c.cmp {
			case compareDiff:
				out[c.key] = v - b
			case compareRatio:
				if b != 0 {
					out[c.key] = v / b
				}
			}
		}
	}
	return out
}

// cell renders one figure, "—" when it is missing.
func cell(m map[string]float64, c column) string {
	v, ok := m[c.key]
	if !ok || math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf(c.format, v)
}

// ratioCell renders a difference as "+0.012" and a ratio as "×1.23".
func ratioCell(m map[string]float64, c column) string {
	v, ok := m[c.key]
	if !ok || math.IsNaN(v) {
		return "—"
	}
	if c.cmp == compareRatio {
		return fmt.Sprintf("×%.2f", v)
	}
	if math.Abs(v) < 0.0005 {
		return "±0.000"
	}
	return fmt.Sprintf("%+.3f", v)
}

// writeTable writes one markdown table: a row per model, and a row of
// the targets when any column has one.
func writeTable(w io.Writer, results []*modelResult, cols []column, names *strings.Replacer) {
	hdr := []string{"model"}
	sep := []string{"---"}
	var targets []string
	anyTarget := false
	for _, c := range cols {
		hdr = append(hdr, names.Replace(c.header))
		sep = append(sep, "---:")
		targets = append(targets, c.target)
		anyTarget = anyTarget || c.target != ""
	}
	writeRow(w, hdr)
	writeRow(w, sep)
	for _, r := range results {
		row := []string{r.Name}
		for _, c := range cols {
			row = append(row, cell(r.Metrics, c))
		}
		writeRow(w, row)
	}
	if anyTarget {
		writeRow(w, append([]string{"*target (#12)*"}, targets...))
	}
}

// anyMetric reports whether some model has a figure in one of cols.
func anyMetric(results []*modelResult, cols []column) bool {
	for _, r := range results {
		for _, c := range cols {
			if _, ok := r.Metrics[c.key]; ok {
				return true
			}
		}
	}
	return false
}

// writeRatioTable sets every model but the baseline against it.
func writeRatioTable(w io.Writer, results []*modelResult, baseline string, names *strings.Replacer) {
	hdr := []string{"model"}
	sep := []string{"---"}
	for _, c := range ratioColumns {
		op := "÷"
		if c.cmp == compareDiff {
			op = "−"
		}
		hdr = append(hdr, names.Replace(c.header)+" "+op)
		sep = append(sep, "---:")
	}
	writeRow(w, hdr)
	writeRow(w, sep)
	for _, r := range results {
		if r.Name == baseline {
			continue
		}
		row := []string{r.Name}
		for _, c := range ratioColumns {
			row = append(row, ratioCell(r.VsBaseline, c))
		}
		writeRow(w, row)
	}
}

// writeProvenance lists each model's license and source package.
func writeProvenance(w io.Writer, results []*modelResult) {
	writeRow(w, []string{"model", "dims", "pooling", "max tokens", "license", "source"})
	writeRow(w, []string{"---", "---:", "---", "---:", "---", "---"})
	for _, r := range results {
		m := r.Manifest
		dims, maxTok := "—", "—"
		if m.Dims > 0 {
			dims = fmt.Sprint(m.Dims)
		}
		if m.MaxTokens > 0 {
			maxTok = fmt.Sprint(m.MaxTokens)
		}
		pool := m.Pooling
		if pool == "" {
			pool = "—"
		}
		lic := m.License
		if lic == "" {
			lic = "not recorded"
		}
		writeRow(w, []string{r.Name, dims, pool, maxTok, lic, sourceText(m)})
	}
}

func writeRow(w io.Writer, cells []string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

// writeTables writes every table of the comparison; tools and words
// describe the large catalog in column headers ("2,500", "60").
func writeTables(w io.Writer, results []*modelResult, baseline, tools, words string) {
	names := strings.NewReplacer("LARGE", tools+" tools, "+words+" words", "WORDS", words)
	fmt.Fprintf(w, "### Accuracy and calibration\n\n")
	writeTable(w, results, accuracyColumns, names)
	if anyMetric(results, devColumns) {
		fmt.Fprintf(w, "\n### HWU64 and the MCP routing sets (issue 28)\n\n")
		writeTable(w, results, devColumns, names)
	}
	fmt.Fprintf(w, "\n### Speed and size (through a real daemon over gRPC)\n\n")
	writeTable(w, results, speedColumns, names)
	hasBase := false
	for _, r := range results {
		hasBase = hasBase || (r.Name == baseline && len(r.Metrics) > 0)
	}
	if hasBase && len(results) > 1 {
		fmt.Fprintf(w, "\n### Against %s (same run): accuracy as a difference (−), time and size as a ratio (÷)\n\n", baseline)
		writeRatioTable(w, results, baseline, names)
	} else {
		fmt.Fprintf(w, "\n(no ratios: the baseline %s was not measured in this run)\n", baseline)
	}
	fmt.Fprintf(w, "\n### Provenance (from each model directory's manifest.json)\n\n")
	writeProvenance(w, results)
	var errs []string
	for _, r := range results {
		for _, e := range r.Errors {
			errs = append(errs, fmt.Sprintf("- %s: %s", r.Name, e))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nFailed steps (their cells read —):\n\n%s\n", strings.Join(errs, "\n"))
	}
}

// Markers delimit the generated part of the docs page; the prose around
// them is kept when the page is regenerated.
const (
	beginMarker = "<!-- model-report:begin (generated by tools/model-report; edits inside are overwritten) -->"
	endMarker   = "<!-- model-report:end -->"
)

// spliceGenerated replaces the text between the markers of page with
// block; a page without markers gets them, with block, at its end.
func spliceGenerated(page, block string) string {
	gen := beginMarker + "\n" + strings.TrimRight(block, "\n") + "\n" + endMarker + "\n"
	i := strings.Index(page, beginMarker)
	j := strings.Index(page, endMarker)
	if i < 0 || j < i {
		if page != "" && !strings.HasSuffix(page, "\n\n") {
			page = strings.TrimRight(page, "\n") + "\n\n"
		}
		return page + gen
	}
	rest := page[j+len(endMarker):]
	rest = strings.TrimPrefix(rest, "\n")
	return page[:i] + gen + rest
}
