// Command crossling measures what limits a model's cross-lingual intent
// accuracy: on a catalog of categories (English descriptions and examples)
// and labelled queries whose kind is their language (tools/datasets
// -format hass-intents or -format massive), it scores every query once
// through the served pipeline (gen-index's build, fit and classify: dense
// similarity, lexical evidence, the fitted linear head) and then with each
// part alone or changed, from the same vectors:
//
//	served       what Classify ranks: nearest catalog text + lexicon + head
//	no-head      the same without the linear head
//	no-lexicon   the same without the lexical boosts (keywords, patterns)
//	dense        plain max-cosine over every catalog text of a label
//	examples     max-cosine over the examples only (no description)
//	description  the description alone
//	centroid     cosine to the mean of the label's texts
//	ex-centroid  cosine to the mean of its examples
//	head         the linear head alone
//	examples@k   max-cosine over the first k examples (k = 1, 2, 3, ...)
//
// It prints top-1 accuracy on English, on the other languages pooled, and
// the mean over languages with at least --min-lang queries:
//
//	go run ./tools/crossling --model DIR --catalog C --queries Q [--manifest M]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/rank"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crossling:", err)
		os.Exit(1)
	}
}

type query struct {
	Text       string   `json:"text"`
	Categories []string `json:"categories"`
	Kind       string   `json:"kind"`
}

