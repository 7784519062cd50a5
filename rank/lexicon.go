package rank

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
)

// lexicon holds the lexical evidence of every label: keywords, patterns and
// names, matched against lower-cased text.
type lexicon struct {
	keywords map[int][]string
	patterns map[int][]*regexp.Regexp
	names    map[int][]string
}

func newLexicon(idx *index.Index) (lexicon, error) {
	lx := lexicon{keywords: map[int][]string{}, patterns: map[int][]*regexp.Regexp{}, names: map[int][]string{}}
	for i, l := range idx.Labels {
		for _, k := range l.Keywords {
			if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
				lx.keywords[i] = append(lx.keywords[i], k)
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
				lx.names[i] = append(lx.names[i], strings.ToLower(l.Name))
			}
		case index.KindServer:
			if len(l.ID) >= 3 {
				lx.names[i] = append(lx.names[i], strings.ToLower(l.ID))
			}
			if l.Name != "" && l.Name != l.ID && len(l.Name) >= 3 {
				lx.names[i] = append(lx.names[i], strings.ToLower(l.Name))
			}
		}
	}
	return lx, nil
}

// evidence returns the lexical boost for label li in turn t (the fusion
// weight of the strongest kind that matched) and what matched. The match
// is found once per turn and label; the weight is looked up each time, as
// fitting scores one turn under several fusions.
func (lx *lexicon) evidence(li int, t *Turn, f *calibrate.Fusion) (float64, string) {
	h, ok := t.lexHits[li]
	if !ok {
		h = lx.match(li, t)
		if t.lexHits == nil {
			t.lexHits = map[int]lexHit{}
		}
		t.lexHits[li] = h
	}
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
		if containsWord(t.lower, n) {
			return lexHit{lexName, fmt.Sprintf("names %q", n)}
		}
	}
	for _, k := range lx.keywords[li] {
		if containsWord(t.lower, k) {
			return lexHit{lexKeyword, fmt.Sprintf("keyword %q", k)}
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
