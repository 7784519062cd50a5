package rank

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
)

// lexicon holds the lexical evidence of every label: keywords, patterns and
// names, matched against lower-cased text.
type lexicon struct {
	keywords map[int][]needle
	patterns map[int][]*regexp.Regexp
	names    map[int][]needle
	// byWord lists, by the first word run of each name and keyword, the
	// labels it is a needle of; always lists the labels that must be
	// matched whatever the text's words (patterns, needles without word
	// bytes). A turn checks only the labels its words point to, so the
	// lexicon costs the text's length and its hits, not the catalog's size.
	byWord map[string][]int
	always []int
}

// needle is a keyword or name with its runs of word bytes (isWordByte).
// A match at word boundaries (containsWord) has each run as a whole word
// of the text, so a long text is first checked for the runs in its set of
// words (Turn.mayContain) instead of being searched once per needle.
type needle struct {
	s    string
	runs []string
}

func newNeedle(s string) needle {
	return needle{s: s, runs: wordRuns(s)}
}

// wordRuns returns the maximal runs of word bytes of s, in order.
func wordRuns(s string) []string {
	var out []string
	eachWordRun(s, func(w string) { out = append(out, w) })
	return out
}

// eachWordRun calls fn with each maximal run of word bytes of s, in
// order.
func eachWordRun(s string, fn func(string)) {
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		fn(s[i:j])
		i = j
	}
}

// wordSetMin is the text length from which needles are first looked up
// in the turn's set of words; below it a search per needle costs less.
const wordSetMin = 1024

// wordSet returns the set of word runs of t.lower, built once per turn.
func (t *Turn) wordSet() map[string]struct{} {
	if t.words == nil {
		t.words = map[string]struct{}{}
		eachWordRun(t.lower, func(w string) { t.words[w] = struct{}{} })
	}
	return t.words
}

// mayContain reports whether t.lower can contain n at word boundaries:
// false only when one of n's runs is not a word of the text.
func (t *Turn) mayContain(n needle) bool {
	if len(t.lower) < wordSetMin {
		return true
	}
	words := t.wordSet()
	for _, r := range n.runs {
		if _, ok := words[r]; !ok {
			return false
		}
	}
	return true
}

func newLexicon(idx *index.Index) (lexicon, error) {
	lx := lexicon{keywords: map[int][]needle{}, patterns: map[int][]*regexp.Regexp{}, names: map[int][]needle{}}
	for i, l := range idx.Labels {
		for _, k := range l.Keywords {
			if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
				lx.keywords[i] = append(lx.keywords[i], newNeedle(k))
			}
		}
		for _, p := range l.Patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return lx, fmt.Errorf("rank: label %q pattern %q: %w", l.ID, p, err)
			}
			lx.patterns[i] = append(lx.patterns[i], re)
		}
		switch l.Kind {
		case index.KindTool:
			// Names with separators are evidence when quoted (list_issues,
			// "Songkick concert"); plain words would match too often.
			if len(l.Name) >= 4 && strings.ContainsAny(l.Name, "_- ") {
				lx.names[i] = append(lx.names[i], newNeedle(strings.ToLower(l.Name)))
			}
		case index.KindServer:
			if len(l.ID) >= 3 {
				lx.names[i] = append(lx.names[i], newNeedle(strings.ToLower(l.ID)))
			}
			if l.Name != "" && l.Name != l.ID && len(l.Name) >= 3 {
				lx.names[i] = append(lx.names[i], newNeedle(strings.ToLower(l.Name)))
			}
		}
	}
	lx.byWord = map[string][]int{}
	for i := range idx.Labels {
		always := len(lx.patterns[i]) > 0
		seen := map[string]bool{}
		for _, n := range append(slices.Clip(lx.names[i]), lx.keywords[i]...) {
			if len(n.runs) == 0 {
				always = true
			} else if w := n.runs[0]; !seen[w] {
				seen[w] = true
				lx.byWord[w] = append(lx.byWord[w], i)
			}
		}
		if always {
			lx.always = append(lx.always, i)
		}
	}
	return lx, nil
}

// scan finds the lexical evidence of every label in t: only the labels
// whose needles' first words occur in the text, or that always need a
// look (lexicon.always), can have any.
func (lx *lexicon) scan(t *Turn) {
	t.lexHits = map[int]lexHit{}
	check := func(li int) {
		if _, done := t.lexHits[li]; !done {
			t.lexHits[li] = lx.match(li, t)
		}
	}
	for _, li := range lx.always {
		check(li)
	}
	for w := range t.wordSet() {
		for _, li := range lx.byWord[w] {
			check(li)
		}
	}
}

// evidence returns the lexical boost for label li in turn t (the fusion
// weight of the strongest kind that matched) and what matched. The match
// is found once per turn and label; the weight is looked up each time, as
// fitting scores one turn under several fusions.
func (lx *lexicon) evidence(li int, t *Turn, f *calibrate.Fusion) (float64, string) {
	if t.lexHits == nil {
		lx.scan(t)
	}
	h := t.lexHits[li]
	switch h.kind {
	case lexPattern:
		return f.Pattern, h.evidence
	case lexName:
		return f.Name, h.evidence
	case lexKeyword:
		return f.Keyword, h.evidence
	}
	return 0, ""
}

// lexHit is the strongest lexical evidence for a label in a turn.
type lexHit struct {
	kind     lexKind
	evidence string
}

type lexKind uint8

const (
	lexNone lexKind = iota
	lexPattern
	lexName
	lexKeyword
)

// match finds the strongest evidence for label li in t: a pattern in
// t.pattern, else a name, else a keyword in t.lower.
func (lx *lexicon) match(li int, t *Turn) lexHit {
	for _, re := range lx.patterns[li] {
		if m := re.FindString(t.pattern); m != "" {
			return lexHit{lexPattern, fmt.Sprintf("pattern matched %q", Clip(m, 40))}
		}
	}
	for _, n := range lx.names[li] {
		if t.mayContain(n) && containsWord(t.lower, n.s) {
			return lexHit{lexName, fmt.Sprintf("names %q", n.s)}
		}
	}
	for _, k := range lx.keywords[li] {
		if t.mayContain(k) && containsWord(t.lower, k.s) {
			return lexHit{lexKeyword, fmt.Sprintf("keyword %q", k.s)}
		}
	}
	return lexHit{}
}

// containsWord reports whether needle occurs in s at word boundaries.
func containsWord(s, needle string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], needle)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(needle)
		before := i == 0 || !isWordByte(s[i-1])
		after := end == len(s) || !isWordByte(s[end])
		if before && after {
			return true
		}
		off = i + 1
	}
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
}
