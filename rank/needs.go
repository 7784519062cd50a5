package rank

import (
	"regexp"
	"slices"
	"strings"
)

// needSplit separates the needs of a compound request ("read config.json
// and push it to my repo"); sentences ("Find the PDF. Can you email it to
// Sam?") are split first, by needParts.
var needSplit = regexp.MustCompile(`(?i)\s*(?:;|,\s*(?:and\s+)?then\b|\band\s+then\b|\bthen\b|\band\s+also\b|\balso\b|\bas\s+well\s+as\b|\band\b|,)\s*`)

// maxNeeds bounds the extra turns one prompt is split into.
const maxNeeds = 4

// Needs is the prompt as one turn plus, when it joins several requests,
// one turn per part, so each need is matched on its own words. A long
// prompt (see LongTextBytes) also gets its tail as a turn, and only the
// tail is split into needs: the request after a paste is at its end.
func Needs(prompt string) []Turn {
	ts := []Turn{{Text: prompt, Weight: 1}}
	src := prompt
	if isLong(prompt) {
		src = tail(prompt, PieceBytes)
		// The tail turn, and the needs, are the tail's last line when it
		// has words enough to be a request: the log lines before it would
		// be embedded for nothing (Route on a 20 KB log and a question:
		// the tail piece cost 83 tokens, 6.6 ms of model time; its last
		// line, 2.1 ms), and the whole prompt still gives keywords, names
		// and BM25 every word.
		if i := strings.LastIndexByte(strings.TrimRight(src, "\n\r\t "), '\n'); i >= 0 && len(strings.Fields(src[i+1:])) >= 3 {
			src = strings.TrimSpace(src[i+1:])
		}
		ts = append(ts, Turn{Text: src, Weight: 1})
	}
	base := len(ts)
	parts := needParts(src)
	if len(parts) < 2 {
		return ts
	}
	if src != prompt {
		// The tail's last needs, in order: a paste's lines come before.
		var last []string
		for i := len(parts) - 1; i >= 0 && len(last) < maxNeeds; i-- {
			if len(strings.Fields(parts[i])) >= 2 {
				last = append(last, parts[i])
			}
		}
		slices.Reverse(last)
		parts = last
	}
	for _, p := range parts {
		if len(strings.Fields(p)) < 2 {
			continue
		}
		ts = append(ts, Turn{Text: p, Weight: needWeight, Part: true})
		if len(ts)-base >= maxNeeds {
			break
		}
	}
	if len(ts) == base+1 { // one usable part is the prompt again
		return ts[:base]
	}
	return ts
}

// needParts splits a prompt into sentences (a '.', '?' or '!' followed by
// white space and an upper-case letter), then each sentence at needSplit.
func needParts(prompt string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(prompt); i++ {
		if b := prompt[i]; b != '.' && b != '?' && b != '!' {
			continue
		}
		j := i + 1
		for j < len(prompt) && (prompt[j] == ' ' || prompt[j] == '\t' || prompt[j] == '\n') {
			j++
		}
		if j > i+1 && j < len(prompt) && prompt[j] >= 'A' && prompt[j] <= 'Z' {
			parts = append(parts, needSplit.Split(prompt[start:i], -1)...)
			start = j
		}
	}
	return append(parts, needSplit.Split(prompt[start:], -1)...)
}

// needWeight is the weight of one part of a compound request.
const needWeight = 1

