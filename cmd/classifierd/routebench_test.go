package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/classifierd/classifierd/analyze"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/learn"
	"github.com/classifierd/classifierd/rank"
	"github.com/classifierd/classifierd/route"
	"github.com/classifierd/classifierd/server"
)

// routeBenchTasks are the two request sizes issue 29 sets Route latency
// targets for: a 20-word task (p50 <= 4 ms on a 500-tool catalog) and a
// 200-word agent task (p50 <= 15 ms).
var routeBenchTasks = []struct{ name, text string }{
	{"words=20", "Check my GitHub notifications, list the recent issues on the main repo and save them as Markdown to /root/notes/issues.md"},
	{"words=200", strings.Join([]string{
		"I am preparing the quarterly report for our engineering team and I need your help with several steps.",
		"First, go through the open pull requests and the recent issues in our GitHub repository and pick out the ones that were closed since the first of the month, with their authors and labels.",
		"Then look up the current exchange rate between US dollars and euros, because the budget section has to show both currencies, and compute the total of the three invoices I pasted earlier, which were 1,250, 980 and 2,430 dollars.",
		"After that, search the web for any announcements our two main competitors made this quarter and summarise them in a short paragraph each, with the link to the source.",
		"Also check the weather forecast for Berlin next Wednesday, since the review meeting may be held outdoors if it is sunny.",
		"When everything is ready, write the whole report as Markdown to /root/reports/q3-summary.md, send a short email to anna.schmidt@example.com with the main figures, and add a reminder to my calendar for the review meeting at ten in the morning.",
		"Please keep the tone factual and the report under two pages.",
	}, " ")},
}

// benchIndex is the real model's index of benchCatalog, for the
// benchmarks that route on it: the engine (for bare runs), the daemon's
// vector cache over it, and the index built through that cache.
func benchIndex(b *testing.B) (*catalog.Catalog, *embed.Engine, *rank.VectorCache, *index.Index) {
	b.Helper()
	eng := realEngine(b)
	emb := server.CachedEmbedder(eng)
	model := labels.Model{Name: filepath.Base(testenv.ModelDir()), Fingerprint: eng.Fingerprint(), Dims: eng.Dims()}
	cat := benchCatalog(b)
	idx, err := indexbuild.Build(context.Background(), cat, emb, model, indexbuild.Options{Embedding: labels.Options{Generator: "BenchmarkRouteDecisions"}})
	if err != nil {
		b.Fatal(err)
	}
	return cat, eng, emb, idx
}

// benchCatalog is the probe set's catalog three times over, each copy's
// servers renamed: 87 servers, 528 tools, as large as the catalogs the
// targets name.
func benchCatalog(b *testing.B) *catalog.Catalog {
	b.Helper()
	probe, err := catalog.Load(filepath.Join(testenv.RepoRoot(), "data", "probe", "probe.catalog.json"))
	if err != nil {
		b.Fatal(err)
	}
	out := &catalog.Catalog{Categories: probe.Categories}
	for c := 0; c < 3; c++ {
		for _, s := range probe.Servers {
			s.ID = fmt.Sprintf("%s-%d", s.ID, c)
			s.Name = ""
			out.Servers = append(out.Servers, s)
		}
	}
	return out
}

