package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The MCP routing dev sets (mcp-routing-dev/) and the tool-retrieval
// training pairs (toolret-train/) are converted into one catalog and one
// query file per catalog, in the format route-eval reads: every query
// names its needs as steps, each step satisfied by any one of its servers.

// routingQuery is a query of a routing catalog: query plus its needs.
type routingQuery struct {
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
	// Servers is every server that satisfies some step.
	Servers []string `json:"servers"`
	// ServerSteps are the needs: each is satisfied by any one of its
	// servers. Empty for an out-of-scope query.
	ServerSteps [][]string `json:"server_steps"`
	Kind        string     `json:"kind"`
}

func writeRouting(dir, name string, cat catalogOut, qs []routingQuery, stdout io.Writer) error {
	if err := writeJSON(filepath.Join(dir, name+".catalog.json"), cat); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name+".queries.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, q := range qs {
		if q.Servers == nil {
			q.Servers = []string{}
		}
		if q.ServerSteps == nil {
			q.ServerSteps = [][]string{}
		}
		if err := enc.Encode(q); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	tools := 0
	for _, s := range cat.Servers {
		tools += len(s.Tools)
	}
	fmt.Fprintf(stdout, "%s: %d servers, %d tools, %d queries\n", name, len(cat.Servers), tools, len(qs))
	return f.Close()
}

// msc converts MSC-Bench: every level, server_steps as the needs
// (level 5 is out of scope: no steps).
func msc(o options, stdout io.Writer) error {
	var ds struct {
		Servers []struct {
			ID          string `json:"id"`
			Description string `json:"description"`
			Summary     string `json:"summary"`
			Tools       []tool `json:"tools"`
		} `json:"servers"`
		Queries []struct {
			ID          string     `json:"id"`
			Level       int        `json:"level"`
			Text        string     `json:"text"`
			Servers     []string   `json:"servers"`
			ServerSteps [][]string `json:"server_steps"`
		} `json:"queries"`
	}
	if err := readJSON(o.in, &ds); err != nil {
		return err
	}
	var cat catalogOut
	for _, s := range ds.Servers {
		d := s.Description
		if strings.TrimSpace(d) == "" {
			d = s.Summary // 5 servers have no registry description
		}
		cat.Servers = append(cat.Servers, server{ID: s.ID, Description: d, Tools: s.Tools})
	}
	var qs []routingQuery
	for _, q := range ds.Queries {
		steps := q.ServerSteps
		if q.Level == 5 {
			steps = nil
		}
		qs = append(qs, routingQuery{ID: q.ID, Text: q.Text, Servers: q.Servers, ServerSteps: dedupSteps(steps), Kind: fmt.Sprintf("level-%d", q.Level)})
	}
	return writeRouting(o.out, "msc", cat, qs, stdout)
}

// dedupSteps drops a step equal to an earlier one (MSC-Bench lists a
// server once per tool call; two calls to one server are one need).
func dedupSteps(steps [][]string) [][]string {
	var out [][]string
	for _, s := range steps {
		s = slices.Clone(s)
		sort.Strings(s)
		if !slices.ContainsFunc(out, func(o []string) bool { return slices.Equal(o, s) }) {
			out = append(out, s)
		}
	}
	return out
}

// mcpbench converts MCP-Bench: each gold server is a need of its own.
func mcpbench(o options, stdout io.Writer) error {
	var ds struct {
		Servers []server `json:"servers"`
		Queries []struct {
			ID      string   `json:"id"`
			Kind    string   `json:"kind"`
			Text    string   `json:"text"`
			Servers []string `json:"servers"`
		} `json:"queries"`
	}
	if err := readJSON(o.in, &ds); err != nil {
		return err
	}
	var qs []routingQuery
	for _, q := range ds.Queries {
		var steps [][]string
		for _, s := range q.Servers {
			steps = append(steps, []string{s})
		}
		qs = append(qs, routingQuery{ID: q.ID, Text: q.Text, Servers: q.Servers, ServerSteps: steps, Kind: q.Kind})
	}
	return writeRouting(o.out, "mcpbench", catalogOut{Servers: ds.Servers}, qs, stdout)
}

