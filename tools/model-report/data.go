package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode"
)

// Texts the Embed figures are measured on, the same for every model. long
// is 64 tokens for the MiniLM models' WordPiece tokenizer ([CLS] and [SEP]
// included) and 72 for use-lite-en's SentencePiece one.
const (
	shortText = "Check my GitHub notifications"
	longText  = "Please read the deployment configuration file in the infrastructure repository, find every service whose memory limit is below five hundred megabytes, open a pull request that raises each of them to one gigabyte, and post a short summary of the change to the platform channel so that they can review it before the release."
)

// dataset holds the converted catalogs and query sets of one run.
type dataset struct {
	Banking77Catalog, Banking77Test string
	MetaDescCatalog, MetaEx5Catalog string
	MetaTest                        string
	LargeCatalog                    string
	DefaultCatalog                  string
	ShortQueries, LongQueries       []string
	Banking77N, MetaN, MetaMulti    int
	// The multilingual check (hass-intents, with --hass-intents); empty
	// when not measured.
	HassCatalog, HassTest              string
	LargeTools, LargeServers, LongWord int
	// DevSets are HWU64 and the MCP routing sets (devsets.go); DevMissing
	// names those whose file was not found.
	DevSets    []devSet
	DevMissing []string
}

// prepareData converts the development datasets with tools/datasets (as
// make eval does), cuts them down for --quick, and builds the large
// catalog and the long queries.
func prepareData(ctx context.Context, c *config, dir string) (*dataset, error) {
	raw := filepath.Join(dir, "converted")
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return nil, err
	}
	conv := [][]string{
		{"-in", filepath.Join(c.datasets, "banking77.json"), "-format", "banking77", "-out", raw},
		{"-in", filepath.Join(c.datasets, "metatool.json"), "-format", "metatool", "-examples-per-tool", "5", "-out", raw},
	}
	if c.hassWheel != "" {
		conv = append(conv, []string{"-in", c.hassWheel, "-format", "hass-intents", "-out", raw})
	}
	for _, args := range conv {
		cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./tools/datasets"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go run ./tools/datasets %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	d := &dataset{
		Banking77Catalog: filepath.Join(raw, "banking77.catalog.json"),
		Banking77Test:    filepath.Join(raw, "banking77.test.jsonl"),
		MetaDescCatalog:  filepath.Join(raw, "metatool-desc.catalog.json"),
		MetaEx5Catalog:   filepath.Join(raw, "metatool-ex5.catalog.json"),
		MetaTest:         filepath.Join(raw, "metatool.test.jsonl"),
		DefaultCatalog:   c.catalog,
	}
	if c.hassWheel != "" {
		d.HassCatalog = filepath.Join(raw, "hass-intents.catalog.json")
		d.HassTest = filepath.Join(raw, "hass-intents.test.jsonl")
	}
	var err error
	if c.quick {
		if err := quickSubsets(d, dir); err != nil {
			return nil, err
		}
		if d.HassTest != "" {
			if d.HassTest, err = subsetQueries(d.HassTest, filepath.Join(dir, "quick-hass-intents.test.jsonl"), quickB77, 0); err != nil {
				return nil, err
			}
		}
	}
	if d.DevSets, d.DevMissing, err = prepareDevSets(ctx, c, raw); err != nil {
		return nil, err
	}
	if d.Banking77N, _, err = countQueries(d.Banking77Test); err != nil {
		return nil, err
	}
	if d.MetaN, d.MetaMulti, err = countQueries(d.MetaTest); err != nil {
		return nil, err
	}

	short, err := readQueryTexts(c.shortQueries)
	if err != nil {
		return nil, err
	}
	d.ShortQueries = short
	var mt metatoolFile
	if err := readJSONFile(filepath.Join(c.datasets, "metatool.json"), &mt); err != nil {
		return nil, err
	}
	var bk banking77File
	if err := readJSONFile(filepath.Join(c.datasets, "banking77.json"), &bk); err != nil {
		return nil, err
	}
	cat, err := largeCatalog(&mt, &bk, c.largeTools)
	if err != nil {
		return nil, err
	}
	d.LargeCatalog = filepath.Join(dir, fmt.Sprintf("large-%d.catalog.json", c.largeTools))
	if err := writeJSONFile(d.LargeCatalog, cat); err != nil {
		return nil, err
	}
	d.LargeServers = len(cat.Servers)
	for _, s := range cat.Servers {
		d.LargeTools += len(s.Tools)
	}
	d.LongQueries = longQueries(&mt, c.queryWords, 200)
	d.LongWord = c.queryWords
	return d, nil
}

