package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Suggestion sources.
const (
	SourceLearned = "pattern_learning"
	SourceContext = "context_inference"
	SourceDefault = "default"
)

// Suggestion is one candidate answer.
type Suggestion struct {
	Input      string
	Confidence float64
	Source     string
	Reasoning  string
}

// Learned is what users answered to one prompt pattern.
type Learned struct {
	Input     string
	Successes int
	Total     int // successful answers of any input to this pattern
}

var (
	numRE    = regexp.MustCompile(`\b\d+(\.\d+)*\b`)
	hexRE    = regexp.MustCompile(`\b[0-9a-fA-F]{8,}\b`)
	pathRE   = regexp.MustCompile(`(?:~|\.{1,2})?/[^\s'"()\[\]]+`)
	quotedRE = regexp.MustCompile(`'[^']*'|"[^"]*"|‘[^’]*’`)
	spaceRE  = regexp.MustCompile(`\s+`)
)

// PatternKey normalises a prompt so that prompts differing only in
// numbers, paths, hashes or quoted names share learned answers:
// "Delete 3 tables?" and "Delete 5 tables?" give the same key. Secrets
// inside the prompt are masked first (MaskSecrets): the key is stored.
func PatternKey(prompt string) string {
	return maskedPatternKey(MaskSecrets(prompt))
}

// maskedPatternKey is PatternKey of a prompt whose secrets are already
// masked (MaskSecrets' result): a store masks a prompt once and keys it
// from the same result.
func maskedPatternKey(masked string) string {
	s := quotedRE.ReplaceAllString(masked, "<str>")
	s = pathRE.ReplaceAllString(s, "<path>")
	s = hexRE.ReplaceAllString(s, "<hex>")
	s = numRE.ReplaceAllString(s, "#")
	s = spaceRE.ReplaceAllString(strings.ToLower(strings.TrimSpace(s)), " ")
	return s
}

var (
	defaultNoRE   = regexp.MustCompile(`\[y/N\]|\(y/N\)|\(y,N\)`)
	yesNoWordsRE  = regexp.MustCompile(`(?i)yes\s*/\s*no`)
	parenDefRE    = regexp.MustCompile(`[(\[]([^()\[\]]+)[)\]]\s*:?\s*$`)
	menuLineRE    = regexp.MustCompile(`^\s*(?:\[?(\d{1,2}|[a-zA-Z])[\])]|(\d{1,2})[.:])\s+(.+?)\s*$`)
	inlineChoices = regexp.MustCompile(`[(\[]\s*(\d+)\s*[-–]\s*(\d+)\s*[)\]]`)
)

// Infer suggests inputs for a prompt. learned holds what users answered to
// this prompt's pattern before (successful answers only); it ranks first,
// except that a dangerous prompt's first suggestion is always its safe
// answer (n, no, q, cancel: what the prompt offers). A prompt that asks
// for a secret (typ password, or SecretPrompt judges it so whatever typ
// says) never gets a suggested value, and no secret-looking learned value
// is ever suggested, nor one without evidence that it is not secret
// (plainAnswer).
func Infer(prompt, typ string, context []string, learned []Learned) (out []Suggestion, warnings []string) {
	if typ == TypePassword || SecretPrompt(prompt) {
		warnings = append(warnings, "secret prompt: ask the user; classifierd never suggests a value")
		return nil, warnings
	}
	dangerous, reason := Dangerous(prompt, typ, context)
	if dangerous {
		warnings = append(warnings, fmt.Sprintf("dangerous: answering may destroy data (%s); confirm with the user", reason))
	}
	defer func() {
		if dangerous {
			out = safeFirst(out, prompt, typ, context)
		}
	}()
	sort.SliceStable(learned, func(i, j int) bool { return learned[i].Successes > learned[j].Successes })
	seen := map[string]bool{}
	for _, l := range learned {
		if l.Total == 0 || l.Input == Redacted || SecretValue(l.Input) || !plainAnswer(prompt, l.Input) {
			continue
		}
		out = append(out, Suggestion{Input: l.Input, Confidence: round3(float64(l.Successes) / float64(l.Total)),
			Source: SourceLearned, Reasoning: fmt.Sprintf("answered %s %d/%d times", l.Input, l.Successes, l.Total)})
		seen[l.Input] = true
	}
	add := func(s Suggestion) {
		if !seen[s.Input] {
			seen[s.Input] = true
			out = append(out, s)
		}
	}
	switch typ {
	case TypeYesNo:
		yes, no := "y", "n"
		if yesNoWordsRE.MatchString(prompt) {
			yes, no = "yes", "no"
		}
		switch {
		case dangerous:
			add(Suggestion{no, 0.7, SourceDefault, "the safe answer to a dangerous prompt"})
			add(Suggestion{yes, 0.3, SourceDefault, "only if the user confirmed the destructive action"})
		case defaultNoRE.MatchString(prompt):
			add(Suggestion{no, 0.6, SourceContext, "the prompt's default ([y/N])"})
			add(Suggestion{yes, 0.4, SourceDefault, "the other answer"})
		default:
			add(Suggestion{yes, 0.6, SourceContext, "the prompt's default or the usual confirmation"})
			add(Suggestion{no, 0.4, SourceDefault, "the other answer"})
		}
	case TypePath:
		def := ""
		if m := parenDefRE.FindStringSubmatch(prompt); m != nil {
			def = strings.TrimSpace(m[1])
		}
		if def != "" {
			add(Suggestion{def, 0.5, SourceContext, "the default the prompt offers"})
			add(Suggestion{"./" + filepath.Base(def), 0.3, SourceContext, "the same name in the working directory"})
			add(Suggestion{filepath.Join(os.TempDir(), filepath.Base(def)), 0.2, SourceDefault, "a temporary location that touches nothing else"})
		} else {
			add(Suggestion{"./", 0.5, SourceDefault, "the working directory"})
			add(Suggestion{os.TempDir(), 0.3, SourceDefault, "the temporary directory"})
		}
	case TypeChoice:
		opts := menuOptions(append(append([]string(nil), context...), prompt))
		for i, o := range opts {
			add(Suggestion{o[0], round3(1 / float64(len(opts)+i)), SourceContext, "menu option: " + o[1]})
		}
		if len(opts) == 0 {
			if m := inlineChoices.FindStringSubmatch(prompt); m != nil {
				add(Suggestion{m[1], 0.5, SourceContext, "first option of the range " + m[1] + "-" + m[2]})
			}
		}
	case TypeText, TypeCommand, TypeUnknown:
		if m := parenDefRE.FindStringSubmatch(prompt); m != nil && strings.TrimSpace(m[1]) != "" {
			add(Suggestion{strings.TrimSpace(m[1]), 0.5, SourceContext, "the default the prompt offers"})
		}
		if typ == TypeText {
			add(Suggestion{"", 0.3, SourceDefault, "an empty answer keeps the default"})
		}
	}
	return out, warnings
}

