// Command datasets converts the read-only development datasets
// (../shared/datasets, see its README) into a classifierd catalog and a
// labelled query set (JSON lines) for `gen-index eval`. Output is
// deterministic for a seed.
//
//	datasets -in banking77.json -format banking77 -out DIR [-holdout 0.2] [-seed 1]
//	datasets -in metatool.json  -format metatool  -out DIR [-examples-per-tool 5] [-test-size 3000] [-dev-size 3000] [-dev-multi 500]
//	datasets -in mcp-routing-dev/msc_bench.json -format msc -out DIR
//	datasets -in mcp-routing-dev/mcp_bench.json -format mcpbench -out DIR
//	datasets -in toolret-train/pairs.jsonl.gz -format toolret -out DIR [-max-queries 600]
//	datasets -in home_assistant_intents-*.whl -format hass-intents -out DIR [-examples-per-intent 5] [-queries-per-intent 6] [-languages de,ja,...]
//	datasets -in msc_bench.json -format routing   -out DIR -name msc-bench
//
// -name sets the output files' prefix (banking77 and routing): -format
// banking77 -name hwu64 converts HWU64, which has Banking77's layout.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "datasets:", err)
		os.Exit(1)
	}
}

type options struct {
	in, format, out, name      string
	holdout                    float64
	seed                       int64
	examplesPerTool, test, dev int
	devMulti                   int
	maxQueries                 int
	// hass-intents (hass.go)
	examplesPerIntent, queriesPerIntent int
	languages                           string
}

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("datasets", flag.ContinueOnError)
	fs.StringVar(&o.in, "in", "", "dataset file (banking77.json or metatool.json)")
	fs.StringVar(&o.format, "format", "", "banking77, metatool, msc, mcpbench, toolret, hass-intents or routing (the mcp-routing-dev layout, for model-report)")
	fs.IntVar(&o.examplesPerIntent, "examples-per-intent", 5, "hass-intents: English example sentences per intent in the catalog")
	fs.IntVar(&o.queriesPerIntent, "queries-per-intent", 6, "hass-intents: test sentences per intent and language")
	fs.StringVar(&o.languages, "languages", "", "hass-intents: comma-separated language codes to keep besides English (default: all)")
	fs.StringVar(&o.name, "name", "", "output file prefix (banking77: default banking77; routing: default the dataset's name)")
	fs.StringVar(&o.out, "out", "", "output directory")
	fs.Float64Var(&o.holdout, "holdout", 0, "banking77: fraction of intents held out of the catalog (their queries become out-of-scope)")
	fs.Int64Var(&o.seed, "seed", 1, "random seed")
	fs.IntVar(&o.examplesPerTool, "examples-per-tool", 5, "metatool: example queries per tool in the examples catalog")
	fs.IntVar(&o.test, "test-size", 3000, "metatool: single-tool test queries sampled (all multi-tool queries are kept)")
	fs.IntVar(&o.dev, "dev-size", 3000, "metatool: single-tool dev queries for tuning, disjoint from the test queries")
	fs.IntVar(&o.devMulti, "dev-multi", 500, "metatool: two-need dev prompts made by joining pairs of dev queries")
	fs.IntVar(&o.maxQueries, "max-queries", 600, "toolret: queries kept per source (an even sample)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.in == "" || o.out == "" {
		return errors.New("-in and -out are required")
	}
	if o.holdout < 0 || o.holdout >= 1 {
		return errors.New("-holdout must be in [0,1)")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	switch o.format {
	case "banking77":
		return banking77(o, stdout)
	case "metatool":
		return metatool(o, stdout)
	case "msc":
		return msc(o, stdout)
	case "mcpbench":
		return mcpbench(o, stdout)
	case "toolret":
		o.test = o.maxQueries
		return toolret(o, stdout)
	case "hass-intents":
		if o.examplesPerIntent < 1 || o.queriesPerIntent < 1 {
			return errors.New("-examples-per-intent and -queries-per-intent must be positive")
		}
		return hassIntents(o, stdout)
	case "routing":
		return routing(o, stdout)
	}
	return fmt.Errorf("-format %q is not banking77, metatool, msc, mcpbench, toolret, hass-intents or routing", o.format)
}

type category struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Examples    []string `json:"examples,omitempty"`
}

type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Examples    []string        `json:"examples,omitempty"`
}

type server struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Tools       []tool `json:"tools"`
}

