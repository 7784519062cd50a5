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
	// BatchSize is the number of texts per Embed call (default 64).
	BatchSize int
	// Progress, if set, is called after each batch with texts done and total.
	Progress func(done, total int)
	// Now stamps BuiltAt (default time.Now).
	Now func() time.Time
	// Generator names the tool and version that built the index.
	Generator string
}

// Embed embeds every label text of cat and returns the index, without
// calibration (indexbuild.Build adds it).
func Embed(ctx context.Context, cat *catalog.Catalog, emb Embedder, m Model, opts Options) (*index.Index, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	labels := Labels(cat)
	var texts []string
	for _, l := range labels {
		texts = append(texts, l.Texts...)
	}
	vecs := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += opts.BatchSize {
		end := min(start+opts.BatchSize, len(texts))
		v, err := emb.Embed(ctx, texts[start:end])
		if err != nil {
			return nil, fmt.Errorf("labels: embed texts %d-%d: %w", start, end-1, err)
		}
		vecs = append(vecs, v...)
		if opts.Progress != nil {
			opts.Progress(end, len(texts))
		}
	}
	h := index.Header{
		Model: m.Name, Fingerprint: m.Fingerprint, Dims: m.Dims,
		BuiltAt: opts.Now().UTC().Truncate(time.Second), CatalogSHA256: cat.SHA256(),
		Generator: opts.Generator, Labels: labels,
	}
	return index.New(h, vecs)
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
