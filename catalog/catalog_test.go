package catalog

import (
	"errors"
	"os"
	"path/filepath"
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
		{"empty tool", `{"servers":[{"id":"s","description":"d","tools":[{"name":"t"}]}]}`, `tools[0] "t": empty description and no examples`},
		{"unknown server category", `{"categories":[{"id":"a","description":"d"}],"servers":[{"id":"s","description":"d","categories":["zz"],"tools":[{"name":"t","description":"x"}]}]}`, `servers[0] "s": unknown category "zz"`},
		{"unknown tool category", `{"categories":[{"id":"a","description":"d"}],"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x","category":"zz"}]}]}`, `tools[0] "t": unknown category "zz"`},
		{"bad pattern", `{"categories":[{"id":"a","description":"d","patterns":["(unclosed"]}]}`, `categories[0] "a": patterns[0]`},
		{"bad schema", `{"servers":[{"id":"s","description":"d","tools":[{"name":"t","description":"x","input_schema":"{"}]}]}`, `tools[0] "t"`},
		{"bad id", `{"categories":[{"id":"a b","description":"d"}]}`, `categories[0] "a b"`},
		{"slash in server", `{"servers":[{"id":"a/b","description":"d","tools":[{"name":"t","description":"x"}]}]}`, `servers[0] "a/b"`},
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
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "")
		if err == nil && c.Validate() != nil {
			t.Fatal("Parse accepted a catalog that does not validate")
		}
	})
}
