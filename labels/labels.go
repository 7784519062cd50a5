// Package labels decides which texts stand for each label of a catalog
// (description, examples, tool names, a request-phrased description),
// embeds them in bulk and lays the vectors, labels and model fingerprint
// out as an uncalibrated index.Index. The build pipeline (indexbuild) runs
// it first; tests that need an index without calibration call it alone.
package labels

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
)

// Embedder embeds texts in bulk.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Model identifies the model that embeds the catalog.
type Model struct {
	Name        string
	Fingerprint string
	Dims        int
}

// Options tunes Embed.
type Options struct {
	// BatchSize is the number of texts per Embed call (default 256).
	BatchSize int
	// Progress, if set, is called after each batch with distinct texts
	// done and their total.
	Progress func(done, total int)
	// Now stamps BuiltAt (default time.Now).
	Now func() time.Time
	// Generator names the tool and version that built the index.
	Generator string
}

// Stats says what Embed embedded.
type Stats struct {
	// Texts is the number of label texts (vectors in the index);
	// Distinct, how many of them were embedded (repeats embed once).
	Texts, Distinct int
}

// Embed embeds every label text of cat and returns the index, without
// calibration (indexbuild.Build adds it).
func Embed(ctx context.Context, cat *catalog.Catalog, emb Embedder, m Model, opts Options) (*index.Index, error) {
	idx, _, err := EmbedStats(ctx, cat, emb, m, opts)
	return idx, err
}

// EmbedStats is Embed, also saying how many texts were embedded. A text
// that occurs more than once (a tool offered by several servers, a shared
// example) is embedded once. Distinct texts go to the model in order of
// length, so a batch pads little, and each vector is written straight
// into the index's one matrix (no per-text copies of the catalog's
// vectors).
func EmbedStats(ctx context.Context, cat *catalog.Catalog, emb Embedder, m Model, opts Options) (*index.Index, Stats, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	labels := Labels(cat)
	n := 0
	for _, l := range labels {
		n += len(l.Texts)
	}
	// where[d] lists the vectors of distinct text d.
	first := make(map[string]int, n)
	var distinct []string
	var where [][]int32
	v := 0
	for _, l := range labels {
		for _, t := range l.Texts {
			d, ok := first[t]
			if !ok {
				d = len(distinct)
				first[t] = d
				distinct = append(distinct, t)
				where = append(where, nil)
			}
			where[d] = append(where[d], int32(v))
			v++
		}
	}
	first = nil
	order := make([]int32, len(distinct))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return len(distinct[a]) - len(distinct[b]) })
	flat := make([]float32, n*m.Dims)
	batch := make([]string, 0, opts.BatchSize)
	for start := 0; start < len(order); start += opts.BatchSize {
		end := min(start+opts.BatchSize, len(order))
		batch = batch[:0]
		for _, d := range order[start:end] {
			batch = append(batch, distinct[d])
		}
		vecs, err := emb.Embed(ctx, batch)
		if err != nil {
			return nil, Stats{}, fmt.Errorf("labels: embed texts %d-%d: %w", start, end-1, err)
		}
		if len(vecs) != len(batch) {
			return nil, Stats{}, fmt.Errorf("labels: embedder returned %d vectors for %d texts", len(vecs), len(batch))
		}
		for k, d := range order[start:end] {
			if len(vecs[k]) != m.Dims {
				return nil, Stats{}, fmt.Errorf("%w: text %d has %d dims, model says %d", index.ErrDimMismatch, d, len(vecs[k]), m.Dims)
			}
			for _, at := range where[d] {
				copy(flat[int(at)*m.Dims:], vecs[k])
			}
		}
		if opts.Progress != nil {
			opts.Progress(end, len(order))
		}
	}
	h := index.Header{
		Model: m.Name, Fingerprint: m.Fingerprint, Dims: m.Dims,
		BuiltAt: opts.Now().UTC().Truncate(time.Second), CatalogSHA256: cat.SHA256(),
		Generator: opts.Generator, Labels: labels,
	}
	idx, err := index.NewFlat(h, flat, n)
	return idx, Stats{Texts: n, Distinct: len(distinct)}, err
}

