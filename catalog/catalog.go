// Package catalog parses and validates tool catalogs: the categories, MCP
// servers and tools that gen-index embeds into an index.
//
// The format is JSON (documented in data/catalogs/README.md). Both sections are
// optional: a categories-only catalog serves Classify, servers and tools
// serve Route. Unknown fields are ignored so catalogs can carry extra data.
package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid reports a catalog that cannot be indexed; the message names the
// offending entry.
var ErrInvalid = errors.New("catalog: invalid")

// Limits on catalog contents, generous for real MCP deployments yet bounded
// so a malformed file cannot exhaust memory at index time.
const (
	MaxLabels      = 200_000 // 100,000 tools and their servers fit (docs/scale.md)
	MaxExamples    = 2000    // per label
	MaxTextBytes   = 8192    // per description or example
	MaxSchemaBytes = 65536
	MaxFileBytes   = 256 << 20
)

// Uncategorized is the category of a tool with no catalog category and no
// namespaced name.
const Uncategorized = "uncategorized"

// Catalog is a parsed catalog.
type Catalog struct {
	Categories []Category `json:"categories,omitempty"`
	Servers    []Server   `json:"servers,omitempty"`
}

// Category is a class of user need (github, filesystem, jira, ...).
type Category struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Examples    []string `json:"examples,omitempty"`
	// Keywords are lower-case words or phrases that are evidence for the category.
	Keywords []string `json:"keywords,omitempty"`
	// Patterns are RE2 regular expressions that are evidence for the category
	// (e.g. `\b[A-Z][A-Z0-9]+-\d+\b` for Jira keys).
	Patterns []string `json:"patterns,omitempty"`
}

// Server is an MCP server and its tools.
type Server struct {
	// ID is the server's stable, safe id: the catalog's "id" when it is one
	// (see SafeID), else derived from it by Parse (see AssignIDs).
	ID string `json:"id"`
	// Name is the server's name as the catalog gives it, shown verbatim; Parse
	// sets it from "id" when the catalog has no "name".
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description"`
	Categories  []string `json:"categories,omitempty"`
	Keywords    []string `json:"keywords,omitempty"`
	Tools       []Tool   `json:"tools,omitempty"`
	// ToolsFile names the raw result of an MCP tools/list call, relative to
	// the catalog file; its tools are appended to Tools.
	ToolsFile string `json:"tools_file,omitempty"`
}