// BenchmarkRouteDecisions is Route with the real model, in process, with
// one client, on a 528-tool catalog described by text only, for the two
// request sizes: each call's latency, reported as p50-ms and p99-ms, with
// bare ONNX Runtime's run on the same text's tokens (bare-p50-ms:
// embed.Engine.Infer, one model run and its pooling, tokenised before the
// clock starts; one after each Route) and the ratio of the two p50s. Earlier turns are
// not part of these requests; every call is a new request text for the
// vector cache (its cue capability texts are cached after the first).
func BenchmarkRouteDecisions(b *testing.B) {
	ctx := context.Background()
	cat, eng, emb, idx := benchIndex(b)
	dom, err := server.NewDomainConfig(idx, emb, server.DomainConfig{})
	if err != nil {
		b.Fatal(err)
	}
	tools := 0
	for _, s := range cat.Servers {
		tools += len(s.Tools)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("catalog: %d servers, %d tools; load average %s", len(cat.Servers), tools, strings.TrimSpace(string(load)))
	for _, task := range routeBenchTasks {
		b.Run(fmt.Sprintf("tools=%d/%s", tools, task.name), func(b *testing.B) {
			// A different request text each call (a counter in front),
			// so no call is answered from an earlier one's vectors.
			texts := func(i int) string { return fmt.Sprintf("(%d) %s", i, task.text) }
			// One Route, then one bare run, in turn: on a shared
			// machine whose load moves, both see the same load.
			bare := make([]time.Duration, 0, b.N)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := dom.Router.Route(ctx, route.RouteQuery{Query: texts(i)}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				b.StopTimer()
				ids, err := eng.Tokens(texts(b.N + i))
				if err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				if _, err := eng.Infer(ctx, [][]int64{ids}); err != nil {
					b.Fatal(err)
				}
				bare = append(bare, time.Since(t0))
				b.StartTimer()
			}
			b.StopTimer()
			p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
			bp50 := quantile(bare, 0.5)
			b.ReportMetric(ms(p50), "p50-ms")
			b.ReportMetric(ms(p99), "p99-ms")
			b.ReportMetric(ms(bp50), "bare-p50-ms")
			b.ReportMetric(float64(p50)/float64(bp50), "route/bare")
		})
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkAnalyzePromptLearning is AnalyzePrompt's work with learning on,
// on BenchmarkRouteDecisions' catalog and requests: "two-pass" is how it
// was (the analyzer's answer, then Router.Describe ranking the prompt
// again for the report it may get), "one-pass" how it is (the
// description from the analyzer's own embedding and scoring,
// Router.DescribeTurns). Each reports p50-ms and p99-ms; compare the two
// in one run (the machine's load is printed).
func BenchmarkAnalyzePromptLearning(b *testing.B) {
	ctx := context.Background()
	cat, _, emb, idx := benchIndex(b)
	l, err := learn.New(ctx, learn.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	dom, err := server.NewDomainConfig(idx, emb, server.DomainConfig{Learned: l.View(idx)})
	if err != nil {
		b.Fatal(err)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("catalog: %d servers; load average %s", len(cat.Servers), strings.TrimSpace(string(load)))
	passes := []struct {
		name string
		run  func(text string) error
	}{
		{"two-pass", func(text string) error {
			if _, err := dom.Analyzer.Analyze(ctx, analyze.AnalyzeQuery{Prompt: text}); err != nil {
				return err
			}
			_, _, err := dom.Router.Describe(ctx, text)
			return err
		}},
		{"one-pass", func(text string) error {
			var described []learn.Prob
			_, err := dom.Analyzer.Analyze(ctx, analyze.AnalyzeQuery{Prompt: text, Scored: func(ts []rank.Turn, v []float32) {
				described = dom.Router.DescribeTurns(ts, v)
			}})
			if err == nil && len(described) == 0 {
				err = errors.New("no description")
			}
			return err
		}},
	}
	for _, task := range routeBenchTasks {
		for _, p := range passes {
			b.Run(task.name+"/"+p.name, func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					if err := p.run(fmt.Sprintf("(%s %d) %s", p.name, i, task.text)); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.ReportMetric(ms(quantile(lat, 0.5)), "p50-ms")
				b.ReportMetric(ms(quantile(lat, 0.99)), "p99-ms")
			})
		}
	}
}

// BenchmarkRouteAfterOthersReports is a caller's Route with no reports of
// its own, on BenchmarkRouteDecisions' catalog: "idle" before any report,
// "reports=7000" after seven other identities stored 1,000 reports each
// (reports by query, three of eight servers called, all eight shown: the
// eighth and ninth hostile passes' learning cost). Each reports p50-ms;
// the ratio of the two in one run is what issue 27 bounds (≤ 2).
func BenchmarkRouteAfterOthersReports(b *testing.B) {
	ctx := context.Background()
	cat, _, emb, idx := benchIndex(b)
	var servers []string
	for _, s := range cat.Servers[:8] {
		servers = append(servers, s.ID)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("catalog: %d servers; load average %s", len(cat.Servers), strings.TrimSpace(string(load)))
	for _, reports := range []int{0, 7000} {
		l, err := learn.New(ctx, learn.Config{Rate: 1e9, Burst: 1 << 30}, nil)
		if err != nil {
			b.Fatal(err)
		}
		view := l.View(idx)
		dom, err := server.NewDomainConfig(idx, emb, server.DomainConfig{Learned: view})
		if err != nil {
			b.Fatal(err)
		}
		// 350 distinct requests, each reported by 20 identity and
		// server choices: the vectors cost 350 model runs, not 7,000.
		var vec []float32
		var described []learn.Prob
		for i := 0; i < reports; i++ {
			if i%20 == 0 {
				text := fmt.Sprintf("%s for the release %d", routeBenchTasks[0].text[:40+i%37], i)
				if vec, described, err = dom.Router.Describe(ctx, text); err != nil {
					b.Fatal(err)
				}
			}
			called := []string{servers[i%8], servers[(i/8+1+i)%8], servers[(i/3+3+i)%8]}
			if _, err := view.Report(ctx, learn.Use{Vec: vec, Described: described, Identity: fmt.Sprintf("token:h%d", i%7),
				Servers: called, Shown: servers}); err != nil {
				b.Fatal(err)
			}
		}
		name := "idle"
		if reports > 0 {
			name = fmt.Sprintf("reports=%d", reports)
		}
		b.Run(name, func(b *testing.B) {
			q := func(i int) route.RouteQuery {
				return route.RouteQuery{Query: fmt.Sprintf("(%d) %s", i, routeBenchTasks[0].text), Caller: "token:bob"}
			}
			if _, err := dom.Router.Route(ctx, q(-1)); err != nil { // the fits, once
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := dom.Router.Route(ctx, q(i)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.ReportMetric(ms(quantile(lat, 0.5)), "p50-ms")
			b.ReportMetric(ms(quantile(lat, 0.99)), "p99-ms")
			// The process's CPU per Route: on a loaded machine, steadier
			// than the wall clock.
			b.ReportMetric(ms(cpuTime(b)-cpu0)/float64(b.N), "cpu-ms")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