// Labels lists the labels of a catalog with the texts that represent them,
// vector ranges assigned in order: categories, then each server followed
// by its tools.
func Labels(cat *catalog.Catalog) []index.Label {
	var out []index.Label
	next := 0
	add := func(l index.Label, texts []string, sources []index.Source) {
		l.First, l.Count = next, len(texts)
		l.Texts, l.Sources = texts, sources
		next += len(texts)
		out = append(out, l)
	}
	for _, c := range cat.Categories {
		texts, sources := withExamples(c.Description, c.Examples)
		add(index.Label{Kind: index.KindCategory, ID: c.ID, Description: c.Description,
			Keywords: c.Keywords, Patterns: c.Patterns}, texts, sources)
	}
	for i := range cat.Servers {
		s := &cat.Servers[i]
		texts, sources := withExamples(s.Description, nil)
		if len(texts) == 0 {
			name := s.Name
			if name == "" {
				name = s.ID
			}
			texts, sources = []string{Humanize(name)}, []index.Source{index.SourceName}
		}
		add(index.Label{Kind: index.KindServer, ID: s.ID, Name: s.Name, Description: s.Description,
			Categories: s.Categories, Keywords: s.Keywords}, texts, sources)
		for j := range s.Tools {
			t := &s.Tools[j]
			desc := ToolText(t.Name, t.Description)
			texts, sources := withExamples(desc, t.Examples)
			texts[0], sources[0] = desc, index.SourceDescription
			if r := RequestText(t.Description); r != "" && len(s.Tools) == 1 {
				texts = slices.Insert(texts, 1, r)
				sources = slices.Insert(sources, 1, index.SourceRequest)
			}
			add(index.Label{Kind: index.KindTool, ID: s.ID + "/" + t.StableID(), Name: t.Name, Server: s.ID,
				Category: catalog.ToolCategory(s, t), Description: t.Description,
				Keywords: t.Keywords, InputSchema: t.InputSchema}, texts, sources)
		}
	}
	return out
}

func withExamples(desc string, examples []string) ([]string, []index.Source) {
	var texts []string
	var sources []index.Source
	if strings.TrimSpace(desc) != "" {
		texts = append(texts, desc)
		sources = append(sources, index.SourceDescription)
	}
	for _, e := range examples {
		texts = append(texts, e)
		sources = append(sources, index.SourceExample)
	}
	return texts, sources
}

// ToolText is the text embedded for a tool's description vector: its name
// in words, then its description ("list notifications: List unread ...").
func ToolText(name, desc string) string {
	h := Humanize(name)
	if strings.TrimSpace(desc) == "" {
		return h
	}
	return h + ": " + desc
}

// RequestText is a tool's description phrased as a user's request, embedded
// as one more vector of the tool ("" when there is no description). A
// small sentence encoder puts "Can you find me a laptop under $800?" and
// "Find products tailored to your preferences" in different regions, one
// a request and the other a third-person statement; the request-phrased
// description sits between them. Measured with use-lite-en on the MetaTool
// dev split (make eval): description-only catalog, tool top-1 0.534 ->
// 0.545 and recall@5 0.774 -> 0.787; with 5 examples per tool, top-1
// 0.645 -> 0.655. Only a tool that is alone on its server gets one: the
// short descriptions of sibling tools ("List open pull requests", "Get a
// pull request's diff") all take the same request phrasing and pull
// together (default catalog, tool top-1 0.803 -> 0.770 when every tool
// had one).
func RequestText(desc string) string {
	desc = strings.TrimSpace(desc)
	if desc == "" {
		return ""
	}
	return "Can you help me? " + desc
}

// Humanize turns snake_case, kebab-case and camelCase names into words.
func Humanize(name string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/':
			b.WriteByte(' ')
			prevLower = false
			continue
		case r >= 'A' && r <= 'Z':
			if prevLower {
				b.WriteByte(' ')
			}
			b.WriteRune(r + ('a' - 'A'))
			prevLower = false
			continue
		}
		b.WriteRune(r)
		prevLower = r >= 'a' && r <= 'z'
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
