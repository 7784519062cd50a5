package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	cases := map[string]string{
		"categories only": `{"categories":[{"id":"a","description":"d"}]}`,
		"servers only":    `{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x"}]}]}`,
		"unknown fields":  `{"x":1,"categories":[{"id":"a","description":"d","color":"red"}]}`,
		"examples only":   `{"categories":[{"id":"a","description":"","examples":["e"]}]}`,
		"mcp camelCase":   `{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x","inputSchema":{"type":"object"}}]}]}`,
		"id with ?":       `{"categories":[{"id":"reverted_card_payment?","description":"d"}]}`,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(data), "")
			if err != nil {
				t.Fatal(err)
			}
			if name == "mcp camelCase" && string(c.Servers[0].Tools[0].InputSchema) != `{"type":"object"}` {
				t.Fatalf("schema %s", c.Servers[0].Tools[0].InputSchema)
			}
		})
	}
}

func TestParseErrorsNameTheEntry(t *testing.T) {
	cases := []struct{ name, data, want string }{
		{"empty", `{}`, "no categories and no servers"},
		{"not json", `{"categories":`, "invalid"},
		{"trailing", `{"categories":[{"id":"a","description":"d"}]} {}`, "trailing"},
		{"duplicate category", `{"categories":[{"id":"a","description":"d"},{"id":"a","description":"e"}]}`, `categories[1] "a": duplicate category id`},
		{"duplicate server", `{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x"}]},{"id":"s","description":"d","tools":[{"name":"t","description":"x"}]}]}`, `servers[1] "s": duplicate server id`},
		{"duplicate tool", `{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x"},{"name":"t","description":"y"}]}]}`, `servers[0] "s" tools[1] "t": duplicate tool`},
		{"tool without name", `{"servers":[{"id":"s","description":"d","tools":[{"description":"x"}]}]}`, `servers[0] "s" tools[0] "": tool without a name`},
		{"empty category", `{"categories":[{"id":"a","description":" "}]}`, `categories[0] "a": empty description and no examples`},
		{"blank tool name", `{"servers":[{"id":"s","description":"d","tools":[{"name":" ","description":"x"}]}]}`, `tools[0] " ": tool without a name`},
		{"huge tool name", `{"servers":[{"id":"s","description":"d","tools":[{"name":"` + strings.Repeat("x", MaxNameBytes+1) + `","description":"x"}]}]}`, `name over 1024 bytes`},
		{"unknown server category", `{"categories":[{"id":"a","description":"d"}],"servers":[{"id":"s","description":"d","categories":["zz"],"tools":[{"name":"t","description":"x"}]}]}`, `servers[0] "s": unknown category "zz"`},
		{"unknown tool category", `{"categories":[{"id":"a","description":"d"}],"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x","category":"zz"}]}]}`, `tools[0] "t": unknown category "zz"`},
		{"bad pattern", `{"categories":[{"id":"a","description":"d","patterns":["(unclosed"]}]}`, `categories[0] "a": patterns[0]`},
		{"bad schema", `{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x","input_schema":"{"}]}]}`, `tools[0] "t"`},
		{"bad id", `{"categories":[{"id":"a b","description":"d"}]}`, `categories[0] "a b"`},
		{"server without tools", `{"servers":[{"id":"s","description":"d"}]}`, `servers[0] "s": no tools`},
		{"tools_file forbidden", `{"servers":[{"id":"s","description":"d","tools_file":"x.json"}]}`, `servers[0] "s": tools_file is not allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "")
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%q does not name %q", err, tc.want)
			}
		})
	}
}

func TestToolsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("plain.json", `{"tools":[{"name":"echo","description":"Echo input","inputSchema":{"type":"object"}}]}`)
	write("rpc.json", `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"add","description":"Add numbers"}]}}`)
	write("empty.json", `{"tools":[]}`)
	write("cat.json", `{"servers":[{"id":"a","description":"d","tools_file":"plain.json"},{"id":"b","description":"d","tools_file":"rpc.json"}]}`)
	c, err := Load(filepath.Join(dir, "cat.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Servers[0].Tools[0].Name != "echo" || string(c.Servers[0].Tools[0].InputSchema) != `{"type":"object"}` || c.Servers[1].Tools[0].Name != "add" {
		t.Fatalf("got %+v", c.Servers)
	}
	for name, ref := range map[string]string{"missing": "nope.json", "empty": "empty.json", "not json": "cat2.json"} {
		t.Run(name, func(t *testing.T) {
			write("cat2.json", `{"servers":[{"id":"s","description":"d","tools_file":"`+ref+`"}]}`)
			_, err := Load(filepath.Join(dir, "cat2.json"))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `servers[0] "s": tools_file `+ref) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestToolCategory(t *testing.T) {
	cases := []struct {
		server Server
		tool   Tool
		want   string
	}{
		{Server{Categories: []string{"a", "b"}}, Tool{Name: "x", Category: "b"}, "b"},
		{Server{Categories: []string{"a"}}, Tool{Name: "x"}, "a"},
		{Server{Categories: []string{"a", "b"}}, Tool{Name: "github__search"}, "github"},
		{Server{}, Tool{Name: "search"}, Uncategorized},
		{Server{}, Tool{Name: "__x"}, Uncategorized},
	}
	for _, tc := range cases {
		if got := ToolCategory(&tc.server, &tc.tool); got != tc.want {
			t.Errorf("ToolCategory(%v, %q) = %q, want %q", tc.server.Categories, tc.tool.Name, got, tc.want)
		}
	}
}

func TestSHA256(t *testing.T) {
	a, _ := Parse([]byte(`{"categories":[{"id":"a","description":"d"}]}`), "")
	b, _ := Parse([]byte(`{"categories":[ {"id":"a", "description":"d"} ]}`), "")
	c, _ := Parse([]byte(`{"categories":[{"id":"a","description":"e"}]}`), "")
	if a.SHA256() != b.SHA256() || a.SHA256() == c.SHA256() {
		t.Fatal("catalog hash must ignore formatting and follow content")
	}
}

// TestDefaultCatalog checks the out-of-the-box catalog the daemon ships with.
func TestDefaultCatalog(t *testing.T) {
	c, err := Load("../data/catalogs/default.json")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields("github filesystem web docker git python database memory vertex_ai meta jira notes agile communication search documents users")
	if len(c.Categories) != len(want) {
		t.Fatalf("%d categories, want %d", len(c.Categories), len(want))
	}
	for i, cat := range c.Categories {
		if cat.ID != want[i] {
			t.Fatalf("category %d is %q, want %q", i, cat.ID, want[i])
		}
		if n := len(cat.Examples); n < 8 || n > 15 {
			t.Fatalf("%s has %d examples, want 8-15", cat.ID, n)
		}
	}
	tools := 0
	served := map[string]bool{}
	for _, s := range c.Servers {
		tools += len(s.Tools)
		for _, tl := range s.Tools {
			served[ToolCategory(&s, &tl)] = true
			if len(tl.InputSchema) == 0 {
				t.Fatalf("%s/%s has no input schema", s.ID, tl.Name)
			}
		}
	}
	if len(c.Servers) < 10 || tools < 80 {
		t.Fatalf("%d servers, %d tools; want at least 10 and 80", len(c.Servers), tools)
	}
	for _, id := range want {
		if !served[id] {
			t.Fatalf("no tool serves category %s", id)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"categories":[{"id":"a","description":"d","patterns":["x+"]}]}`,
		`{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x","input_schema":{}}]}]}`} {
		f.Add([]byte(s))
	}
	for _, tc := range nameCases {
		f.Add([]byte(`{"servers":[{"id":` + quote(tc.server) + `,"tools":[{"name":` + quote(tc.tool) + `,"description":"x"},{"name":"t2","description":"y"}]}]}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "")
		if err != nil {
			return
		}
		if c.Validate() != nil {
			t.Fatal("Parse accepted a catalog that does not validate")
		}
		servers := map[string]bool{}
		for _, s := range c.Servers {
			if !SafeID(s.ID) || servers[s.ID] {
				t.Fatalf("server id %q (name %q) is unsafe or repeated", s.ID, s.Name)
			}
			servers[s.ID] = true
			tools := map[string]bool{}
			for _, tl := range s.Tools {
				if !SafeID(tl.ID) || tools[tl.ID] {
					t.Fatalf("tool id %q (name %q) is unsafe or repeated", tl.ID, tl.Name)
				}
				tools[tl.ID] = true
			}
		}
	})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// nameCases are names MCP servers really use; each is accepted, kept
// verbatim and given the id shown.
var nameCases = []struct{ server, tool, serverID, toolID string }{
	{"github", "list_issues", "github", "list_issues"},
	{"MCP Yahoo Finance", "Songkick concert", "mcp_yahoo_finance", "songkick_concert"},
	{"acme.tools", "files.read", "acme.tools", "files.read"},
	{"org/repo", "a/b", "org_repo", "a_b"},
	{"Café ☕", "réserver une table", "caf", "r_server_une_table"},
	{"日本語", "検索 する", "日本語", "id_" + nameHash("検索 する")},
	{"  padded  ", "tab\tname", "padded", "tab_name"},
}

func TestNamesVerbatimWithSafeIDs(t *testing.T) {
	for _, tc := range nameCases {
		t.Run(tc.server+"/"+tc.tool, func(t *testing.T) {
			c, err := Parse([]byte(`{"servers":[{"id":`+quote(tc.server)+`,"description":"d","tools":[{"name":`+quote(tc.tool)+`,"description":"x"}]}]}`), "")
			if err != nil {
				t.Fatal(err)
			}
			s, tl := c.Servers[0], c.Servers[0].Tools[0]
			if s.Name != tc.server || tl.Name != tc.tool {
				t.Errorf("names %q, %q, want verbatim %q, %q", s.Name, tl.Name, tc.server, tc.tool)
			}
			if s.ID != tc.serverID || tl.ID != tc.toolID {
				t.Errorf("ids %q, %q, want %q, %q", s.ID, tl.ID, tc.serverID, tc.toolID)
			}
			if !SafeID(s.ID) || !SafeID(tl.ID) {
				t.Errorf("ids %q, %q are not safe", s.ID, tl.ID)
			}
			renamed := s.ID != s.Name || tl.ID != tl.Name
			if got := len(c.Warnings()) > 0; got != renamed {
				t.Errorf("warnings %q, want some: %v", c.Warnings(), renamed)
			}
			if err := c.AssignIDs(); err != nil || c.Servers[0].ID != tc.serverID || c.Servers[0].Tools[0].ID != tc.toolID {
				t.Errorf("AssignIDs again: %v, ids %q, %q", err, c.Servers[0].ID, c.Servers[0].Tools[0].ID)
			}
		})
	}
}

func TestIDCollisions(t *testing.T) {
	cases := []struct {
		name  string
		names []string
		want  []string
	}{
		{"safe name keeps its id", []string{"songkick_concert", "Songkick concert"},
			[]string{"songkick_concert", "songkick_concert_" + nameHash("Songkick concert")}},
		{"order does not matter", []string{"Songkick concert", "songkick_concert"},
			[]string{"songkick_concert_" + nameHash("Songkick concert"), "songkick_concert"}},
		{"every derived id in a clash is hashed", []string{"A B", "a  b"},
			[]string{"a_b_" + nameHash("A B"), "a_b_" + nameHash("a  b")}},
		{"no clash, no hash", []string{"A B", "C D"}, []string{"a_b", "c_d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := assignIDs(tc.names)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	// A safe name that is literally another's hashed id cannot be told apart.
	clash := "a_b_" + nameHash("A B")
	_, err := assignIDs([]string{"A B", "a b!", clash})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"A B"`) || !strings.Contains(err.Error(), quote(clash)) {
		t.Fatalf("got %v, want an error naming both", err)
	}
}

func TestWarnings(t *testing.T) {
	c, err := Parse([]byte(`{"servers":[{"id":"s","tools":[
		{"name":"a","description":"Same words"},
		{"name":"b","description":"Same words"},
		{"name":"c"},
		{"name":"`+strings.Repeat("x", 200)+`","description":"long"}]}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{`server "s": empty description`, `tool "b" on server "s": same description as tool "a"`,
		`tool "c" on server "s": empty description and no examples`, `name is 200 bytes`} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings\n%s\ndo not say %q", got, want)
		}
	}
}

func TestToolsFileConfinedToCatalogFolder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "cat")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := `{"tools": [{"name": "t1", "description": "a tool"}]}`
	for _, p := range []string{filepath.Join(root, "outside.json"), filepath.Join(dir, "sub", "inside.json")} {
		if err := os.WriteFile(p, []byte(tools), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "outside.json"), filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.json")); err != nil {
		t.Fatal(err)
	}
	catalogWith := func(toolsFile string) []byte {
		return []byte(`{"categories": [{"id": "c", "description": "things"}],
 "servers": [{"id": "s", "description": "a server", "categories": ["c"], "tools_file": "` + toolsFile + `"}]}`)
	}
	if _, err := Parse(catalogWith("sub/inside.json"), dir); err != nil {
		t.Fatalf("tools_file inside the folder: %v", err)
	}
	for _, bad := range []string{"../outside.json", filepath.Join(root, "outside.json"), "link.json", "zero.json"} {
		if _, err := Parse(catalogWith(bad), dir); !errors.Is(err, ErrInvalid) {
			t.Errorf("tools_file %s: err = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestLoadRefusesDevices(t *testing.T) {
	done := make(chan error, 1)
	go func() { _, err := Load("/dev/zero"); done <- err }()
	if err := <-done; !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Load(/dev/zero) = %v, want ErrInvalid: not a regular file", err)
	}
}