// toolretSources are the sources of toolret-train, each a catalog of its
// own (its tools, positive and negative) with its queries.
var toolretSources = []string{"seal-tools", "bfcl", "apibench", "api-bank", "toolalpaca"}

// toolret converts toolret-train/pairs.jsonl.gz into one catalog per
// source: every tool text (positive or negative) is a tool; a tool is its
// own server, except ToolAlpaca's "API.function" tools, whose API is the
// server. A query's needs are its positive tools' servers. At most
// o.test queries per source are kept (an even sample, in file order).
func toolret(o options, stdout io.Writer) error {
	f, err := os.Open(o.in)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	type pair struct {
		Query  string   `json:"query"`
		Pos    string   `json:"pos"`
		Neg    []string `json:"neg"`
		Source string   `json:"source"`
	}
	bySource := map[string][]pair{}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var p pair
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return err
		}
		src, _, _ := strings.Cut(p.Source, "/")
		bySource[src] = append(bySource[src], p)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, src := range toolretSources {
		ps := bySource[src]
		if len(ps) == 0 {
			return fmt.Errorf("toolret: no pairs from %s", src)
		}
		// Each distinct tool text gets a server and a tool name.
		type ref struct{ server, tool string }
		refs := map[string]ref{}
		servers := map[string]*server{}
		var order []string
		usedName := map[string]int{}
		add := func(text string) ref {
			if r, ok := refs[text]; ok {
				return r
			}
			name, desc := splitToolText(text)
			if name == "" {
				name = "tool"
			}
			srv, tl := name, name
			if src == "toolalpaca" {
				if a, b, ok := strings.Cut(name, "."); ok {
					srv, tl = a, b
				}
			}
			if src != "toolalpaca" {
				// One tool per server: a name seen with another text is
				// another server.
				usedName[srv]++
				if n := usedName[srv]; n > 1 {
					srv = fmt.Sprintf("%s (%d)", srv, n)
					tl = srv
				}
			}
			s := servers[srv]
			if s == nil {
				s = &server{ID: srv}
				servers[srv] = s
				order = append(order, srv)
			}
			for slices.ContainsFunc(s.Tools, func(t tool) bool { return t.Name == tl }) {
				tl += "_"
			}
			s.Tools = append(s.Tools, tool{Name: tl, Description: desc})
			r := ref{srv, tl}
			refs[text] = r
			return r
		}
		gold := map[string][]string{}
		var queries []string
		for _, p := range ps {
			r := add(p.Pos)
			for _, n := range p.Neg {
				add(n)
			}
			if _, ok := gold[p.Query]; !ok {
				queries = append(queries, p.Query)
			}
			if !slices.Contains(gold[p.Query], r.server) {
				gold[p.Query] = append(gold[p.Query], r.server)
			}
		}
		var cat catalogOut
		for _, id := range order {
			cat.Servers = append(cat.Servers, *servers[id])
		}
		if o.test > 0 && len(queries) > o.test {
			var keep []string
			for i := 0; i < o.test; i++ {
				keep = append(keep, queries[i*len(queries)/o.test])
			}
			queries = keep
		}
		var qs []routingQuery
		for _, q := range queries {
			var steps [][]string
			for _, s := range gold[q] {
				steps = append(steps, []string{s})
			}
			qs = append(qs, routingQuery{Text: q, Servers: gold[q], ServerSteps: steps, Kind: fmt.Sprintf("needs-%d", len(steps))})
		}
		if err := writeRouting(o.out, "toolret-"+src, cat, qs, stdout); err != nil {
			return err
		}
	}
	return nil
}

// splitToolText splits "<name>: <description> Parameters: a, b." into the
// name and the description without the parameter list.
func splitToolText(text string) (name, desc string) {
	name, desc, ok := strings.Cut(text, ": ")
	if !ok {
		return strings.TrimSpace(text), ""
	}
	if i := strings.LastIndex(desc, " Parameters: "); i >= 0 {
		desc = desc[:i]
	}
	return strings.TrimSpace(name), strings.TrimSpace(desc)
}
