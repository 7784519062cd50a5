package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRouting(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "set.json")
	src := `{"name": "tiny", "servers": [
	  {"id": "Tripo MCP Server", "description": "3D", "tools": [{"name": "gen", "description": "make"}, {"name": "gen", "description": "dup"}]},
	  {"id": "tripo-mcp-server?", "description": "clash", "tools": [{"name": "x", "description": "y"}]},
	  {"id": "semgrep", "description": "scan", "tools": [{"name": "scan", "description": "scan code"}]}],
	 "queries": [
	  {"text": "make a model", "servers": ["Tripo MCP Server"], "server_steps": [["Tripo MCP Server"]]},
	  {"text": "scan then model", "servers": ["semgrep", "Tripo MCP Server", "tripo-mcp-server?"],
	   "server_steps": [["semgrep"], ["Tripo MCP Server", "tripo-mcp-server?"]]},
	  {"text": "order a pizza", "servers": []}]}`
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", in, "-format", "routing", "-out", dir}, io.Discard); err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Servers []struct {
			ID, Name string
			Tools    []tool
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "tiny.catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cat); err != nil {
		t.Fatal(err)
	}
	var ids, names []string
	for _, s := range cat.Servers {
		ids, names = append(ids, s.ID), append(names, s.Name)
	}
	if want := []string{"tripo_mcp_server", "tripo-mcp-server", "semgrep"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if want := []string{"Tripo MCP Server", "tripo-mcp-server?", ""}; !reflect.DeepEqual(names, want) {
		t.Errorf("display names %v, want %v", names, want)
	}
	if len(cat.Servers[0].Tools) != 1 {
		t.Errorf("duplicate tool kept: %v", cat.Servers[0].Tools)
	}
	f, err := os.Open(filepath.Join(dir, "tiny.test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var qs []query
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var q query
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	want := []query{
		{Text: "make a model", Categories: []string{}, Servers: []string{"tripo_mcp_server"}, Tools: []string{}, Kind: "single",
			ServerSteps: [][]string{{"tripo_mcp_server"}}},
		{Text: "scan then model", Categories: []string{}, Servers: []string{"semgrep", "tripo_mcp_server", "tripo-mcp-server"}, Tools: []string{},
			Kind: "multi-server", ServerSteps: [][]string{{"semgrep"}, {"tripo_mcp_server", "tripo-mcp-server"}}},
		{Text: "order a pizza", Categories: []string{}, Servers: []string{}, Tools: []string{}, Kind: "oos"},
	}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("queries\n got %+v\nwant %+v", qs, want)
	}
}

func TestRoutingUnknownServer(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "set.json")
	if err := os.WriteFile(in, []byte(`{"name":"x","servers":[{"id":"a","tools":[{"name":"t"}]}],"queries":[{"text":"q","servers":["b"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", in, "-format", "routing", "-out", dir}, io.Discard); err == nil {
		t.Fatal("a query naming an unknown server converted without error")
	}
}
