package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/classify"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/reliability"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/route"
)

// query is one labelled evaluation query (see data/catalogs/README.md).
type query struct {
	Text       string   `json:"text"`
	Categories []string `json:"categories"`
	Servers    []string `json:"servers"`
	Tools      []string `json:"tools"`
	Kind       string   `json:"kind"`
	// ServerSteps, when set, are the steps of a query that needs several
	// tool calls, each satisfied by any one of its servers (MSC-Bench's
	// equivalence sets); without them every gold server is a step.
	ServerSteps [][]string `json:"server_steps,omitempty"`
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
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var q query
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if strings.TrimSpace(q.Text) == "" {
			return nil, fmt.Errorf("%s:%d: empty text", path, n)
		}
		out = append(out, q)
	}
	return out, sc.Err()
}

// report is the JSON report of one evaluation.
type report struct {
	Catalog  string `json:"catalog"`
	Queries  string `json:"queries"`
	Model    string `json:"model"`
	N        int    `json:"n"`
	InScope  int    `json:"in_scope"`
	OutScope int    `json:"out_of_scope"`

	Categories *categoryReport `json:"categories,omitempty"`
	Routing    *routeReport    `json:"routing,omitempty"`

	BuildSeconds   float64 `json:"build_seconds"`
	LatencyP50Ms   float64 `json:"latency_p50_ms"`
	LatencyP99Ms   float64 `json:"latency_p99_ms"`
	CalibrationFit any     `json:"calibration"`
}

type categoryReport struct {
	Threshold       float64         `json:"threshold"`
	Accuracy        float64         `json:"accuracy"`              // in-scope, top-1, ignoring the threshold
	AccuracyAtThr   float64         `json:"accuracy_at_threshold"` // in-scope, abstaining counts as wrong
	MacroF1         float64         `json:"macro_f1"`
	ECEBefore       float64         `json:"ece_before"`
	ECEAfter        float64         `json:"ece_after"`
	AbstainPrec     float64         `json:"abstain_precision"`
	AbstainRecall   float64         `json:"abstain_recall"`
	MultiFullRecall float64         `json:"multi_full_recall,omitempty"`
	Reliability     []calibrate.Bin `json:"reliability"`
	Tradeoff        []tradeoff      `json:"tradeoff,omitempty"`
	// ByKind is top-1 accuracy per query kind other than single, multi
	// and oos: the language of a multilingual query set (hass-intents).
	ByKind map[string]kindAccuracy `json:"accuracy_by_kind,omitempty"`
}

// kindAccuracy is the in-scope top-1 accuracy over the queries of one kind.
type kindAccuracy struct {
	N        int     `json:"n"`
	Accuracy float64 `json:"accuracy"`
}

// groupKind reports whether a query kind names a group to score apart.
func groupKind(k string) bool { return k != "" && k != "single" && k != "multi" && k != "oos" }

// tradeoff is in-scope accuracy against abstain recall at one in-scope threshold.
type tradeoff struct {
	InScopeThreshold float64 `json:"threshold"`
	Accuracy         float64 `json:"accuracy_at_threshold"`
	AbstainRecall    float64 `json:"abstain_recall"`
}

