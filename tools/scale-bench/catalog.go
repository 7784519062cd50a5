package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"unicode"

	"github.com/classifierd/classifierd/catalog"
)

// sources are the real texts synthetic catalogs are composed from: tool
// descriptions (the out-of-the-box catalog's and MetaTool's) and users'
// requests (MetaTool's queries).
type sources struct {
	descs   []string
	queries []string
}

func loadSources(defaultCatalog, metatool string) (*sources, error) {
	var src sources
	def, err := catalog.Load(defaultCatalog)
	if err != nil {
		return nil, err
	}
	for _, s := range def.Servers {
		for _, t := range s.Tools {
			if strings.TrimSpace(t.Description) != "" {
				src.descs = append(src.descs, t.Description)
			}
		}
	}
	data, err := os.ReadFile(metatool)
	if err != nil {
		return nil, err
	}
	var mt struct {
		Servers []struct {
			Description string `json:"description"`
		} `json:"servers"`
		Queries []struct {
			Text string `json:"text"`
			Kind string `json:"kind"`
		} `json:"queries"`
	}
	if err := json.Unmarshal(data, &mt); err != nil {
		return nil, fmt.Errorf("%s: %w", metatool, err)
	}
	for _, s := range mt.Servers {
		if strings.TrimSpace(s.Description) != "" {
			src.descs = append(src.descs, s.Description)
		}
	}
	for _, q := range mt.Queries {
		if q.Kind != "multi" && len(strings.Fields(q.Text)) >= 4 {
			src.queries = append(src.queries, q.Text)
		}
	}
	if len(src.descs) == 0 || len(src.queries) == 0 {
		return nil, fmt.Errorf("no texts in %s and %s", defaultCatalog, metatool)
	}
	return &src, nil
}

// toolsPerServer is the synthetic catalogs' shape: servers of ten tools.
const toolsPerServer = 10

// synthCatalog composes a catalog of n distinct tools from src,
// deterministically for a seed: each tool's description is a real tool
// description followed by a real user request it serves ("Use it for
// requests such as ..."), its name comes from the request's words, and
// each server is described by a real description too. Only cost is
// measured on it, not accuracy: what matters is realistic text lengths
// and counts of servers, tools and vectors. Tools have no examples, like
// most MCP catalogs.
func synthCatalog(src *sources, n int, seed uint64) *catalog.Catalog {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1e))
	cat := &catalog.Catalog{}
	for made := 0; made < n; {
		si := len(cat.Servers)
		sd := src.descs[rng.IntN(len(src.descs))]
		srv := catalog.Server{ID: fmt.Sprintf("%s_%d", slug(sd, 2), si), Description: sd}
		for j := 0; j < toolsPerServer && made < n; j++ {
			d := src.descs[rng.IntN(len(src.descs))]
			q := src.queries[rng.IntN(len(src.queries))]
			srv.Tools = append(srv.Tools, catalog.Tool{Name: fmt.Sprintf("%s_%d", slug(q, 3), j),
				Description: d + " Use it for requests such as: " + q})
			made++
		}
		cat.Servers = append(cat.Servers, srv)
	}
	return cat
}

// replicate returns cat's servers copied until there are n tools, each
// copy under new server ids (suffix _rK): the same tools offered by many
// servers. Its texts repeat, so gen-index embeds only the distinct ones:
// the documented fast path for the 100,000-tool catalog.
func replicate(cat *catalog.Catalog, n int) *catalog.Catalog {
	out := &catalog.Catalog{}
	made := 0
	for k := 1; made < n; k++ {
		for _, s := range cat.Servers {
			if made >= n {
				break
			}
			c := s
			if k > 1 {
				c.ID = fmt.Sprintf("%s_r%d", s.ID, k)
			}
			c.Tools = nil
			for _, t := range s.Tools {
				if made >= n {
					break
				}
				c.Tools = append(c.Tools, t)
				made++
			}
			out.Servers = append(out.Servers, c)
		}
	}
	return out
}

// fillers are the words of a request that say nothing of the tool.
var fillers = map[string]bool{"a": true, "an": true, "the": true, "i": true, "m": true, "me": true, "my": true,
	"you": true, "your": true, "can": true, "could": true, "would": true, "will": true, "please": true,
	"help": true, "what": true, "s": true, "is": true, "are": true, "do": true, "does": true, "how": true,
	"to": true, "for": true, "of": true, "some": true, "any": true, "need": true, "want": true, "like": true,
	"looking": true, "there": true, "it": true, "in": true, "on": true, "with": true, "and": true, "or": true,
	"hi": true, "hey": true, "be": true, "about": true, "this": true, "that": true, "we": true, "our": true}

// slug makes a name of the first n words of text that are not fillers.
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

func writeCatalog(path string, cat *catalog.Catalog) error {
	data, err := json.Marshal(cat)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