// Clauses is the prompt as one turn plus one turn per clause that reads as
// a request of its own, for a router that weighs each need's evidence
// (route's evidence path). Unlike Needs it splits at line breaks and
// bullets too, joins a fragment of fewer than clauseMinWords words (a
// discourse marker such as "After that" or "Finally") to the clause after
// it, and keeps up to maxClauses clauses (the longest, in their order).
// Each clause is a span of the prompt (Turn.Span), so its vector can be
// pooled from the prompt's own model run (SpanEmbedder). A long prompt is
// split as Needs splits it: its tail only, each clause embedded alone.
func Clauses(prompt string) []Turn {
	ts := []Turn{{Text: prompt, Weight: 1}}
	src, off := prompt, 0
	if isLong(prompt) {
		src = tail(prompt, PieceBytes)
		if i := strings.LastIndexByte(strings.TrimRight(src, "\n\r\t "), '\n'); i >= 0 && len(strings.Fields(src[i+1:])) >= 3 {
			src = strings.TrimSpace(src[i+1:])
		}
		ts = append(ts, Turn{Text: src, Weight: 1})
		off = -1 // spans of a tail are not spans of the embedded head
	}
	spans := clauseSpans(src)
	if len(spans) < 2 {
		return ts
	}
	if len(spans) > maxClauses {
		// Keep the longest clauses, in order: short ones are mostly
		// details of a request ("the keyword is fashion").
		idx := make([]int, len(spans))
		for i := range idx {
			idx[i] = i
		}
		words := func(sp [2]int) int { return len(strings.Fields(src[sp[0]:sp[1]])) }
		slices.SortStableFunc(idx, func(a, b int) int { return words(spans[b]) - words(spans[a]) })
		idx = idx[:maxClauses]
		slices.Sort(idx)
		kept := make([][2]int, len(idx))
		for i, j := range idx {
			kept[i] = spans[j]
		}
		spans = kept
	}
	for _, sp := range spans {
		t := Turn{Text: src[sp[0]:sp[1]], Weight: needWeight, Part: true}
		if off >= 0 {
			t.Span = [2]int{sp[0] + off, sp[1] + off}
		}
		ts = append(ts, t)
	}
	return ts
}

// Clause bounds: a clause has at least clauseMinWords words, and a prompt
// gives at most maxClauses.
const (
	clauseMinWords = 3
	maxClauses     = 6
)

// clauseBreak separates lines and bullet items.
var clauseBreak = regexp.MustCompile(`\n+|•|·|\s[-*]\s|(?m:^\s*\d+[.)]\s)`)

// clauseSpans splits text into clause spans (byte ranges, trimmed): at line
// breaks and bullets, then into sentences (a '.', '?' or '!' followed by
// white space and an upper-case letter), then at needSplit, joining a
// fragment shorter than clauseMinWords words to the one after it (the last
// to the one before).
func clauseSpans(text string) [][2]int {
	var frags [][2]int
	addSplit := func(a, b int, re *regexp.Regexp, then func(a, b int)) {
		start := a
		for _, m := range re.FindAllStringIndex(text[a:b], -1) {
			then(start, a+m[0])
			start = a + m[1]
		}
		then(start, b)
	}
	trim := func(a, b int) {
		for a < b && strings.ContainsRune(" \t\r\n", rune(text[a])) {
			a++
		}
		for b > a && strings.ContainsRune(" \t\r\n", rune(text[b-1])) {
			b--
		}
		if b > a {
			frags = append(frags, [2]int{a, b})
		}
	}
	addSplit(0, len(text), clauseBreak, func(a, b int) {
		for _, sen := range sentenceSpans(text, a, b) {
			addSplit(sen[0], sen[1], needSplit, trim)
		}
	})
	var out [][2]int
	carry := -1
	for _, f := range frags {
		if carry >= 0 {
			f[0] = carry
			carry = -1
		}
		if len(strings.Fields(text[f[0]:f[1]])) < clauseMinWords {
			carry = f[0]
			continue
		}
		out = append(out, f)
	}
	if carry >= 0 && len(out) > 0 && len(strings.Fields(text[carry:])) >= 2 {
		out[len(out)-1][1] = len(strings.TrimRight(text, " \t\r\n"))
	}
	return out
}

// sentenceSpans splits text[a:b] into sentences: a '.', '?' or '!'
// followed by white space and an upper-case letter ends one (the mark
// stays with its sentence).
func sentenceSpans(text string, a, b int) [][2]int {
	var out [][2]int
	start := a
	for i := a; i < b; i++ {
		if c := text[i]; c != '.' && c != '?' && c != '!' {
			continue
		}
		j := i + 1
		for j < b && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n') {
			j++
		}
		if j > i+1 && j < b && text[j] >= 'A' && text[j] <= 'Z' {
			out = append(out, [2]int{start, i + 1})
			start = j
		}
	}
	return append(out, [2]int{start, b})
}
