package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/classifierd/classifierd/catalog"
)

// task is one request with the servers it needs: each step is satisfied
// by any one of its servers (catalog ids).
type task struct {
	ID    string
	Text  string
	Steps [][]string
}

// needs is every server of every step.
func (t task) needs() map[string]bool {
	out := map[string]bool{}
	for _, st := range t.Steps {
		for _, s := range st {
			out[s] = true
		}
	}
	return out
}

type dataset struct {
	Name  string
	Cat   *catalog.Catalog
	Tasks []task
	// Para is a task's paraphrase by task id (a set's paraphrases file,
	// {"id", "text"} lines): the same needs in other words.
	Para map[string]string
}

// rawSet is the shared dev sets' format (mcp-routing-dev/README.md) and
// the learn-probe catalog's.
type rawSet struct {
	Servers []rawServer `json:"servers"`
	Queries []rawTask   `json:"queries"`
}

type rawServer struct {
	ID          string    `json:"id"`
	Description string    `json:"description"`
	Tools       []rawTool `json:"tools"`
}

type rawTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

type rawTask struct {
	ID          string     `json:"id"`
	Text        string     `json:"text"`
	Servers     []string   `json:"servers"`
	ServerSteps [][]string `json:"server_steps"`
}

// source is where a set is: its catalog file and, when apart, its tasks
// (JSON lines); or, for toolret-train, the source family (prefix of its
// "source") whose pairs make a catalog of their own.
type source struct{ name, catalog, tasks, para, toolret string }

func sources(datasets, probe string) []source {
	dev := filepath.Join(datasets, "mcp-routing-dev")
	out := []source{
		{name: "learn-probe", catalog: filepath.Join(probe, "catalog.json"), tasks: filepath.Join(probe, "tasks.jsonl"), para: filepath.Join(probe, "paraphrases.jsonl")},
		{name: "mcp-bench", catalog: filepath.Join(dev, "mcp_bench.json")},
		{name: "msc-bench", catalog: filepath.Join(dev, "msc_bench.json")},
	}
	for _, fam := range toolretFamilies {
		out = append(out, source{name: "toolret-" + fam, catalog: filepath.Join(datasets, "toolret-train", "pairs.jsonl.gz"), toolret: fam})
	}
	return out
}

func load(s source) (*dataset, error) {
	if s.toolret != "" {
		return loadToolret(s)
	}
	data, err := os.ReadFile(s.catalog)
	if err != nil {
		return nil, err
	}
	var raw rawSet
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", s.catalog, err)
	}
	return parse(s, raw)
}

func parse(s source, raw rawSet) (*dataset, error) {
	if s.tasks != "" {
		f, err := os.ReadFile(s.tasks)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(f))
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var t rawTask
			if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
				return nil, fmt.Errorf("%s: %w", s.tasks, err)
			}
			raw.Queries = append(raw.Queries, t)
		}
	}
	// The catalog as the daemon would parse it: names kept verbatim,
	// ids made safe.
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema,omitempty"`
	}
	type server struct {
		ID          string `json:"id"`
		Description string `json:"description"`
		Tools       []tool `json:"tools"`
	}
	var c struct {
		Servers []server `json:"servers"`
	}
	for _, s := range raw.Servers {
		sv := server{ID: s.ID, Description: s.Description}
		for _, t := range s.Tools {
			sv.Tools = append(sv.Tools, tool(t))
		}
		c.Servers = append(c.Servers, sv)
	}
	cj, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Parse(cj, filepath.Dir(s.catalog))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	byName := map[string]string{}
	for _, sv := range cat.Servers {
		byName[sv.Name] = sv.ID
		byName[sv.ID] = sv.ID
	}
	d := &dataset{Name: s.name, Cat: cat}
	for _, q := range raw.Queries {
		steps := q.ServerSteps
		if len(steps) == 0 {
			for _, s := range q.Servers {
				steps = append(steps, []string{s})
			}
		}
		t := task{ID: q.ID, Text: q.Text}
		for _, st := range steps {
			var ids []string
			for _, s := range st {
				id, ok := byName[s]
				if !ok {
					return nil, fmt.Errorf("%s: task %s needs server %q the catalog lacks", s, q.ID, s)
				}
				ids = append(ids, id)
			}
			t.Steps = append(t.Steps, ids)
		}
		d.Tasks = append(d.Tasks, t)
	}
	if s.para != "" {
		var err error
		if d.Para, err = loadParaphrases(s.para, d.Tasks); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// loadParaphrases reads a paraphrases file: one {"id", "text"} line per
// task it paraphrases, each id a task's.
func loadParaphrases(path string, tasks []task) (map[string]string, error) {
	f, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, t := range tasks {
		known[t.ID] = true
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var p struct{ ID, Text string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if !known[p.ID] || p.Text == "" {
			return nil, fmt.Errorf("%s: %q is no task of the set, or has no text", path, p.ID)
		}
		out[p.ID] = p.Text
	}
	return out, sc.Err()
}