// Tool is one MCP tool.
type Tool struct {
	// Name is the tool's MCP name, verbatim: shown to users and returned in
	// tool definitions.
	Name string `json:"name"`
	// ID is the tool's stable, safe id within its server: Name when it is safe
	// (see SafeID), else derived from it by Parse (see AssignIDs).
	ID          string `json:"id,omitempty"`
	Description string `json:"description"`
	// Category is the tool's category; when empty it is derived (see ToolCategory).
	Category    string          `json:"category,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Examples    []string        `json:"examples,omitempty"`
	Keywords    []string        `json:"keywords,omitempty"`
}

// toolJSON accepts MCP's camelCase inputSchema as well as input_schema.
type toolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Category    string          `json:"category"`
	InputSchema json.RawMessage `json:"input_schema"`
	MCPSchema   json.RawMessage `json:"inputSchema"`
	Examples    []string        `json:"examples"`
	Keywords    []string        `json:"keywords"`
}

// UnmarshalJSON accepts both input_schema and MCP's inputSchema.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var j toolJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = Tool{Name: j.Name, Description: j.Description, Category: j.Category,
		InputSchema: j.InputSchema, Examples: j.Examples, Keywords: j.Keywords}
	if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
		t.InputSchema = j.MCPSchema
	}
	return nil
}

// Load reads, parses and validates the catalog at path; tools_file paths
// resolve relative to its directory.
func Load(path string) (*Catalog, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return Parse(data, filepath.Dir(path))
}

// readLimited reads a regular file of at most MaxFileBytes: the opened
// file is checked (not the path, which could change meanwhile), and no
// more than the limit is read even if it grows, so /dev/zero or a FIFO is
// refused instead of read until memory runs out.
func readLimited(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, limit %d", path, st.Size(), MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s grew past %d bytes while read", path, MaxFileBytes)
	}
	return data, nil
}

// toolsFilePath resolves a tools_file entry inside baseDir: it must be a
// relative path that stays in the catalog's folder, also after symlinks
// are resolved, so a catalog cannot make gen-index read files elsewhere.
func toolsFilePath(baseDir, name string) (string, error) {
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("must be a relative path inside the catalog's folder")
	}
	p := filepath.Join(baseDir, name)
	root, err := filepath.EvalSymlinks(baseDir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("leads outside the catalog's folder")
	}
	return real, nil
}

// Parse parses and validates catalog JSON. baseDir resolves tools_file
// entries; pass "" to forbid them.
func Parse(data []byte, baseDir string) (*Catalog, error) {
	var c Catalog
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the catalog object", ErrInvalid)
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.ToolsFile == "" {
			continue
		}
		if baseDir == "" {
			return nil, fmt.Errorf("%w: servers[%d] %q: tools_file is not allowed here", ErrInvalid, i, s.ID)
		}
		p, err := toolsFilePath(baseDir, s.ToolsFile)
		if err != nil {
			return nil, fmt.Errorf("%w: servers[%d] %q: tools_file %s: %v", ErrInvalid, i, s.ID, s.ToolsFile, err)
		}
		tools, err := readToolsList(p)
		if err != nil {
			return nil, fmt.Errorf("%w: servers[%d] %q: tools_file %s: %v", ErrInvalid, i, s.ID, s.ToolsFile, err)
		}
		s.Tools = append(s.Tools, tools...)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.AssignIDs(); err != nil {
		return nil, err
	}
	return &c, nil
}

// readToolsList reads the raw result of an MCP tools/list call.
func readToolsList(path string) ([]Tool, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	var res struct {
		Tools []Tool `json:"tools"`
		// Some clients save the whole JSON-RPC response.
		Result *struct {
			Tools []Tool `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, err
	}
	if res.Result != nil {
		res.Tools = append(res.Tools, res.Result.Tools...)
	}
	if len(res.Tools) == 0 {
		return nil, errors.New(`no "tools" array`)
	}
	return res.Tools, nil
}