type routeReport struct {
	ServerRecall map[string]float64 `json:"server_recall_at"`
	ToolRecall   map[string]float64 `json:"tool_recall_at"`
	ToolTop1     float64            `json:"tool_top1"`
	// SingleTop1 is top-1 over the queries with one gold tool only (a
	// multi-tool query's top tool is right when it is any of its gold).
	SingleTop1    float64 `json:"tool_top1_single"`
	SingleQueries int     `json:"single_queries"`
	MultiFull5    float64 `json:"multi_full_recall_at_5"`
	// ServerStepRecall5 is, over in-scope queries with gold servers, how
	// often every step has one of its servers among the top 5 servers
	// (no threshold); without server_steps, how often every gold server is.
	ServerStepRecall5 float64 `json:"server_step_recall_at_5"`
	ServerTop1        float64 `json:"server_top1"`
	ServerQueries     int     `json:"server_queries"`
	// MultiDefault is, over multi-tool queries, how often Route at the
	// default thresholds returns every gold server.
	MultiDefault float64 `json:"multi_all_servers_at_default"`
	MultiQueries int     `json:"multi_queries"`
	// ECE over every returned tool (up to 5 a query): confidence against
	// whether that tool is one of the query's gold tools; likewise servers.
	ECEBefore       float64         `json:"tool_ece_before"`
	ECEAfter        float64         `json:"tool_ece_after"`
	ServerECEBefore float64         `json:"server_ece_before"`
	ServerECEAfter  float64         `json:"server_ece_after"`
	AbstainPrec     float64         `json:"abstain_precision"`
	AbstainRecall   float64         `json:"abstain_recall"`
	Reliability     []calibrate.Bin `json:"reliability"`
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("gen-index eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	catPath := fs.String("catalog", "", "catalog JSON file (required)")
	qPath := fs.String("queries", "", "labelled queries, JSON lines (required)")
	jsonOut := fs.String("json", "", "write the JSON report here")
	pngOut := fs.String("png", "", "write the reliability diagram (PNG) here")
	name := fs.String("name", "", "name printed with the figures (default: the query file's name)")
	quiet := fs.Bool("quiet", false, "no progress output")
	resultsOut := fs.String("results", "", "write each query's gold and returned labels here (JSON lines, for error analysis)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gen-index eval --catalog FILE --queries FILE --model DIR [--json FILE] [--png FILE]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *catPath == "" || *qPath == "" {
		fs.Usage()
		return errors.New("--catalog and --queries are required")
	}
	if *name == "" {
		*name = strings.TrimSuffix(filepath.Base(*qPath), filepath.Ext(*qPath))
	}
	cat, err := catalog.Load(*catPath)
	if err != nil {
		return err
	}
	qs, err := readQueries(*qPath)
	if err != nil {
		return err
	}
	eng, closeModel, err := mf.open()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeModel()) }()
	man := eng.Manifest()

	start := time.Now()
	idx, err := buildIndex(ctx, cat, eng, "gen-index eval", false, *quiet, stderr)
	if err != nil {
		return err
	}
	cal := calibrate.OrDefault(idx.Calibration)
	rk, err := rank.New(idx, eng, rank.Options{Fusion: cal.Fusion})
	if err != nil {
		return err
	}
	cls, rt := classify.New(rk, cal, classify.Config{}), route.New(rk, cal, route.Config{})
	rep := report{Catalog: *catPath, Queries: *qPath, Model: man.Name, N: len(qs), BuildSeconds: time.Since(start).Seconds(),
		CalibrationFit: cls.Calibration()}
	var results *json.Encoder
	if *resultsOut != "" {
		f, err := os.Create(*resultsOut)
		if err != nil {
			return err
		}
		bw := bufio.NewWriter(f)
		defer func() { err = errors.Join(err, bw.Flush(), f.Close()) }()
		results = json.NewEncoder(bw)
	}
	qp := newProgress(stderr, "evaluating", *quiet)
	lat, err := evaluate(ctx, cls, rt, qs, &rep, results, qp.update)
	qp.done()
	if err != nil {
		return err
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		rep.LatencyP50Ms = ms(lat[len(lat)/2])
		rep.LatencyP99Ms = ms(lat[len(lat)*99/100])
	}
	printReport(stdout, *name, &rep)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if *pngOut != "" {
		var bins []calibrate.Bin
		title := *name
		if rep.Categories != nil {
			bins = rep.Categories.Reliability
		} else if rep.Routing != nil {
			bins = rep.Routing.Reliability
		}
		if err := reliability.WritePNG(*pngOut, title, bins); err != nil {
			return err
		}
	}
	return nil
}