type catalogOut struct {
	Categories []category `json:"categories,omitempty"`
	Servers    []server   `json:"servers,omitempty"`
}

type query struct {
	Text       string   `json:"text"`
	Categories []string `json:"categories"`
	Servers    []string `json:"servers"`
	Tools      []string `json:"tools"`
	Kind       string   `json:"kind"`
	// ServerSteps (routing): each step needs one of its servers.
	ServerSteps [][]string `json:"server_steps,omitempty"`
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func writeQueries(path string, qs []query) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, q := range qs {
		if q.Categories == nil {
			q.Categories = []string{}
		}
		if q.Servers == nil {
			q.Servers = []string{}
		}
		if q.Tools == nil {
			q.Tools = []string{}
		}
		if err := enc.Encode(q); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func banking77(o options, stdout io.Writer) error {
	var ds struct {
		Labels []category `json:"labels"`
		Test   []struct {
			Text  string `json:"text"`
			Label string `json:"label"`
		} `json:"test"`
	}
	if err := readJSON(o.in, &ds); err != nil {
		return err
	}
	held := map[string]bool{}
	if o.holdout > 0 {
		ids := make([]string, len(ds.Labels))
		for i, l := range ds.Labels {
			ids[i] = l.ID
		}
		sort.Strings(ids)
		r := rand.New(rand.NewSource(o.seed))
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for _, id := range ids[:int(float64(len(ids))*o.holdout+0.5)] {
			held[id] = true
		}
	}
	var cat catalogOut
	for _, l := range ds.Labels {
		if !held[l.ID] {
			cat.Categories = append(cat.Categories, l)
		}
	}
	var qs []query
	oos := 0
	for _, t := range ds.Test {
		if held[t.Label] {
			qs = append(qs, query{Text: t.Text, Kind: "oos"})
			oos++
		} else {
			qs = append(qs, query{Text: t.Text, Categories: []string{t.Label}, Kind: "single"})
		}
	}
	name := "banking77"
	if o.name != "" {
		name = o.name
	}
	if o.holdout > 0 {
		name += "-oos"
	}
	if err := writeJSON(filepath.Join(o.out, name+".catalog.json"), cat); err != nil {
		return err
	}
	if err := writeQueries(filepath.Join(o.out, name+".test.jsonl"), qs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d intents in the catalog (%d held out), %d test queries (%d out of scope)\n",
		name, len(cat.Categories), len(held), len(qs), oos)
	return nil
}

type metatoolSet struct {
	Servers []server `json:"servers"`
	Queries []struct {
		Text    string   `json:"text"`
		Servers []string `json:"servers"`
		Tools   []string `json:"tools"`
		Kind    string   `json:"kind"`
	} `json:"queries"`
}

func metatool(o options, stdout io.Writer) error {
	ds := &metatoolSet{}
	if err := readJSON(o.in, ds); err != nil {
		return err
	}
	known := map[string]bool{}
	for _, s := range ds.Servers {
		known[s.ID] = true
	}
	// Single-tool queries by server, in a seeded order.
	byServer := map[string][]int{}
	var multi []int
	for i, q := range ds.Queries {
		if q.Kind == "multi" || len(q.Servers) > 1 {
			multi = append(multi, i)
			continue
		}
		if len(q.Servers) == 1 && known[q.Servers[0]] {
			byServer[q.Servers[0]] = append(byServer[q.Servers[0]], i)
		}
	}
	r := rand.New(rand.NewSource(o.seed))
	used := map[int]bool{}
	desc := catalogOut{}
	ex := catalogOut{}
	for _, s := range ds.Servers {
		ids := byServer[s.ID]
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		var examples []string
		for _, qi := range ids[:min(o.examplesPerTool, len(ids))] {
			examples = append(examples, ds.Queries[qi].Text)
			used[qi] = true
		}
		d := s
		d.Tools = nil
		for _, t := range s.Tools {
			t.Examples = nil
			d.Tools = append(d.Tools, t)
		}
		desc.Servers = append(desc.Servers, d)
		e := d
		e.Tools = nil
		for i, t := range d.Tools {
			if i == 0 {
				t.Examples = examples
			}
			e.Tools = append(e.Tools, t)
		}
		ex.Servers = append(ex.Servers, e)
	}
	var single []int
	for _, s := range ds.Servers {
		for _, qi := range byServer[s.ID] {
			if !used[qi] {
				single = append(single, qi)
			}
		}
	}
	sort.Ints(single)
	r.Shuffle(len(single), func(i, j int) { single[i], single[j] = single[j], single[i] })
	// The dev set is the next queries of the same shuffled order: disjoint
	// from the examples and the test set, for tuning without looking at
	// the test set. It has single-tool queries only; every multi-tool query
	// is kept for the test.
	dev := slices.Clone(single[min(o.test, len(single)):min(o.test+o.dev, len(single))])
	single = single[:min(o.test, len(single))]
	sort.Ints(single)
	sort.Ints(dev)
	qs := metatoolQueries(ds, append(single, multi...), used)
	for name, c := range map[string]catalogOut{"metatool-desc": desc, fmt.Sprintf("metatool-ex%d", o.examplesPerTool): ex} {
		if err := writeJSON(filepath.Join(o.out, name+".catalog.json"), c); err != nil {
			return err
		}
	}
	if err := writeQueries(filepath.Join(o.out, "metatool.test.jsonl"), qs); err != nil {
		return err
	}
	devQs := metatoolQueries(ds, dev, used)
	if err := writeQueries(filepath.Join(o.out, "metatool.dev.jsonl"), devQs); err != nil {
		return err
	}
	compound := compoundQueries(devQs, o.devMulti, rand.New(rand.NewSource(o.seed)))
	if err := writeQueries(filepath.Join(o.out, "metatool.dev-multi.jsonl"), compound); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "metatool: %d tools; %d example queries in metatool-ex%d; %d test queries (%d multi-tool), %d dev queries (and %d two-need prompts made of them), disjoint from the examples and the test queries\n",
		len(ds.Servers), len(used), o.examplesPerTool, len(qs), len(multi), len(dev), len(compound))
	return nil
}

// joiners are the ways compoundQueries joins two requests: %s is the first
// request without its final punctuation, %s the second with its first
// letter lowered where it reads on ("and can you..."), or as it is after a
// full stop.
var joiners = []struct {
	format string
	lower  bool
}{
	{"%s and %s", true},
	{"%s, and %s", true},
	{"%s, then %s", true},
	{"%s. Also, %s", true},
	{"%s. %s", false},
	{"%s; %s", true},
}

// compoundQueries makes up to n two-need prompts from pairs of the dev
// queries qs (each query used at most once, the two needing different
// tools), for tuning multi-tool routing without the test set, whose
// multi-tool queries are all kept for the test. They are easier than the
// real ones (each half is a whole request) but need the same thing: both
// tools among the top five.
func compoundQueries(qs []query, n int, r *rand.Rand) []query {
	order := r.Perm(len(qs))
	var out []query
	for i := 0; i+1 < len(order) && len(out) < n; i += 2 {
		a, b := qs[order[i]], qs[order[i+1]]
		if len(a.Tools) != 1 || len(b.Tools) != 1 || a.Tools[0] == b.Tools[0] {
			continue
		}
		j := joiners[r.Intn(len(joiners))]
		first := strings.TrimRight(strings.TrimSpace(a.Text), ".?! ")
		second := strings.TrimSpace(b.Text)
		if j.lower {
			second = lowerFirst(second)
		}
		out = append(out, query{Text: fmt.Sprintf(j.format, first, second),
			Servers: slices.Concat(a.Servers, b.Servers), Tools: slices.Concat(a.Tools, b.Tools), Kind: "multi"})
	}
	return out
}

// lowerFirst lowers a leading capital unless the word is "I" or "I'm" or
// an acronym (the second letter is a capital too).
func lowerFirst(s string) string {
	if len(s) < 2 || s[0] < 'A' || s[0] > 'Z' || s[1] >= 'A' && s[1] <= 'Z' || s[0] == 'I' && (s[1] == ' ' || s[1] == '\'') {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}

// metatoolQueries converts the queries at ids, skipping those used as examples.
func metatoolQueries(ds *metatoolSet, ids []int, used map[int]bool) []query {
	var qs []query
	for _, qi := range ids {
		if used[qi] {
			continue
		}
		q := ds.Queries[qi]
		var tools []string
		for i, s := range q.Servers {
			name := s
			if i < len(q.Tools) {
				name = q.Tools[i]
			}
			tools = append(tools, s+"/"+name)
		}
		kind := "single"
		if len(q.Servers) > 1 {
			kind = "multi"
		}
		qs = append(qs, query{Text: q.Text, Servers: q.Servers, Tools: tools, Kind: kind})
	}
	return qs
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
