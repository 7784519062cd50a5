// Command scale-bench measures classifierd at catalog sizes far beyond the
// out-of-the-box catalog (make bench-scale): for each size it composes a
// synthetic catalog from real tool descriptions and requests (catalog.go),
// runs gen-index on it with the real model and measures its time and peak
// memory, loads the index and measures that, then measures Route's
// scoring (everything after the model: dot products, BM25, lexical
// evidence, fusion, calibration) on real requests embedded once by the
// real model. It prints one markdown table.
//
//	scale-bench catalog --tools N --out FILE          write a synthetic catalog
//	scale-bench run --gen-index BIN --model DIR ...   build, load, score, print the table
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/server"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}

type sourceFlags struct{ defaultCatalog, metatool string }

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.defaultCatalog, "default-catalog", "data/catalogs/default.json", "catalog whose tool descriptions are composed")
	fs.StringVar(&s.metatool, "metatool", "../shared/datasets/metatool.json", "MetaTool dataset: tool descriptions and requests")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: scale-bench catalog|run [flags]")
	}
	switch args[0] {
	case "catalog":
		return runCatalog(args[1:], stdout, stderr)
	case "run":
		return runBench(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("unknown subcommand %q (catalog, run)", args[0])
}

// defaultDistinct is the largest synthetic catalog of distinct tools;
// larger ones repeat it on more servers (see replicate).
const defaultDistinct = 10_000

// synth is the synthetic catalog of n tools, at most distinct of them
// distinct.
func synth(src *sources, n, distinct int, seed uint64) *catalog.Catalog {
	if n <= distinct {
		return synthCatalog(src, n, seed)
	}
	return replicate(synthCatalog(src, distinct, seed), n)
}

func runCatalog(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf sourceFlags
	sf.register(fs)
	n := fs.Int("tools", 1000, "tools in the catalog")
	seed := fs.Uint64("seed", 1, "random seed")
	out := fs.String("out", "", "catalog file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n < 1 {
		return errors.New("--out and --tools ≥ 1 are required")
	}
	src, err := loadSources(sf.defaultCatalog, sf.metatool)
	if err != nil {
		return err
	}
	if err = writeCatalog(*out, synth(src, *n, defaultDistinct, *seed)); err == nil {
		fmt.Fprintf(stdout, "wrote %s: %d tools\n", *out, *n)
	}
	return err
}

// row is one line of the table.
type row struct {
	tools, distinct, vectors int
	build, buildCPU          time.Duration
	buildRSS                 int64 // bytes
	size                     int64
	load                     time.Duration
	loadHeap                 uint64
	domain                   time.Duration // server.NewDomainConfig: ranker, lexicon, BM25
	shortlist                time.Duration // then until the shortlist's cells are built (in the background)
	cells                    int           // inverted-file cells, 0 when every label is scored
	p50, p99                 time.Duration
	cpu50                    time.Duration // Route's CPU time (its thread), p50
	// With a shortlist: the exact scoring's p50, and how much of the
	// exact answer the shortlisted one keeps (recall.go).
	exact50 time.Duration
	agree   agreement
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf sourceFlags
	sf.register(fs)
	sizes := fs.String("sizes", "1000,10000,100000", "catalog sizes (tools), comma-separated")
	genIndex := fs.String("gen-index", "bin/gen-index", "gen-index binary")
	model := fs.String("model", "", "model directory (required)")
	ortLib := fs.String("ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library")
	dir := fs.String("dir", "var/scale", "where catalogs and indexes are written")
	queries := fs.Int("queries", 200, "requests scored per size")
	seed := fs.Uint64("seed", 1, "random seed of the catalogs")
	reuse := fs.Bool("reuse", false, "keep an index already in --dir (load and scoring only; gen-index columns read -)")
	distinct := fs.Int("distinct", defaultDistinct, "distinct tools at most; larger catalogs repeat them on more servers")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of Route's scoring at the last size to this file")
	shortlistFrom := fs.Int("shortlist-from", rank.DefaultShortlistFrom, "server and tool vectors from which Route scores a shortlist (the daemon's --shortlist-from)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" {
		return errors.New("--model is required")
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--sizes: %q is not a size", s)
		}
		ns = append(ns, n)
	}
	src, err := loadSources(sf.defaultCatalog, sf.metatool)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	// Requests: every len/queries-th MetaTool request, embedded once by
	// the real model; Route then meets them through a lookup embedder.
	var qs []string
	for i := 0; i < *queries; i++ {
		qs = append(qs, src.queries[(i*len(src.queries)/(*queries)+7)%len(src.queries)])
	}
	// Every text Route embeds for them: each request and its needs, its
	// clauses and its cues' capabilities (a catalog whose calibration
	// decides from evidence routes by clauses and cues).
	var texts []string
	seen := map[string]bool{}
	for _, q := range qs {
		for _, ts := range [][]rank.Turn{rank.Needs(q), rank.Clauses(q), rank.Cues(q)} {
			for _, t := range ts {
				if !seen[t.Text] {
					seen[t.Text] = true
					texts = append(texts, t.Text)
				}
			}
		}
	}
	vecs, err := embedOnce(ctx, *model, *ortLib, texts)
	if err != nil {
		return err
	}
	emb := lookupEmbedder{}
	for i, t := range texts {
		emb[t] = vecs[i]
	}
	var rows []row
	for i, n := range ns {
		var prof string
		if i == len(ns)-1 {
			prof = *cpuProfile
		}
		r, err := measure(ctx, src, n, *distinct, *seed, *dir, *genIndex, *model, *ortLib, qs, emb, *reuse, *shortlistFrom, prof, stderr)
		if err != nil {
			return fmt.Errorf("%d tools: %w", n, err)
		}
		rows = append(rows, r)
	}
	printTable(stdout, rows)
	return nil
}

func measure(ctx context.Context, src *sources, n, distinct int, seed uint64, dir, genIndex, model, ortLib string,
	qs []string, emb lookupEmbedder, reuse bool, shortlistFrom int, profile string, stderr io.Writer) (row, error) {
	r := row{tools: n}
	catPath := filepath.Join(dir, fmt.Sprintf("synth-%d.catalog.json", n))
	idxPath := filepath.Join(dir, fmt.Sprintf("synth-%d.idx", n))
	r.distinct = min(n, distinct)
	if _, err := os.Stat(idxPath); err != nil || !reuse {
		if err := build(ctx, &r, src, n, distinct, seed, catPath, idxPath, genIndex, model, ortLib, stderr); err != nil {
			return r, err
		}
	}
	st, err := os.Stat(idxPath)
	if err != nil {
		return r, err
	}
	r.size = st.Size()
	fmt.Fprintf(stderr, ">> %d tools: load and score\n", n)
	r.load, r.loadHeap, err = measureLoad(idxPath)
	if err != nil {
		return r, err
	}
	idx, err := index.Load(idxPath)
	if err != nil {
		return r, err
	}
	r.vectors = idx.NumVectors()
	if shortlistFrom == 0 {
		shortlistFrom = -1 // as the daemon's flag: 0 never shortlists
	}
	start := time.Now()
	dom, err := server.NewDomainConfig(idx, emb, server.DomainConfig{ShortlistFrom: shortlistFrom})
	if err != nil {
		return r, err
	}
	r.domain = time.Since(start)
	<-dom.Router.ShortlistReady()
	r.shortlist = time.Since(start) - r.domain
	lat, cpu, err := scoreRoute(ctx, dom, qs, profile)
	if err != nil {
		return r, err
	}
	r.p50, r.p99, r.cpu50 = lat[len(lat)/2], lat[len(lat)*99/100], cpu[len(cpu)/2]
	if _, r.cells = dom.Router.Shortlists(); r.cells == 0 {
		return r, nil
	}
	fmt.Fprintf(stderr, ">> %d tools: exact scoring and recall (%d cells)\n", n, r.cells)
	exact, err := server.NewDomainConfig(idx, emb, server.DomainConfig{ShortlistFrom: -1})
	if err != nil {
		return r, err
	}
	if lat, _, err = scoreRoute(ctx, exact, qs, ""); err != nil {
		return r, err
	}
	r.exact50 = lat[len(lat)/2]
	r.agree, err = compare(ctx, exact.Router, dom.Router, qs)
	return r, err
}

// build writes the catalog and runs gen-index on it, measuring it.
func build(ctx context.Context, r *row, src *sources, n, distinct int, seed uint64, catPath, idxPath, genIndex, model, ortLib string, stderr io.Writer) error {
	if err := writeCatalog(catPath, synth(src, n, distinct, seed)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, ">> %d tools: gen-index\n", n)
	cmd := exec.CommandContext(ctx, genIndex, "--catalog", catPath, "--model", model, "--ort-lib", ortLib, "--out", idxPath, "--quiet")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gen-index: %w", err)
	}
	r.build = time.Since(start)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.buildRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	r.buildCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	fmt.Fprintf(stderr, ">> %d tools: gen-index %s (CPU %s), peak RSS %s\n", n, r.build.Round(time.Second), r.buildCPU.Round(time.Second), mib(uint64(r.buildRSS)))
	return nil
}

