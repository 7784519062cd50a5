package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"

	"github.com/classifierd/classifierd/catalog"
)

// task is one labelled request of a routing catalog.
type task struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// Steps are the needs, each satisfied by any one of its servers (server
	// ids after loading); none for an out-of-scope request.
	Steps [][]string `json:"server_steps"`
	// Utility marks the steps that are utilities (probe set only).
	Utility []bool `json:"utility_steps"`
	Kind    string `json:"kind"`
	// Servers is gen-index eval's field: with no Steps, each is a need.
	Servers []string `json:"servers"`
	// Synthetic marks a task joined from others' texts (training only).
	Synthetic bool `json:"-"`
	// needed is every server of every step, by id.
	needed map[string]bool
}

// dataset is one catalog with its tasks.
type dataset struct {
	Name  string
	Cat   *catalog.Catalog
	Tasks []task
}

// source names a catalog and its task file; max > 0 keeps an even
// sample of that many tasks.
type source struct {
	name, catalog, tasks string
	max                  int
}

// defaultSources are the dev catalogs: the probe set, MCP-Bench, MSC-Bench
// and toolret-train's five sources, as tools/datasets converts them into
// dataDir.
func defaultSources(dataDir, probeDir string) []source {
	out := []source{
		{"probe", filepath.Join(probeDir, "probe.catalog.json"), filepath.Join(probeDir, "probe.tasks.jsonl"), 0},
		{"mcpbench", filepath.Join(dataDir, "mcpbench.catalog.json"), filepath.Join(dataDir, "mcpbench.queries.jsonl"), 0},
		{"msc", filepath.Join(dataDir, "msc.catalog.json"), filepath.Join(dataDir, "msc.queries.jsonl"), 0},
		// MetaTool's dev split (single-tool queries disjoint from its test
		// split, which make eval reports) against its descriptions.
		{"metatool", filepath.Join(dataDir, "metatool-desc.catalog.json"), filepath.Join(dataDir, "metatool.dev.jsonl"), 600},
	}
	for _, s := range []string{"seal-tools", "bfcl", "apibench", "api-bank", "toolalpaca"} {
		n := "toolret-" + s
		out = append(out, source{n, filepath.Join(dataDir, n+".catalog.json"), filepath.Join(dataDir, n+".queries.jsonl"), 0})
	}
	return out
}

func loadDataset(s source) (*dataset, error) {
	cat, err := catalog.Load(s.catalog)
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, srv := range cat.Servers {
		ids[srv.Name] = srv.ID
		ids[srv.ID] = srv.ID
	}
	f, err := os.Open(s.tasks)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &dataset{Name: s.name, Cat: cat}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var t task
		if err := json.Unmarshal([]byte(line), &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", s.tasks, n, err)
		}
		if len(t.Steps) == 0 && t.Kind != "oos" {
			// gen-index eval's format: every server is a need.
			for _, srv := range t.Servers {
				t.Steps = append(t.Steps, []string{srv})
			}
		}
		t.needed = map[string]bool{}
		for i, st := range t.Steps {
			for j, name := range st {
				id, ok := ids[name]
				if !ok {
					return nil, fmt.Errorf("%s:%d: unknown server %q", s.tasks, n, name)
				}
				t.Steps[i][j] = id
				t.needed[id] = true
			}
		}
		d.Tasks = append(d.Tasks, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if s.max > 0 && len(d.Tasks) > s.max {
		keep := make([]task, s.max)
		for i := range keep {
			keep[i] = d.Tasks[i*len(d.Tasks)/s.max]
		}
		d.Tasks = keep
	}
	return d, nil
}

// joiners join the texts of two or three tasks into one request.
var joiners = [][]string{
	{"%s and %s"}, {"%s, then %s"}, {"%s. Also, %s"}, {"%s. %s"}, {"%s; %s"}, {"%s. After that, %s"},
	{"First, %s. Then %s. Finally, %s"}, {"%s, %s, and %s"}, {"%s. %s. %s"},
}

// synthesize returns up to n tasks made by joining two or three of d's
// one-need tasks that need different servers: training data that shows,
// in every catalog, what a second and third need look like. They are
// never measured.
func synthesize(d *dataset, n int, seed int64) []task {
	var single []int
	for i, t := range d.Tasks {
		if len(t.Steps) == 1 && !t.Synthetic {
			single = append(single, i)
		}
	}
	if len(single) < 4 {
		return nil
	}
	r := rand.New(rand.NewSource(seed))
	var out []task
	for tries := 0; len(out) < n && tries < 4*n; tries++ {
		j := joiners[r.Intn(len(joiners))]
		k := strings.Count(j[0], "%s")
		var parts []*task
		seen := map[string]bool{}
		for len(parts) < k {
			t := &d.Tasks[single[r.Intn(len(single))]]
			clash := false
			for _, s := range t.Steps[0] {
				clash = clash || seen[s]
			}
			if clash {
				break
			}
			for _, s := range t.Steps[0] {
				seen[s] = true
			}
			parts = append(parts, t)
		}
		if len(parts) < k {
			continue
		}
		texts := make([]any, k)
		nt := task{Kind: fmt.Sprintf("synthetic-%d", k), Synthetic: true, needed: map[string]bool{}}
		slots := strings.Split(j[0], "%s")
		for i, t := range parts {
			txt := strings.TrimRight(strings.TrimSpace(t.Text), ".?! ")
			// Lower the first letter where the request reads on
			// ("... and find ..."), not after a full stop.
			if i > 0 && !strings.HasSuffix(slots[i], ". ") && len(txt) > 1 && txt[1] >= 'a' && txt[1] <= 'z' {
				txt = strings.ToLower(txt[:1]) + txt[1:]
			}
			texts[i] = txt
			nt.Steps = append(nt.Steps, t.Steps[0])
			for s := range t.needed {
				nt.needed[s] = true
			}
		}
		nt.Text = fmt.Sprintf(j[0], texts...)
		out = append(out, nt)
	}
	return out
}

// needsBucket names a task's number of needs for the report.
func needsBucket(t *task) string {
	switch n := len(t.Steps); {
	case n == 0:
		return "0"
	case n >= 4:
		return "4+"
	default:
		return fmt.Sprint(n)
	}
}

var buckets = []string{"1", "2", "3", "4+"}
