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
// A long prompt is split as Needs splits it: its tail only.
func Clauses(prompt string) []Turn {
	ts := []Turn{{Text: prompt, Weight: 1}}
	src := prompt
	if isLong(prompt) {
		src = tail(prompt, PieceBytes)
		if i := strings.LastIndexByte(strings.TrimRight(src, "\n\r\t "), '\n'); i >= 0 && len(strings.Fields(src[i+1:])) >= 3 {
			src = strings.TrimSpace(src[i+1:])
		}
		ts = append(ts, Turn{Text: src, Weight: 1})
	}
	parts := clauseParts(src)
	if len(parts) < 2 {
		return ts
	}
	if len(parts) > maxClauses {
		// Keep the longest clauses, in order: short ones are mostly
		// details of a request ("the keyword is fashion").
		idx := make([]int, len(parts))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return len(strings.Fields(parts[b])) - len(strings.Fields(parts[a])) })
		idx = idx[:maxClauses]
		slices.Sort(idx)
		kept := make([]string, len(idx))
		for i, j := range idx {
			kept[i] = parts[j]
		}
		parts = kept
	}
	for _, p := range parts {
		ts = append(ts, Turn{Text: p, Weight: needWeight, Part: true})
	}
	return ts
}

// Clause bounds: a clause has at least clauseMinWords words, and a prompt
// gives at most maxClauses.
const (
	clauseMinWords = 3
	maxClauses     = 6
)

// clauseBreak splits a prompt into lines and bullet items before sentences.
var clauseBreak = regexp.MustCompile(`\s*(?:\n+|•|·|\s[-*]\s|^\s*\d+[.)]\s)\s*`)

// clauseParts splits a prompt at line breaks and bullets, then each piece
// into sentences and at needSplit, joining fragments shorter than
// clauseMinWords words to the next one.
func clauseParts(prompt string) []string {
	var frags []string
	for _, piece := range clauseBreak.Split(prompt, -1) {
		if strings.TrimSpace(piece) != "" {
			frags = append(frags, needParts(piece)...)
		}
	}
	var out []string
	carry := ""
	for _, f := range frags {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if carry != "" {
			f = carry + " " + f
			carry = ""
		}
		if len(strings.Fields(f)) < clauseMinWords {
			carry = f
			continue
		}
		out = append(out, f)
	}
	if carry != "" && len(out) > 0 && len(strings.Fields(carry)) >= 2 {
		out[len(out)-1] += " " + carry
	}
	return out
}