// scoreRoute measures Route's scoring on the requests: wall time and
// the CPU time of the measuring thread, each sorted. With a profile path,
// the measured rounds are CPU-profiled into it.
func scoreRoute(ctx context.Context, dom server.Domain, qs []string, profile string) (lat, cpu []time.Duration, err error) {
	// Wall time, and the CPU time of the measuring thread: on a shared
	// machine the second is the steadier figure.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for round := 0; round < 3; round++ { // the first round warms caches up
		if round == 1 && profile != "" {
			f, err := os.Create(profile)
			if err != nil {
				return nil, nil, err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return nil, nil, err
			}
			defer pprof.StopCPUProfile()
		}
		for _, q := range qs {
			c0 := threadCPU()
			t := time.Now()
			if _, err := dom.Router.Route(ctx, route.RouteQuery{Query: q}); err != nil {
				return nil, nil, err
			}
			if round > 0 {
				lat = append(lat, time.Since(t))
				cpu = append(cpu, threadCPU()-c0)
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(cpu)
	return lat, cpu, nil
}

// threadCPU is the CPU time of the calling OS thread (Linux
// RUSAGE_THREAD; 0 elsewhere).
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureLoad times index.Load (the daemon's start and every swap pay
// it) and the heap it leaves behind.
func measureLoad(path string) (time.Duration, uint64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	idx, err := index.Load(path)
	d := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(idx)
	return d, after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc), nil
}

// embedOnce embeds texts with the real model.
func embedOnce(ctx context.Context, model, ortLib string, texts []string) ([][]float32, error) {
	man, err := models.Resolve(model, "")
	if err != nil {
		return nil, err
	}
	rt, err := embed.InitRuntime(ortLib)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	eng, err := embed.Open(rt, embed.Config{ModelDir: model, Manifest: man})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	var out [][]float32
	for len(texts) > 0 {
		n := min(len(texts), 512) // under the engine's batch bound
		vecs, err := eng.Embed(ctx, texts[:n])
		if err != nil {
			return nil, err
		}
		out, texts = append(out, vecs...), texts[n:]
	}
	return out, nil
}

// lookupEmbedder returns the vectors embedded beforehand by the real
// model, so that Route's latency is its scoring alone.
type lookupEmbedder map[string][]float32

func (l lookupEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v, ok := l[t]
		if !ok {
			return nil, fmt.Errorf("scale-bench: %q was not embedded beforehand", t)
		}
		out[i] = v
	}
	return out, nil
}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| tools | distinct tools | vectors | gen-index time | gen-index CPU | gen-index peak RSS | index size | load time | load heap | ranker build | shortlist build | scoring | Route scoring p50 | p99 | CPU p50 | exact p50 | tools kept | servers kept | same answer |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		scoring, exact, tools, servers, same, build := "exact", "-", "-", "-", "-", "-"
		if r.cells > 0 {
			build = r.shortlist.Round(time.Millisecond).String()
			scoring = fmt.Sprintf("shortlist, %d cells", r.cells)
			exact = ms(r.exact50)
			tools, servers = fmt.Sprintf("%.4f", r.agree.tools()), fmt.Sprintf("%.4f", r.agree.servers())
			same = fmt.Sprintf("%d/%d", r.agree.same, r.agree.queries)
		}
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.tools, r.distinct, r.vectors,
			orDash(r.build, r.build.Round(100*time.Millisecond).String()), orDash(r.build, r.buildCPU.Round(100*time.Millisecond).String()),
			orDash(r.build, mib(uint64(r.buildRSS))), mib(uint64(r.size)),
			r.load.Round(time.Millisecond), mib(r.loadHeap), r.domain.Round(time.Millisecond), build, scoring,
			ms(r.p50), ms(r.p99), ms(r.cpu50), exact, tools, servers, same)
	}
}

// orDash is s, or "-" for an index that was not built in this run.
func orDash(build time.Duration, s string) string {
	if build == 0 {
		return "-"
	}
	return s
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