// Validate checks the rules in data/catalogs/README.md and names the first
// offending entry.
func (c *Catalog) Validate() error {
	if len(c.Categories) == 0 && len(c.Servers) == 0 {
		return fmt.Errorf("%w: no categories and no servers", ErrInvalid)
	}
	cats := map[string]bool{}
	labels := 0
	for i, cat := range c.Categories {
		where := fmt.Sprintf("categories[%d] %q", i, cat.ID)
		if err := checkID(cat.ID); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		if cats[cat.ID] {
			return fmt.Errorf("%w: %s: duplicate category id", ErrInvalid, where)
		}
		cats[cat.ID] = true
		if err := checkTexts(cat.Description, cat.Examples); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		for j, p := range cat.Patterns {
			if _, err := regexp.Compile(p); err != nil {
				return fmt.Errorf("%w: %s: patterns[%d]: %v", ErrInvalid, where, j, err)
			}
		}
		labels++
	}
	servers := map[string]bool{}
	for i, s := range c.Servers {
		where := fmt.Sprintf("servers[%d] %q", i, s.ID)
		if err := checkName(s.ID); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		if servers[s.ID] {
			return fmt.Errorf("%w: %s: duplicate server id", ErrInvalid, where)
		}
		servers[s.ID] = true
		for _, id := range s.Categories {
			if len(c.Categories) > 0 && !cats[id] {
				return fmt.Errorf("%w: %s: unknown category %q", ErrInvalid, where, id)
			}
		}
		if len(s.Tools) == 0 {
			return fmt.Errorf("%w: %s: no tools", ErrInvalid, where)
		}
		names := map[string]bool{}
		for j, t := range s.Tools {
			twhere := fmt.Sprintf("%s tools[%d] %q", where, j, t.Name)
			if strings.TrimSpace(t.Name) == "" {
				return fmt.Errorf("%w: %s: tool without a name", ErrInvalid, twhere)
			}
			if err := checkName(t.Name); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalid, twhere, err)
			}
			if names[t.Name] {
				return fmt.Errorf("%w: %s: duplicate tool name in server", ErrInvalid, twhere)
			}
			names[t.Name] = true
			// A tool is always embedded from its name, so an empty
			// description is a warning (Warnings), not an error.
			if err := checkTexts("-", t.Examples); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalid, twhere, err)
			}
			if len(t.Description) > MaxTextBytes {
				return fmt.Errorf("%w: %s: description over %d bytes", ErrInvalid, twhere, MaxTextBytes)
			}
			if t.Category != "" && len(c.Categories) > 0 && !cats[t.Category] {
				return fmt.Errorf("%w: %s: unknown category %q", ErrInvalid, twhere, t.Category)
			}
			if len(t.InputSchema) > MaxSchemaBytes {
				return fmt.Errorf("%w: %s: input_schema over %d bytes", ErrInvalid, twhere, MaxSchemaBytes)
			}
			if len(t.InputSchema) > 0 && string(t.InputSchema) != "null" {
				trimmed := bytes.TrimSpace(t.InputSchema)
				if !json.Valid(trimmed) || len(trimmed) == 0 || trimmed[0] != '{' {
					return fmt.Errorf("%w: %s: input_schema must be a JSON object", ErrInvalid, twhere)
				}
			}
			labels++
		}
		labels++
	}
	if labels > MaxLabels {
		return fmt.Errorf("%w: %d labels, limit %d", ErrInvalid, labels, MaxLabels)
	}
	return nil
}

// checkID accepts 1-128 bytes of printable UTF-8 without whitespace.
func checkID(id string) error {
	if id == "" || len(id) > 128 || !utf8.ValidString(id) {
		return fmt.Errorf("id must be 1-128 bytes of UTF-8")
	}
	for _, r := range id {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("id must not contain spaces or control characters")
		}
	}
	return nil
}

func checkTexts(desc string, examples []string) error {
	if strings.TrimSpace(desc) == "" && len(examples) == 0 {
		return errors.New("empty description and no examples")
	}
	if len(desc) > MaxTextBytes {
		return fmt.Errorf("description over %d bytes", MaxTextBytes)
	}
	if len(examples) > MaxExamples {
		return fmt.Errorf("%d examples, limit %d", len(examples), MaxExamples)
	}
	for k, ex := range examples {
		if strings.TrimSpace(ex) == "" {
			return fmt.Errorf("examples[%d] is empty", k)
		}
		if len(ex) > MaxTextBytes {
			return fmt.Errorf("examples[%d] over %d bytes", k, MaxTextBytes)
		}
	}
	return nil
}

// ToolCategory returns a tool's category: its own, else its server's when
// the server has exactly one, else the prefix of a namespaced name
// ("github__search" -> "github"), else Uncategorized.
func ToolCategory(s *Server, t *Tool) string {
	if t.Category != "" {
		return t.Category
	}
	if len(s.Categories) == 1 {
		return s.Categories[0]
	}
	return CategoryFromName(t.Name)
}

// CategoryFromName derives a category from a namespaced tool name
// ("github__search" -> "github"), else Uncategorized.
func CategoryFromName(name string) string {
	if i := strings.Index(name, "__"); i > 0 {
		return name[:i]
	}
	return Uncategorized
}

// SHA256 returns the hex sha256 of the catalog's canonical JSON, after
// tools_file expansion: it identifies what an index was built from.
func (c *Catalog) SHA256() string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
