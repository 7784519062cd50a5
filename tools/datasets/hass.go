package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The hass-intents format: Home Assistant's voice intents (the PyPI wheel
// home-assistant-intents, Apache-2.0), sentence templates for 42 intents in
// some 60 languages. It becomes a multilingual intent check: an English
// catalog (each intent's English description and -examples-per-intent
// English sentences) and test queries in every language (-queries-per-intent
// each; kind = the language code), sampled from the templates with a seed.
//
// Templates use hassil's syntax: (a|b) alternatives, [a] optional, (a;b)
// any order, <rule> expansion rules, {list} slot lists. Lists with values
// or a number range are filled in; templates that need a wildcard or an
// entity list ({name}, {area}, {floor}: Home Assistant fills those from the
// user's devices) are skipped, so the sentences name no device.

// hassIntentsDir is where the wheel keeps its data.
const hassIntentsDir = "home_assistant_intents"

type hassIntentInfo struct {
	Supported   bool   `json:"supported"`
	Description string `json:"description"`
}

type hassLang struct {
	Language string `json:"language"`
	Intents  map[string]struct {
		Data []struct {
			Sentences []string `json:"sentences"`
		} `json:"data"`
	} `json:"intents"`
	Lists map[string]struct {
		Values   []json.RawMessage             `json:"values"`
		Range    *struct{ From, To, Step int } `json:"range"`
		Wildcard bool                          `json:"wildcard"`
	} `json:"lists"`
	ExpansionRules map[string]string `json:"expansion_rules"`
}