func readQueries(path string) ([]query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []query
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var q query
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			return nil, err
		}
		if len(q.Categories) == 1 && strings.TrimSpace(q.Text) != "" {
			out = append(out, q)
		}
	}
	return out, sc.Err()
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("crossling", flag.ContinueOnError)
	model := fs.String("model", "", "model directory (required)")
	manifest := fs.String("manifest", "", "model manifest (default: the model's own)")
	ortLib := fs.String("ort-lib", embed.DefaultLibPath(), "ONNX Runtime shared library")
	catPath := fs.String("catalog", "", "catalog JSON (categories with descriptions and examples)")
	qPath := fs.String("queries", "", "labelled queries, JSON lines; kind = language")
	english := fs.String("english", "en", "the kind of the catalog's own language")
	minLang := fs.Int("min-lang", 90, "languages with fewer queries are left out of the per-language mean")
	jsonOut := fs.String("json", "", "also write the figures as JSON here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *catPath == "" || *qPath == "" {
		return errors.New("--model, --catalog and --queries are required")
	}
	cat, err := catalog.Load(*catPath)
	if err != nil {
		return err
	}
	qs, err := readQueries(*qPath)
	if err != nil {
		return err
	}
	man, err := models.Resolve(*model, *manifest)
	if err != nil {
		return err
	}
	rt, err := embed.InitRuntime(*ortLib)
	if err != nil {
		return err
	}
	defer rt.Close()
	eng, err := embed.Open(rt, embed.Config{ModelDir: *model, Manifest: man, IntraOpThreads: 2, MaxConcurrent: 1})
	if err != nil {
		return err
	}
	defer eng.Close()
	idx, err := indexbuild.Build(ctx, cat, eng.Labels(), labels.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()}, indexbuild.Options{})
	if err != nil {
		return err
	}
	cal := calibrate.OrDefault(idx.Calibration)
	rk, err := rank.New(idx, eng, rank.Options{Fusion: cal.Fusion})
	if err != nil {
		return err
	}
	noLex := cal.Fusion
	noLex.Pattern, noLex.Name, noLex.Keyword = 0, 0, 0
	rkNoLex := rk.WithFusion(noLex)

	cats := rk.Categories()
	pos := map[string]int{}
	for j, li := range cats {
		pos[idx.Labels[li].ID] = j
	}
	maxEx := 0
	for _, li := range cats {
		maxEx = max(maxEx, countSource(&idx.Labels[li], index.SourceExample))
	}
	variants := []string{"served", "no-head", "no-lexicon", "dense", "examples", "description", "centroid", "ex-centroid", "head"}
	for k := 1; k < maxEx; k++ {
		variants = append(variants, fmt.Sprintf("examples@%d", k))
	}
	centroid := make([][]float32, len(cats))
	exCentroid := make([][]float32, len(cats))
	for j, li := range cats {
		l := &idx.Labels[li]
		centroid[j] = meanOf(idx, l, func(index.Source) bool { return true })
		exCentroid[j] = meanOf(idx, l, func(s index.Source) bool { return s == index.SourceExample })
	}

	right := map[string]map[string]int{} // variant -> kind -> right
	total := map[string]int{}
	for _, v := range variants {
		right[v] = map[string]int{}
	}
	const batch = 32
	for start := 0; start < len(qs); start += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(start+batch, len(qs))
		texts := make([]string, 0, end-start)
		for _, q := range qs[start:end] {
			texts = append(texts, q.Text)
		}
		vecs, err := eng.Embed(ctx, texts)
		if err != nil {
			return err
		}
		for i, q := range qs[start:end] {
			gold, ok := pos[q.Categories[0]]
			if !ok {
				continue
			}
			total[q.Kind]++
			v := vecs[i]
			turns, err := rk.Dense([]rank.Turn{{Text: q.Text, Weight: 1}}, [][]float32{v})
			if err != nil {
				return err
			}
			served := scores(rk.CategoryScores(turns))
			noLexS := scores(rkNoLex.CategoryScores(turns))
			var lp []float64
			if cal.Head != nil && cal.HeadWeight > 0 {
				lp = cal.Head.LogProbs(v)
			}
			withHead := func(s []float64) []float64 {
				out := append([]float64(nil), s...)
				for j := range out {
					if lp != nil {
						out[j] += cal.HeadWeight * lp[j]
					}
				}
				return out
			}
			per := map[string][]float64{
				"served":     withHead(served),
				"no-head":    served,
				"no-lexicon": withHead(noLexS),
			}
			for _, name := range variants[3:] {
				per[name] = make([]float64, len(cats))
			}
			for j, li := range cats {
				l := &idx.Labels[li]
				best, bestEx, desc := math.Inf(-1), math.Inf(-1), math.Inf(-1)
				bestK := make([]float64, maxEx)
				for k := range bestK {
					bestK[k] = math.Inf(-1)
				}
				ex := 0
				for x := 0; x < l.Count; x++ {
					c := dot(v, idx.Vector(l.First+x))
					best = math.Max(best, c)
					switch l.Sources[x] {
					case index.SourceDescription:
						desc = c
					case index.SourceExample:
						bestEx = math.Max(bestEx, c)
						for k := ex; k < maxEx; k++ {
							bestK[k] = math.Max(bestK[k], c)
						}
						ex++
					}
				}
				per["dense"][j] = best
				per["examples"][j] = bestEx
				per["description"][j] = desc
				per["centroid"][j] = dot(v, centroid[j])
				per["ex-centroid"][j] = dot(v, exCentroid[j])
				if lp != nil {
					per["head"][j] = lp[j]
				}
				for k := 1; k < maxEx; k++ {
					per[fmt.Sprintf("examples@%d", k)][j] = bestK[k-1]
				}
			}
			for name, s := range per {
				if argmax(s) == gold {
					right[name][q.Kind]++
				}
			}
		}
		fmt.Fprintf(os.Stderr, "\r%d/%d", end, len(qs))
	}
	fmt.Fprintln(os.Stderr)

	type figures struct {
		Variant  string             `json:"variant"`
		English  float64            `json:"english"`
		Others   float64            `json:"others_pooled"`
		LangMean float64            `json:"others_language_mean"`
		Worst    string             `json:"worst_language"`
		ByLang   map[string]float64 `json:"by_language"`
	}
	var out []figures
	fmt.Fprintf(stdout, "model %s, catalog %s (%d categories), %d queries; head weight %.3g, lexicon weights pattern %.2g keyword %.2g\n",
		man.Name, *catPath, len(cats), len(qs), cal.HeadWeight, cal.Fusion.Pattern, cal.Fusion.Keyword)
	fmt.Fprintf(stdout, "%-14s %8s %8s %8s  %s\n", "variant", "english", "others", "langmean", "worst")
	for _, name := range variants {
		f := figures{Variant: name, ByLang: map[string]float64{}, Worst: ""}
		var r, n int
		var sum float64
		var langs int
		worst := 2.0
		for kind, t := range total {
			acc := float64(right[name][kind]) / float64(t)
			f.ByLang[kind] = acc
			if kind == *english {
				f.English = acc
				continue
			}
			r += right[name][kind]
			n += t
			if t >= *minLang {
				sum += acc
				langs++
				if acc < worst {
					worst, f.Worst = acc, fmt.Sprintf("%s %.3f", kind, acc)
				}
			}
		}
		if n > 0 {
			f.Others = float64(r) / float64(n)
		}
		if langs > 0 {
			f.LangMean = sum / float64(langs)
		}
		out = append(out, f)
		fmt.Fprintf(stdout, "%-14s %8.3f %8.3f %8.3f  %s\n", name, f.English, f.Others, f.LangMean, f.Worst)
	}
	if *jsonOut != "" {
		kinds := make([]string, 0, len(total))
		for k := range total {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		b, err := json.MarshalIndent(map[string]any{"model": man.Name, "catalog": *catPath, "queries": *qPath, "per_kind": total, "variants": out}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, b, 0o644)
	}
	return nil
}

func countSource(l *index.Label, s index.Source) int {
	n := 0
	for _, x := range l.Sources {
		if x == s {
			n++
		}
	}
	return n
}

// meanOf is the unit-length mean of l's vectors whose source passes keep.
func meanOf(idx *index.Index, l *index.Label, keep func(index.Source) bool) []float32 {
	sum := make([]float32, idx.Dims)
	for x := 0; x < l.Count; x++ {
		if keep(l.Sources[x]) {
			for d, f := range idx.Vector(l.First + x) {
				sum[d] += f
			}
		}
	}
	var n float64
	for _, f := range sum {
		n += float64(f) * float64(f)
	}
	if n > 0 {
		s := float32(1 / math.Sqrt(n))
		for d := range sum {
			sum[d] *= s
		}
	}
	return sum
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func scores(ss []rank.Score) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = s.Score
	}
	return out
}

func argmax(s []float64) int {
	b := 0
	for i := range s {
		if s[i] > s[b] {
			b = i
		}
	}
	return b
}