// goldRanks is the 1-based rank of each of q's gold tools among the best
// rankDepth tools Route returns for q's text (0 when not among them).
func goldRanks(ctx context.Context, rt *route.Router, q query) ([]int, error) {
	zero := float32(0)
	res, err := rt.Route(ctx, route.RouteQuery{Query: q.Text, MaxServers: rankDepth, MaxTools: rankDepth, MinConfidence: &zero})
	if err != nil {
		return nil, err
	}
	ranks := make([]int, len(q.Tools))
	for i, g := range q.Tools {
		for j, t := range res.Tools {
			if t.Server+"/"+t.Name == g {
				ranks[i] = j + 1
				break
			}
		}
	}
	return ranks, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// result is one query's outcome, written by --results.
type result struct {
	Text       string    `json:"text"`
	Kind       string    `json:"kind,omitempty"`
	Gold       []string  `json:"gold"`
	Category   string    `json:"category,omitempty"`
	Tools      []string  `json:"tools,omitempty"`
	Confidence []float64 `json:"confidence,omitempty"`
	Right      bool      `json:"right"`
	Reasoning  string    `json:"reasoning,omitempty"`
	// GoldRanks is each gold tool's 1-based rank among up to rankDepth
	// tools of a wider Route call (0: below that), so a miss shows
	// whether the tool was close.
	GoldRanks []int `json:"gold_ranks,omitempty"`
}

// rankDepth is how deep --results looks for a missed gold tool.
const rankDepth = 50

func evaluate(ctx context.Context, cls *classify.Classifier, rt *route.Router, qs []query, rep *report, results *json.Encoder, progress func(int, int)) ([]time.Duration, error) {
	idx := cls.Index()
	hasCats := len(idx.LabelsOf(index.KindCategory)) > 0
	hasTools := len(idx.LabelsOf(index.KindTool)) > 0
	zero := float32(0)
	var lat []time.Duration

	// Categories: single-label (Classify) for single/oos queries.
	var cr categoryReport
	var confBefore, confAfter []float64
	var correct []bool
	tp, fp, fn := map[string]int{}, map[string]int{}, map[string]int{}
	var abstainTP, abstainFP, abstainFN int
	type point struct {
		inScope, conf float64
		right, oos    bool
	}
	var curve []point
	var inScope, inRight, inRightThr int

	// Routing.
	var rr routeReport
	ks := []int{1, 3, 5}
	srvHits, toolHits := make([]int, len(ks)), make([]int, len(ks))
	var multiDefault int
	var routed, multi, multiFull, top1, ranked, single, singleTop1 int
	var srvQueries, srvSteps5, srvTop1 int
	var tConfB, tConfA, sConfB, sConfA []float64
	var tRel, sRel []bool
	var rAbTP, rAbFP, rAbFN int

	for i, q := range qs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		oos := q.Kind == "oos" || (len(q.Categories) == 0 && len(q.Servers) == 0 && len(q.Tools) == 0)
		if oos {
			rep.OutScope++
		} else {
			rep.InScope++
		}
		r := result{Text: q.Text, Kind: q.Kind, Gold: slices.Concat(q.Categories, q.Tools)}
		if hasCats && (len(q.Categories) > 0 || oos) && q.Kind != "multi" {
			t0 := time.Now()
			res, err := cls.Classify(ctx, q.Text, 3, &zero)
			lat = append(lat, time.Since(t0))
			if err != nil {
				return nil, fmt.Errorf("query %d: %w", i, err)
			}
			thr := cls.Calibration().Categories.Threshold
			cr.Threshold = thr
			top := res.Categories[0]
			abstain := top.Confidence*res.InScope < thr
			curve = append(curve, point{inScope: res.InScope, conf: top.Confidence, right: !oos && top.ID == q.Categories[0], oos: oos})
			r.Category, r.Right, r.Reasoning = top.ID, oos == abstain && (oos || top.ID == q.Categories[0]), res.Reasoning
			if oos {
				if abstain {
					abstainTP++
				} else {
					abstainFN++
				}
			} else {
				inScope++
				gold := q.Categories[0]
				right := top.ID == gold
				if right {
					inRight++
				}
				if groupKind(q.Kind) {
					if cr.ByKind == nil {
						cr.ByKind = map[string]kindAccuracy{}
					}
					k := cr.ByKind[q.Kind]
					k.N++
					if right {
						k.Accuracy++ // a count until the end
					}
					cr.ByKind[q.Kind] = k
				}
				if right && !abstain {
					inRightThr++
				}
				if abstain {
					abstainFP++
				}
				confBefore = append(confBefore, clamp01(top.Score))
				confAfter = append(confAfter, top.Confidence)
				correct = append(correct, right)
				if right {
					tp[gold]++
				} else {
					fp[top.ID]++
					fn[gold]++
				}
			}
		}
		if hasTools && (len(q.Tools) > 0 || len(q.Servers) > 0 || oos) {
			t0 := time.Now()
			res, err := rt.Route(ctx, route.RouteQuery{Query: q.Text, MaxServers: 5, MaxTools: 5, MinConfidence: &zero})
			if len(lat) <= i {
				lat = append(lat, time.Since(t0))
			}
			if err != nil {
				return nil, fmt.Errorf("query %d: %w", i, err)
			}
			def, err := rt.Route(ctx, route.RouteQuery{Query: q.Text, OnNoMatch: route.NoMatchNone})
			if err != nil {
				return nil, fmt.Errorf("query %d: %w", i, err)
			}
			if oos {
				if def.Abstained {
					rAbTP++
				} else {
					rAbFN++
				}
			} else {
				if def.Abstained {
					rAbFP++
				}
				routed++
				var srvs, tools []string
				for _, s := range res.Servers {
					srvs = append(srvs, s.ID)
				}
				for _, t := range res.Tools {
					tools = append(tools, t.Server+"/"+t.Name)
					r.Confidence = append(r.Confidence, t.Confidence)
				}
				r.Tools, r.Reasoning = tools, res.Reasoning
				if len(q.Servers) > 0 {
					srvQueries++
					if stepsIn(q, srvs[:min(5, len(srvs))]) {
						srvSteps5++
					}
					if len(srvs) > 0 && stepsAny(q, srvs[0]) {
						srvTop1++
					}
				}
				for j, k := range ks {
					if len(q.Servers) > 0 && anyIn(q.Servers, srvs[:min(k, len(srvs))]) {
						srvHits[j]++
					}
					if len(q.Tools) > 0 && anyIn(q.Tools, tools[:min(k, len(tools))]) {
						toolHits[j]++
					}
				}
				if len(tools) > 0 && len(q.Tools) > 0 {
					right := slices.Contains(q.Tools, tools[0])
					r.Right = right
					if right {
						top1++
					}
					ranked++
					if len(q.Tools) == 1 {
						single++
						if right {
							singleTop1++
						}
					}
				}
				// Calibration is per returned label: a server's or tool's
				// confidence is the probability that it is relevant.
				for _, t := range res.Tools {
					tConfB = append(tConfB, clamp01(t.Score))
					tConfA = append(tConfA, t.Confidence)
					tRel = append(tRel, slices.Contains(q.Tools, t.Server+"/"+t.Name))
				}
				for _, s := range res.Servers {
					sConfB = append(sConfB, clamp01(s.Score))
					sConfA = append(sConfA, s.Confidence)
					sRel = append(sRel, slices.Contains(q.Servers, s.ID))
				}
				if results != nil && len(q.Tools) > 0 {
					if r.GoldRanks, err = goldRanks(ctx, rt, q); err != nil {
						return nil, fmt.Errorf("query %d: %w", i, err)
					}
				}
				if q.Kind == "multi" && len(q.Tools) > 1 {
					multi++
					r.Right = allIn(q.Tools, tools[:min(5, len(tools))])
					if r.Right {
						multiFull++
					}
					var got []string
					for _, s := range def.Servers {
						got = append(got, s.ID)
					}
					if allIn(q.Servers, got) {
						multiDefault++
					}
				}
			}
		}
		if results != nil {
			if err := results.Encode(r); err != nil {
				return nil, err
			}
		}
		if progress != nil {
			progress(i+1, len(qs))
		}
	}
	for k, a := range cr.ByKind {
		cr.ByKind[k] = kindAccuracy{N: a.N, Accuracy: a.Accuracy / float64(a.N)}
	}
	if inScope > 0 || abstainTP+abstainFN > 0 {
		cr.Accuracy = ratio(inRight, inScope)
		cr.AccuracyAtThr = ratio(inRightThr, inScope)
		cr.MacroF1 = macroF1(tp, fp, fn)
		cr.ECEBefore = calibrate.ECE(confBefore, correct, calibrate.ECEBins)
		cr.ECEAfter = calibrate.ECE(confAfter, correct, calibrate.ECEBins)
		cr.Reliability = calibrate.Reliability(confAfter, correct, calibrate.ECEBins)
		cr.AbstainPrec = ratio(abstainTP, abstainTP+abstainFP)
		cr.AbstainRecall = ratio(abstainTP, abstainTP+abstainFN)
		if abstainTP+abstainFN > 0 {
			for _, t := range []float64{0.1, 0.15, 0.2, 0.3, 0.4, 0.5} {
				var keep, in, drop, out int
				for _, p := range curve {
					ab := p.inScope*p.conf < t
					if p.oos {
						out++
						if ab {
							drop++
						}
					} else {
						in++
						if !ab && p.right {
							keep++
						}
					}
				}
				cr.Tradeoff = append(cr.Tradeoff, tradeoff{InScopeThreshold: t, Accuracy: ratio(keep, in), AbstainRecall: ratio(drop, out)})
			}
		}
		rep.Categories = &cr
	}
	if routed > 0 {
		rr.ServerRecall, rr.ToolRecall = map[string]float64{}, map[string]float64{}
		for j, k := range ks {
			rr.ServerRecall[fmt.Sprint(k)] = ratio(srvHits[j], routed)
			rr.ToolRecall[fmt.Sprint(k)] = ratio(toolHits[j], routed)
		}
		rr.ToolTop1 = ratio(top1, ranked)
		rr.SingleTop1 = ratio(singleTop1, single)
		rr.SingleQueries = single
		rr.MultiQueries = multi
		rr.MultiFull5 = ratio(multiFull, multi)
		rr.MultiDefault = ratio(multiDefault, multi)
		rr.ServerStepRecall5 = ratio(srvSteps5, srvQueries)
		rr.ServerTop1 = ratio(srvTop1, srvQueries)
		rr.ServerQueries = srvQueries
		rr.ECEBefore = calibrate.ECE(tConfB, tRel, calibrate.ECEBins)
		rr.ECEAfter = calibrate.ECE(tConfA, tRel, calibrate.ECEBins)
		rr.Reliability = calibrate.Reliability(tConfA, tRel, calibrate.ECEBins)
		rr.ServerECEBefore = calibrate.ECE(sConfB, sRel, calibrate.ECEBins)
		rr.ServerECEAfter = calibrate.ECE(sConfA, sRel, calibrate.ECEBins)
		rr.AbstainPrec = ratio(rAbTP, rAbTP+rAbFP)
		rr.AbstainRecall = ratio(rAbTP, rAbTP+rAbFN)
		rep.Routing = &rr
	}
	return lat, nil
}