// Quick-mode sizes: enough to exercise every step, a few seconds each.
const (
	quickExamples = 8   // Banking77 examples per intent kept in the catalog
	quickShots    = 2   // MetaTool examples per tool kept in the "5-shot" catalog
	quickB77      = 300 // Banking77 test queries
	quickSingle   = 200 // MetaTool single-tool test queries
	quickMulti    = 50  // MetaTool two-tool test queries
)

// quickSubsets writes cut-down copies of the Banking77 and 5-shot
// MetaTool catalogs and of the query sets into dir and points d at them.
func quickSubsets(d *dataset, dir string) error {
	var cat struct {
		Categories []catCategory `json:"categories"`
	}
	if err := readJSONFile(d.Banking77Catalog, &cat); err != nil {
		return err
	}
	for i := range cat.Categories {
		ex := cat.Categories[i].Examples
		cat.Categories[i].Examples = ex[:min(len(ex), quickExamples)]
	}
	d.Banking77Catalog = filepath.Join(dir, "banking77-quick.catalog.json")
	if err := writeJSONFile(d.Banking77Catalog, cat); err != nil {
		return err
	}
	var ex5 catalogFile
	if err := readJSONFile(d.MetaEx5Catalog, &ex5); err != nil {
		return err
	}
	for _, s := range ex5.Servers {
		for j := range s.Tools {
			s.Tools[j].Examples = s.Tools[j].Examples[:min(len(s.Tools[j].Examples), quickShots)]
		}
	}
	d.MetaEx5Catalog = filepath.Join(dir, "metatool-ex5-quick.catalog.json")
	if err := writeJSONFile(d.MetaEx5Catalog, ex5); err != nil {
		return err
	}
	var err error
	if d.Banking77Test, err = subsetQueries(d.Banking77Test, filepath.Join(dir, "banking77-quick.test.jsonl"), quickB77, 0); err != nil {
		return err
	}
	d.MetaTest, err = subsetQueries(d.MetaTest, filepath.Join(dir, "metatool-quick.test.jsonl"), quickSingle, quickMulti)
	return err
}

// subsetQueries copies an evenly spread selection of the query lines of
// in to out: up to single queries that are not multi-tool and up to multi
// that are.
func subsetQueries(in, out string, single, multi int) (string, error) {
	lines, err := readLines(in)
	if err != nil {
		return "", err
	}
	var singles, multis []string
	for _, l := range lines {
		var q struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(l), &q); err != nil {
			return "", fmt.Errorf("%s: %w", in, err)
		}
		if q.Kind == "multi" {
			multis = append(multis, l)
		} else {
			singles = append(singles, l)
		}
	}
	keep := append(spread(singles, single), spread(multis, multi)...)
	return out, os.WriteFile(out, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// spread picks up to n items evenly spaced through xs, in order.
func spread[T any](xs []T, n int) []T {
	if n <= 0 {
		return nil
	}
	if len(xs) <= n {
		return xs
	}
	out := make([]T, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, xs[i*len(xs)/n])
	}
	return out
}

// countQueries counts the query lines of a JSON-lines file and those of
// kind multi.
func countQueries(path string) (n, multi int, err error) {
	lines, err := readLines(path)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range lines {
		if strings.Contains(l, `"kind":"multi"`) {
			multi++
		}
	}
	return len(lines), multi, nil
}

func readQueryTexts(path string) ([]string, error) {
	lines, err := readLines(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range lines {
		var q struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(l), &q); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, q.Text)
	}
	return out, nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// The raw development datasets (../shared/datasets/README.md), as far as
// the large catalog needs them.
type (
	metatoolFile struct {
		Servers []struct {
			ID          string `json:"id"`
			Description string `json:"description"`
		} `json:"servers"`
		Queries []struct {
			Text    string   `json:"text"`
			Servers []string `json:"servers"`
			Kind    string   `json:"kind"`
		} `json:"queries"`
	}
	banking77File struct {
		Labels []catCategory `json:"labels"`
	}
	catCategory struct {
		ID          string   `json:"id"`
		Description string   `json:"description"`
		Examples    []string `json:"examples,omitempty"`
	}
	catTool struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Examples    []string `json:"examples,omitempty"`
	}
	catServer struct {
		ID          string    `json:"id"`
		Description string    `json:"description"`
		Tools       []catTool `json:"tools"`
	}
	catalogFile struct {
		Servers []catServer `json:"servers"`
	}
)

