package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The development sets of issue 28 beside Banking77 and MetaTool: HWU64
// (intents, Banking77's layout) and the MCP routing sets of
// ../shared/datasets/mcp-routing-dev. Each is measured when its file
// exists; a missing one is named in the report, its cells left empty.
const (
	mHWUAcc   = "hwu64_accuracy"
	mHWUECE   = "hwu64_ece"
	mMSCStep5 = "msc_bench_step_recall5"
	mMSCTop1  = "msc_bench_server_top1"
	mMCPFull5 = "mcp_bench_full_recall5"
	mMCPTop1  = "mcp_bench_server_top1"
)

// devColumns is the table of the issue 28 development sets.
var devColumns = []column{
	{mHWUAcc, "HWU64 acc", "%.3f", compareDiff, ""},
	{mHWUECE, "HWU64 ECE", "%.3f", compareDiff, ""},
	{mMSCStep5, "MSC-Bench step R@5", "%.3f", compareDiff, "≥ 0.965"},
	{mMSCTop1, "MSC-Bench top server", "%.3f", compareDiff, ""},
	{mMCPFull5, "MCP-Bench full R@5", "%.3f", compareDiff, "≥ 0.97"},
	{mMCPTop1, "MCP-Bench top server", "%.3f", compareDiff, ""},
}

// devSet is one converted development set.
type devSet struct {
	name, catalog, queries string
	take                   func(evalReport) (map[string]float64, error)
}

// prepareDevSets converts whichever of the sets exist under c.datasets
// into raw (as make eval would), and returns them with the missing ones.
func prepareDevSets(ctx context.Context, c *config, raw string) (sets []devSet, missing []string, err error) {
	type src struct {
		name, file string
		args       []string
		take       func(evalReport) (map[string]float64, error)
	}
	for _, s := range []src{
		{"hwu64", "intents-dev/hwu64.json", []string{"-format", "banking77", "-name", "hwu64"}, hwuMetrics},
		{"msc-bench", "mcp-routing-dev/msc_bench.json", []string{"-format", "routing", "-name", "msc-bench"}, routingMetrics(mMSCStep5, mMSCTop1)},
		{"mcp-bench", "mcp-routing-dev/mcp_bench.json", []string{"-format", "routing", "-name", "mcp-bench"}, routingMetrics(mMCPFull5, mMCPTop1)},
	} {
		in := filepath.Join(c.datasets, s.file)
		if _, err := os.Stat(in); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", s.name, err))
			continue
		}
		args := append([]string{"run", "./tools/datasets", "-in", in, "-out", raw}, s.args...)
		if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		sets = append(sets, devSet{s.name, filepath.Join(raw, s.name+".catalog.json"), filepath.Join(raw, s.name+".test.jsonl"), s.take})
	}
	if c.quick {
		for i := range sets {
			if sets[i].name == "hwu64" {
				if sets[i].catalog, err = fewerExamples(sets[i].catalog, filepath.Join(filepath.Dir(raw), "hwu64-quick.catalog.json")); err != nil {
					return nil, nil, err
				}
			}
			q, err := subsetQueries(sets[i].queries, filepath.Join(filepath.Dir(raw), sets[i].name+"-quick.test.jsonl"), quickDev, 0)
			if err != nil {
				return nil, nil, err
			}
			sets[i].queries = q
		}
	}
	return sets, missing, nil
}

// quickDev is how many queries of each development set --quick keeps.
const quickDev = 120

// hwuMetrics takes accuracy and ECE from an HWU64 report.
func hwuMetrics(r evalReport) (map[string]float64, error) {
	m, err := banking77Metrics(r)
	if err != nil {
		return nil, err
	}
	return map[string]float64{mHWUAcc: m[mB77Acc], mHWUECE: m[mB77ECE]}, nil
}

// routingMetrics takes, from a routing set's report, how often every step
// (every gold server, without steps) is among the top 5 servers, and how
// often the top server is a right one, under the keys given.
func routingMetrics(step5, top1 string) func(evalReport) (map[string]float64, error) {
	return func(r evalReport) (map[string]float64, error) {
		rr := r.Routing
		if rr == nil || rr.ServerQueries == 0 {
			return nil, fmt.Errorf("%w: no server routing figures", ErrReport)
		}
		return map[string]float64{step5: rr.ServerStepRecall5, top1: rr.ServerTop1}, nil
	}
}

// fewerExamples writes a copy of an intent catalog with at most
// quickExamples examples per intent (--quick).
func fewerExamples(in, out string) (string, error) {
	var cat struct {
		Categories []catCategory `json:"categories"`
	}
	if err := readJSONFile(in, &cat); err != nil {
		return "", err
	}
	for i := range cat.Categories {
		ex := cat.Categories[i].Examples
		cat.Categories[i].Examples = ex[:min(len(ex), quickExamples)]
	}
	return out, writeJSONFile(out, cat)
}