func clamp01(x float64) float64 { return max(0, min(1, x)) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// stepsIn reports whether every step of q has one of its servers in got
// (every gold server, when q has no steps).
func stepsIn(q query, got []string) bool {
	if len(q.ServerSteps) == 0 {
		return allIn(q.Servers, got)
	}
	for _, st := range q.ServerSteps {
		if !anyIn(st, got) {
			return false
		}
	}
	return true
}

// stepsAny reports whether server satisfies some step of q (is a gold
// server, when q has no steps): the top server is a right one.
func stepsAny(q query, server string) bool {
	if len(q.ServerSteps) == 0 {
		return slices.Contains(q.Servers, server)
	}
	for _, st := range q.ServerSteps {
		if slices.Contains(st, server) {
			return true
		}
	}
	return false
}

func anyIn(gold, got []string) bool {
	for _, g := range gold {
		if slices.Contains(got, g) {
			return true
		}
	}
	return false
}

func allIn(gold, got []string) bool {
	for _, g := range gold {
		if !slices.Contains(got, g) {
			return false
		}
	}
	return true
}

func macroF1(tp, fp, fn map[string]int) float64 {
	labels := map[string]bool{}
	for _, m := range []map[string]int{tp, fp, fn} {
		for k := range m {
			labels[k] = true
		}
	}
	if len(labels) == 0 {
		return 0
	}
	var sum float64
	for l := range labels {
		p := ratio(tp[l], tp[l]+fp[l])
		r := ratio(tp[l], tp[l]+fn[l])
		if p+r > 0 {
			sum += 2 * p * r / (p + r)
		}
	}
	return sum / float64(len(labels))
}

func printReport(w io.Writer, name string, r *report) {
	fmt.Fprintf(w, "== %s (%d queries: %d in scope, %d out of scope; model %s)\n", name, r.N, r.InScope, r.OutScope, r.Model)
	if c := r.Categories; c != nil {
		fmt.Fprintf(w, "  categories: accuracy %.3f (top-1)  accuracy@thr %.3f  macro-F1 %.3f  ECE before %.3f after %.3f\n",
			c.Accuracy, c.AccuracyAtThr, c.MacroF1, c.ECEBefore, c.ECEAfter)
		if len(c.ByKind) > 0 {
			kinds := make([]string, 0, len(c.ByKind))
			for k := range c.ByKind {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			fmt.Fprint(w, "  accuracy by kind:")
			for _, k := range kinds {
				fmt.Fprintf(w, " %s %.3f (%d)", k, c.ByKind[k].Accuracy, c.ByKind[k].N)
			}
			fmt.Fprintln(w)
		}
		if r.OutScope > 0 {
			fmt.Fprintf(w, "  abstain at threshold %.2f: precision %.3f recall %.3f\n", c.Threshold, c.AbstainPrec, c.AbstainRecall)
			for _, t := range c.Tradeoff {
				fmt.Fprintf(w, "    threshold %.2f: accuracy@thr %.3f abstain recall %.3f\n", t.InScopeThreshold, t.Accuracy, t.AbstainRecall)
			}
		}
	}
	if rr := r.Routing; rr != nil {
		fmt.Fprintf(w, "  servers: recall@1 %.3f @3 %.3f @5 %.3f  ECE (returned servers) before %.3f after %.3f\n",
			rr.ServerRecall["1"], rr.ServerRecall["3"], rr.ServerRecall["5"], rr.ServerECEBefore, rr.ServerECEAfter)
		fmt.Fprintf(w, "  servers, every step (or gold server) in the top 5: %.3f of %d; top server right: %.3f\n",
			rr.ServerStepRecall5, rr.ServerQueries, rr.ServerTop1)
		fmt.Fprintf(w, "  tools:   top-1 %.3f  recall@1 %.3f @3 %.3f @5 %.3f  ECE (returned tools) before %.3f after %.3f\n",
			rr.ToolTop1, rr.ToolRecall["1"], rr.ToolRecall["3"], rr.ToolRecall["5"], rr.ECEBefore, rr.ECEAfter)
		if rr.MultiQueries > 0 {
			if rr.SingleQueries > 0 {
				fmt.Fprintf(w, "  single-tool queries: top-1 %.3f\n", rr.SingleTop1)
			}
			fmt.Fprintf(w, "  multi-tool queries: all gold tools in top 5 for %.3f of %d; all gold servers returned at the default thresholds for %.3f\n",
				rr.MultiFull5, rr.MultiQueries, rr.MultiDefault)
		}
		if r.OutScope > 0 {
			fmt.Fprintf(w, "  route abstain (default policy): precision %.3f recall %.3f\n", rr.AbstainPrec, rr.AbstainRecall)
		}
	}
	fmt.Fprintf(w, "  latency per query p50 %.2f ms p99 %.2f ms; index build %.1f s\n", r.LatencyP50Ms, r.LatencyP99Ms, r.BuildSeconds)
}
