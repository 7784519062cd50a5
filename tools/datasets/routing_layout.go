package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// routingSet is the layout of ../shared/datasets/mcp-routing-dev (MSC-Bench,
// MCP-Bench): servers with tools, and queries with their gold servers and,
// for MSC-Bench, the steps each needing one of its servers.
type routingSet struct {
	Name    string `json:"name"`
	Servers []struct {
		ID          string `json:"id"`
		Description string `json:"description"`
		Tools       []tool `json:"tools"`
	} `json:"servers"`
	Queries []struct {
		Text        string     `json:"text"`
		Servers     []string   `json:"servers"`
		ServerSteps [][]string `json:"server_steps"`
		Kind        string     `json:"kind"`
	} `json:"queries"`
}

// routing converts a routing dev set: a catalog of its servers (each under
// a safe id, its verbatim name kept as the display name) and every query
// with its gold servers and steps. A query with no gold server is out of
// scope. Steps are kept as the dataset gives them; a query without steps
// (MCP-Bench) needs every one of its servers.
func routing(o options, stdout io.Writer) error {
	var ds routingSet
	if err := readJSON(o.in, &ds); err != nil {
		return err
	}
	name := o.name
	if name == "" {
		name = ds.Name
	}
	if name == "" {
		return fmt.Errorf("%s: the dataset has no name; pass -name", o.in)
	}
	type namedServer struct {
		server
		Name string `json:"name,omitempty"`
	}
	var cat struct {
		Servers []namedServer `json:"servers"`
	}
	ids := map[string]string{}
	taken := map[string]bool{}
	for _, s := range ds.Servers {
		if _, dup := ids[s.ID]; dup {
			return fmt.Errorf("%s: server %q is listed twice", o.in, s.ID)
		}
		id := safeID(s.ID)
		for n := 2; taken[id]; n++ {
			id = fmt.Sprintf("%s_%d", safeID(s.ID), n)
		}
		taken[id], ids[s.ID] = true, id
		tools := make([]tool, 0, len(s.Tools))
		seen := map[string]bool{}
		for _, t := range s.Tools {
			if t.Name == "" || seen[t.Name] {
				continue // the catalog refuses unnamed and duplicate tools
			}
			seen[t.Name] = true
			tools = append(tools, tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
		ns := namedServer{server: server{ID: id, Description: s.Description, Tools: tools}}
		if id != s.ID {
			ns.Name = s.ID
		}
		cat.Servers = append(cat.Servers, ns)
	}
	mapIDs := func(names []string) ([]string, error) {
		out := make([]string, 0, len(names))
		for _, n := range names {
			id, ok := ids[n]
			if !ok {
				return nil, fmt.Errorf("%s: a query names server %q, which is not in the catalog", o.in, n)
			}
			out = append(out, id)
		}
		return out, nil
	}
	var qs []query
	oos, steps := 0, 0
	for _, q := range ds.Queries {
		srv, err := mapIDs(q.Servers)
		if err != nil {
			return err
		}
		out := query{Text: q.Text, Servers: srv, Kind: "single"}
		if len(srv) == 0 {
			out.Kind = "oos"
			oos++
		} else if len(srv) > 1 {
			out.Kind = "multi-server"
		}
		for _, st := range q.ServerSteps {
			m, err := mapIDs(st)
			if err != nil {
				return err
			}
			out.ServerSteps = append(out.ServerSteps, m)
		}
		if len(out.ServerSteps) > 0 {
			steps++
		}
		qs = append(qs, out)
	}
	if err := writeJSON(filepath.Join(o.out, name+".catalog.json"), cat); err != nil {
		return err
	}
	if err := writeQueries(filepath.Join(o.out, name+".test.jsonl"), qs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d servers, %d queries (%d out of scope, %d with steps)\n", name, len(cat.Servers), len(qs), oos, steps)
	return nil
}

// safeID is a catalog id for a server name: lower-cased, each run of
// characters outside [a-z0-9_-] replaced by "_", at most 64 bytes.
func safeID(name string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	id := strings.Trim(b.String(), "_")
	if len(id) > 64 {
		id = id[:64]
	}
	if id == "" {
		id = "server"
	}
	return id
}