// menuOptions parses "1) apple", "[2] pear", "3. plum", "a) all" lines.
func menuOptions(lines []string) [][2]string {
	var out [][2]string
	for _, l := range lines {
		if m := menuLineRE.FindStringSubmatch(l); m != nil {
			key := m[1]
			if key == "" {
				key = m[2]
			}
			out = append(out, [2]string{key, m[3]})
		}
	}
	return out
}

func round3(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }

// offeredRE finds the answers a prompt offers in brackets: [Y/n],
// (yes/no), [y,n,q,a,d,e,?], (y/n/q).
var offeredRE = regexp.MustCompile(`[\[(]([^\[\]()]{1,60})[\])]`)

// safeAnswers are the answers that decline, best first.
var safeAnswers = []string{"no", "n", "cancel", "abort", "q", "quit", "exit", "skip"}

var safeMenuRE = regexp.MustCompile(`(?i)^\s*(no|cancel|abort|quit|exit|none|skip|back|keep)\b`)

// safeAnswer is the answer that declines a prompt: one it offers in
// brackets, a menu option that cancels, or n/no for a yes/no question.
func safeAnswer(prompt, typ string, context []string) (string, bool) {
	offered := map[string]bool{}
	for _, m := range offeredRE.FindAllStringSubmatch(clipEnd(prompt, MaxLineBytes), -1) {
		for _, o := range strings.FieldsFunc(m[1], func(r rune) bool { return r == '/' || r == ',' || r == '|' || r == ' ' }) {
			offered[strings.ToLower(strings.Trim(o, "[]"))] = true
		}
	}
	for _, a := range safeAnswers {
		if offered[a] {
			return a, true
		}
	}
	for _, o := range menuOptions(append(append([]string(nil), context...), prompt)) {
		if safeMenuRE.MatchString(o[1]) {
			return o[0], true
		}
	}
	if typ == TypeYesNo {
		if yesNoWordsRE.MatchString(prompt) {
			return "no", true
		}
		return "n", true
	}
	return "", false
}

// safeFirst moves the safe answer to the front of a dangerous prompt's
// suggestions (adding it if absent), so that no learned answer, however
// often taught, is suggested before declining.
func safeFirst(out []Suggestion, prompt, typ string, context []string) []Suggestion {
	safe, ok := safeAnswer(prompt, typ, context)
	if !ok {
		return out
	}
	first := Suggestion{Input: safe, Confidence: 0.7, Source: SourceDefault, Reasoning: "the safe answer to a dangerous prompt"}
	rest := make([]Suggestion, 0, len(out))
	for _, s := range out {
		if strings.EqualFold(s.Input, safe) {
			first = s
			continue
		}
		rest = append(rest, s)
	}
	return append([]Suggestion{first}, rest...)
}