func hassIntents(o options, stdout io.Writer) error {
	z, err := zip.OpenReader(o.in)
	if err != nil {
		return fmt.Errorf("-in %s: want the home-assistant-intents wheel: %w", o.in, err)
	}
	defer z.Close()
	read := func(name string, v any) error {
		f, err := z.Open(path.Join(hassIntentsDir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		return json.NewDecoder(f).Decode(v)
	}
	var infos map[string]hassIntentInfo
	if err := read("intents.json", &infos); err != nil {
		return err
	}
	var langs []string
	for _, f := range z.File {
		if dir, name := path.Split(f.Name); dir == hassIntentsDir+"/data/" && strings.HasSuffix(name, ".json") {
			langs = append(langs, strings.TrimSuffix(name, ".json"))
		}
	}
	sort.Strings(langs)
	if !slices.Contains(langs, "en") {
		return errors.New("the wheel has no English data")
	}
	if o.languages != "" {
		want := strings.Split(o.languages, ",")
		langs = slices.DeleteFunc(langs, func(l string) bool { return l != "en" && !slices.Contains(want, l) })
	}
	samples := map[string]map[string][]string{} // lang -> intent -> sentences
	for _, l := range langs {
		var lang hassLang
		if err := read("data/"+l+".json", &lang); err != nil {
			return fmt.Errorf("%s: %w", l, err)
		}
		n := o.queriesPerIntent
		if l == "en" {
			n += o.examplesPerIntent
		}
		// One generator per language, seeded from the seed and the
		// language, so adding a language changes no other's sentences.
		r := rand.New(rand.NewSource(o.seed*1000003 + int64(hashString(l))))
		samples[l] = sampleHass(&lang, infos, n, r)
	}
	var cat catalogOut
	var intents []string
	for id := range samples["en"] {
		intents = append(intents, id)
	}
	sort.Strings(intents)
	var qs []query
	for _, id := range intents {
		en := samples["en"][id]
		if len(en) <= o.examplesPerIntent {
			continue // too few English sentences for examples and queries
		}
		cat.Categories = append(cat.Categories, category{ID: id, Description: infos[id].Description,
			Examples: en[:o.examplesPerIntent]})
	}
	perLang := map[string]int{}
	for _, l := range langs {
		for _, c := range cat.Categories {
			s := samples[l][c.ID]
			if l == "en" {
				s = s[o.examplesPerIntent:]
			}
			for _, t := range s {
				qs = append(qs, query{Text: t, Categories: []string{c.ID}, Kind: l})
				perLang[l]++
			}
		}
	}
	if err := writeJSON(filepath.Join(o.out, "hass-intents.catalog.json"), cat); err != nil {
		return err
	}
	if err := writeQueries(filepath.Join(o.out, "hass-intents.test.jsonl"), qs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hass-intents: %d intents in the English catalog (%d examples each), %d test queries in %d languages\n",
		len(cat.Categories), o.examplesPerIntent, len(qs), len(perLang))
	return nil
}

func hashString(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// sampleHass draws up to n distinct sentences per supported intent.
func sampleHass(lang *hassLang, infos map[string]hassIntentInfo, n int, r *rand.Rand) map[string][]string {
	rules := map[string]tnode{}
	for name, t := range lang.ExpansionRules {
		rules[name] = parseTemplate(t)
	}
	lists := map[string]func(*rand.Rand) (string, bool){}
	for name, l := range lang.Lists {
		switch {
		case l.Range != nil:
			from, to, step := l.Range.From, l.Range.To, max(l.Range.Step, 1)
			lists[name] = func(r *rand.Rand) (string, bool) {
				return strconv.Itoa(from + step*r.Intn((to-from)/step+1)), true
			}
		case len(l.Values) > 0:
			var vals []tnode
			for _, raw := range l.Values {
				var s string
				if json.Unmarshal(raw, &s) != nil {
					var v struct {
						In string `json:"in"`
					}
					if json.Unmarshal(raw, &v) != nil || v.In == "" {
						continue
					}
					s = v.In
				}
				vals = append(vals, parseTemplate(s))
			}
			if len(vals) > 0 {
				lists[name] = func(r *rand.Rand) (string, bool) {
					return expand(vals[r.Intn(len(vals))], r, rules, nil, 0)
				}
			}
		}
	}
	out := map[string][]string{}
	ids := make([]string, 0, len(lang.Intents))
	for id := range lang.Intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !infos[id].Supported {
			continue
		}
		var templates []tnode
		for _, d := range lang.Intents[id].Data {
			for _, s := range d.Sentences {
				templates = append(templates, parseTemplate(s))
			}
		}
		seen := map[string]bool{}
		var got []string
		for try := 0; try < 40*n && len(got) < n && len(templates) > 0; try++ {
			s, ok := expand(templates[r.Intn(len(templates))], r, rules, lists, 0)
			s = strings.Join(strings.Fields(s), " ")
			if ok && s != "" && !seen[s] {
				seen[s] = true
				got = append(got, s)
			}
		}
		if len(got) > 0 {
			out[id] = got
		}
	}
	return out
}

// tnode is a parsed template: literal text, a sequence, alternatives (an
// optional part is alternatives with an empty one), a permutation, or a
// reference to a list or an expansion rule.
type tnode struct {
	kind  byte // 't' text, 's' sequence, 'a' alternatives, 'p' permutation, 'l' list, 'r' rule
	text  string
	items []tnode
}

// parseTemplate parses hassil's template syntax; it never fails (an
// unbalanced bracket ends its group at the end of the text). The whole
// text is a group, as in hassil: "a|b" at the top level is alternatives.
func parseTemplate(s string) tnode {
	p := &tparser{s: []rune(s)}
	return p.group(0)
}

type tparser struct {
	s []rune
	i int
}

// seq parses until one of the stop runes (not consumed) or the end.
func (p *tparser) seq(stop string) tnode {
	var items []tnode
	var text []rune
	flush := func() {
		if len(text) > 0 {
			items = append(items, tnode{kind: 't', text: string(text)})
			text = nil
		}
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		if strings.ContainsRune(stop, c) {
			break
		}
		p.i++
		switch c {
		case '\\':
			if p.i < len(p.s) {
				text = append(text, p.s[p.i])
				p.i++
			}
		case '(', '[':
			flush()
			g := p.group(map[rune]rune{'(': ')', '[': ']'}[c])
			if c == '[' {
				g = tnode{kind: 'a', items: []tnode{g, {kind: 't'}}}
			}
			items = append(items, g)
		case '{', '<':
			flush()
			end := map[rune]rune{'{': '}', '<': '>'}[c]
			start := p.i
			for p.i < len(p.s) && p.s[p.i] != end {
				p.i++
			}
			name := string(p.s[start:p.i])
			p.i++ // the closing bracket
			kind := byte('r')
			if c == '{' {
				kind = 'l'
				name, _, _ = strings.Cut(name, ":")
			}
			items = append(items, tnode{kind: kind, text: strings.TrimSpace(name)})
		default:
			text = append(text, c)
		}
	}
	flush()
	return tnode{kind: 's', items: items}
}

// group parses alternatives (|) or a permutation (;) up to end.
func (p *tparser) group(end rune) tnode {
	var alts, perm []tnode
	for {
		item := p.seq(string([]rune{'|', ';', end}))
		if p.i >= len(p.s) {
			alts = append(alts, item)
			break
		}
		c := p.s[p.i]
		p.i++
		if c == ';' || len(perm) > 0 {
			perm = append(perm, item)
			if c == end {
				return tnode{kind: 'p', items: perm}
			}
			continue
		}
		alts = append(alts, item)
		if c == end {
			break
		}
	}
	return tnode{kind: 'a', items: alts}
}

// expand draws one sentence from n; ok is false when it needs a list that
// has no values here (a wildcard or an entity list).
func expand(n tnode, r *rand.Rand, rules map[string]tnode, lists map[string]func(*rand.Rand) (string, bool), depth int) (string, bool) {
	if depth > 30 {
		return "", false
	}
	switch n.kind {
	case 't':
		return n.text, true
	case 'a':
		if len(n.items) == 0 {
			return "", true
		}
		return expand(n.items[r.Intn(len(n.items))], r, rules, lists, depth+1)
	case 'l':
		f, ok := lists[n.text]
		if !ok {
			return "", false
		}
		return f(r)
	case 'r':
		rule, ok := rules[n.text]
		if !ok {
			return "", false
		}
		return expand(rule, r, rules, lists, depth+1)
	}
	items := n.items
	sep := ""
	if n.kind == 'p' {
		items = slices.Clone(items)
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		sep = " "
	}
	var b strings.Builder
	for i, it := range items {
		s, ok := expand(it, r, rules, lists, depth+1)
		if !ok {
			return "", false
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s)
	}
	return b.String(), true
}