// toolsPerServer is the large catalog's shape: tools/10 servers of ten.
const toolsPerServer = 10

// largeCatalog builds a catalog of n tools from the datasets' own texts,
// deterministically: servers are MetaTool's 199 tools, then Banking77's 77
// intents (ids prefixed "bank_"), then the same again with a numeric
// suffix; each server's tools are described by that server's queries (or
// the intent's examples), in dataset order, and named after their first
// words. Only the routing cost is measured on it, not accuracy, so what
// matters is realistic text and realistic counts of servers, tools and
// vectors.
func largeCatalog(mt *metatoolFile, bk *banking77File, n int) (catalogFile, error) {
	type source struct {
		id, desc string
		texts    []string
	}
	byServer := map[string][]string{}
	for _, q := range mt.Queries {
		if q.Kind != "multi" && len(q.Servers) == 1 {
			byServer[q.Servers[0]] = append(byServer[q.Servers[0]], q.Text)
		}
	}
	var srcs []source
	for _, s := range mt.Servers {
		if len(byServer[s.ID]) > 0 {
			srcs = append(srcs, source{s.ID, s.Description, byServer[s.ID]})
		}
	}
	for _, l := range bk.Labels {
		if len(l.Examples) > 0 {
			srcs = append(srcs, source{"bank_" + l.ID, "Banking: " + l.Description, l.Examples})
		}
	}
	if len(srcs) == 0 {
		return catalogFile{}, fmt.Errorf("large catalog: the datasets have no texts")
	}
	var cat catalogFile
	for made := 0; made < n; {
		i := len(cat.Servers)
		src := srcs[i%len(srcs)]
		s := catServer{ID: src.id, Description: src.desc}
		if round := i / len(srcs); round > 0 {
			s.ID = fmt.Sprintf("%s_%d", src.id, round+1)
		}
		for j := 0; j < toolsPerServer && made < n; j++ {
			text := src.texts[(j+i/len(srcs)*toolsPerServer)%len(src.texts)]
			s.Tools = append(s.Tools, catTool{Name: fmt.Sprintf("%s_%d", slug(text, 3), j), Description: text})
			made++
		}
		cat.Servers = append(cat.Servers, s)
	}
	return cat, nil
}

// fillers are the words of a request that say nothing of the tool
// ("Can you help me find..."); tool names skip them.
var fillers = map[string]bool{"a": true, "an": true, "the": true, "i": true, "m": true, "me": true, "my": true,
	"you": true, "your": true, "can": true, "could": true, "would": true, "will": true, "please": true,
	"help": true, "what": true, "s": true, "is": true, "are": true, "do": true, "does": true, "how": true,
	"to": true, "for": true, "of": true, "some": true, "any": true, "need": true, "want": true, "like": true,
	"looking": true, "there": true, "it": true, "in": true, "on": true, "with": true, "and": true, "or": true,
	"hi": true, "hey": true, "be": true, "about": true, "this": true, "that": true, "we": true, "our": true}

// slug makes a tool name of the first n words of text that are not
// fillers: lower-case ASCII letters and digits joined by underscores
// ("tool" if none).
func slug(text string, n int) string {
	var words []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return r > unicode.MaxASCII || !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(words) == n {
			break
		}
		if !fillers[w] {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return "tool"
	}
	return strings.Join(words, "_")
}

// longQueries makes count queries of exactly words words each by joining
// consecutive MetaTool queries, starting at evenly spread places.
func longQueries(mt *metatoolFile, words, count int) []string {
	if len(mt.Queries) == 0 || words <= 0 {
		return nil
	}
	out := make([]string, 0, count)
	for k := 0; k < count; k++ {
		var ws []string
		start := k * len(mt.Queries) / count
		for i := start; len(ws) < words && i < start+len(mt.Queries); i++ {
			ws = append(ws, strings.Fields(mt.Queries[i%len(mt.Queries)].Text)...)
		}
		if len(ws) < words {
			return out // the whole dataset holds fewer words
		}
		out = append(out, strings.Join(ws[:words], " "))
	}
	return out
}
