package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// toolretFamilies are toolret-train's source families
// (../shared/datasets/toolret-train/README.md): training data, so the
// replay may be studied on them freely; each is a catalog of its own.
var toolretFamilies = []string{"seal-tools", "bfcl", "apibench", "api-bank", "toolalpaca"}

// loadToolret makes a set of one toolret-train source family: every tool
// its pairs name (positive or negative) is a one-tool server, and every
// query a task needing each of its positive tools.
func loadToolret(s source) (*dataset, error) {
	f, err := os.Open(s.catalog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.catalog, err)
	}
	type pair struct {
		Query  string   `json:"query"`
		Pos    string   `json:"pos"`
		Neg    []string `json:"neg"`
		Source string   `json:"source"`
	}
	var raw rawSet
	ids := map[string]string{} // tool text -> server id
	taken := map[string]int{}
	addTool := func(text string) string {
		if id, ok := ids[text]; ok {
			return id
		}
		name, desc, _ := strings.Cut(text, ": ")
		if i := strings.Index(desc, " Parameters: "); i >= 0 {
			desc = desc[:i]
		}
		id := name
		if taken[name]++; taken[name] > 1 {
			id = fmt.Sprintf("%s~%d", name, taken[name])
		}
		ids[text] = id
		raw.Servers = append(raw.Servers, rawServer{ID: id, Description: desc, Tools: []rawTool{{Name: name, Description: desc}}})
		return id
	}
	byQuery := map[string]int{}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var p pair
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("%s: %w", s.catalog, err)
		}
		if fam, _, _ := strings.Cut(p.Source, "/"); fam != s.toolret {
			continue
		}
		pos := addTool(p.Pos)
		for _, n := range p.Neg {
			addTool(n)
		}
		q := strings.Join(strings.Fields(p.Query), " ")
		i, ok := byQuery[q]
		if !ok {
			i = len(raw.Queries)
			byQuery[q] = i
			raw.Queries = append(raw.Queries, rawTask{ID: fmt.Sprintf("%s-%d", s.toolret, i), Text: q})
		}
		if !slices.Contains(raw.Queries[i].Servers, pos) {
			raw.Queries[i].Servers = append(raw.Queries[i].Servers, pos)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.catalog, err)
	}
	return parse(s, raw)
}
