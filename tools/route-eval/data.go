package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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
	// needed is every server of every step, by id.
	needed map[string]bool
}

// dataset is one catalog with its tasks.
type dataset struct {
	Name  string
	Cat   *catalog.Catalog
	Tasks []task
}

// source names a catalog and its task file.
type source struct {
	name, catalog, tasks string
}

// defaultSources are the dev catalogs: the probe set, MCP-Bench, MSC-Bench
// and toolret-train's five sources, as tools/datasets converts them into
// dataDir.
func defaultSources(dataDir, probeDir string) []source {
	out := []source{
		{"probe", filepath.Join(probeDir, "probe.catalog.json"), filepath.Join(probeDir, "probe.tasks.jsonl")},
		{"mcpbench", filepath.Join(dataDir, "mcpbench.catalog.json"), filepath.Join(dataDir, "mcpbench.queries.jsonl")},
		{"msc", filepath.Join(dataDir, "msc.catalog.json"), filepath.Join(dataDir, "msc.queries.jsonl")},
	}
	for _, s := range []string{"seal-tools", "bfcl", "apibench", "api-bank", "toolalpaca"} {
		n := "toolret-" + s
		out = append(out, source{n, filepath.Join(dataDir, n+".catalog.json"), filepath.Join(dataDir, n+".queries.jsonl")})
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
	return d, sc.Err()
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
