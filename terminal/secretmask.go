package terminal

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SecretMask replaces a secret found inside a prompt's text.
const SecretMask = "[secret]"

// wordRE finds the words of a text (runs of non-space).
var wordRE = regexp.MustCompile(`\S+`)

// trailingPunctRE is the punctuation a word of a sentence may end with.
var trailingPunctRE = regexp.MustCompile(`[.,:;!?)\]]+$`)

// segmentRE splits a word into the parts identifiers and names are made
// of ("feature/ISSUE-1234-add-login", "config-management.yaml").
var segmentRE = regexp.MustCompile(`[-_.:/'’]+`)

// structured reports whether every part of w is letters only or digits
// only: a compound word, a file or branch name, an issue key. The entropy
// test of highEntropy is meant for typed values and judges such long
// names random; a key or token mixes letters and digits in its parts
// ("7Fq2-Kx9P-Lm4Z").
func structured(w string) bool {
	for _, seg := range segmentRE.Split(w, -1) {
		if seg == "" {
			continue
		}
		letters, digits := true, true
		for _, r := range seg {
			letters = letters && unicode.IsLetter(r)
			digits = digits && r >= '0' && r <= '9'
		}
		if !letters && !digits {
			return false
		}
	}
	return true
}

// MaskSecrets returns text with the secrets inside it replaced by
// SecretMask: a known credential format or a password on a command line
// (secretValueREs; the match runs to the end of the word it ends in), key
// material, a high-entropy word, or an assignment to a name that asks for
// a secret (PGPASSWORD=…), a secret by its shape (shapeSpans: a card
// number, user/password@service...), and a value shown after a label that
// asks for a secret in any language, or after any colon of a prompt that
// asks for one (labelledValues: "Пароль: qwerty123", "Your temporary
// password is: Xk4mPq9z", "WiFi PSK is sunshine2024"). It is what is kept
// of a prompt's own text: a
// prompt may show a token, a recovery key, or the command line typed
// above it (the seventh hostile pass found them stored in clear while the
// same values typed as the answer were redacted). Text without secrets is
// returned unchanged.
func MaskSecrets(text string) string {
	// Spans of the known formats first, each widened to the end of its
	// last word, so "-pS" of "mysql -pSecret" covers the whole password.
	var spans [][2]int
	for _, re := range secretValueREs {
		for _, m := range re.FindAllStringIndex(text, 64) {
			end := m[1]
			for end < len(text) && !isSpaceByte(text[end]) {
				end++
			}
			spans = append(spans, [2]int{m[0], end})
		}
	}
	for _, m := range wordRE.FindAllStringIndex(text, -1) {
		if secretWord(text[m[0]:m[1]]) {
			spans = append(spans, [2]int{m[0], m[1]})
		}
	}
	spans = append(spans, shapeSpans(text, false)...)
	spans = append(spans, labelledValues(text)...)
	spans = append(spans, shownAnswers(text)...)
	if len(spans) == 0 {
		return text
	}
	masked := make([]bool, len(text))
	for _, s := range spans {
		for i := s[0]; i < s[1]; i++ {
			masked[i] = true
		}
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		if !masked[i] {
			b.WriteByte(text[i])
			i++
			continue
		}
		b.WriteString(SecretMask)
		for i < len(text) && masked[i] {
			i++
		}
	}
	return b.String()
}

// secretWord judges one word of a prompt's text, less the punctuation
// it ends with ("Password1:" is a label, not a value).
func secretWord(w string) bool {
	w = trailingPunctRE.ReplaceAllString(w, "")
	if w == "" || structured(w) {
		return false
	}
	for _, run := range base64RunRE.FindAllString(w, -1) {
		if keyMaterial(run) {
			return true
		}
	}
	return highEntropy(w) || secretAssignment(w)
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// labelSepRE finds what separates a label from the value it shows: a
// colon, an equals sign, or a copula ("is", "ist", "lautet", "est", "是").
var labelSepRE = regexp.MustCompile(`(?i)([:：=]|\s(is|are|was|ist|lautet|est|es|é|è|är|er|jest|je|это|是|は|为|為))[ \t]*`)

// clauseEnd is where a label's clause starts: the end of the sentence or
// line before it.
const clauseEnd = ".!?;,\n。！？；，"

// maxLabelBytes is how much text before a separator labelledValues
// judges as its label.
const maxLabelBytes = 96

// valueRunRE is a value shown after a label: non-space characters up to a
// full-width sentence mark.
var valueRunRE = regexp.MustCompile(`^[^\s。，；！？、]+`)

// shownAnswers returns the spans of the defaults and offered answers a
// prompt that asks for a secret shows in brackets ("Password
// [Sunflower42]:", "Passphrase [alpha/bravo7x]:", "PIN (1234):"): typed
// back, each is the secret itself (the tenth hostile pass found the answer
// redacted and the same value kept in the prompt's text). A yes/no word,
// a single character, a numbered range, a word that says nothing is set
// ([None], [keep]) and a tag that opens the line ("[sudo] password for
// bob:") are not secrets, nor is the mask itself; a note with spaces
// ("(or 'skip')", "(4 digits)") is labelledValues' to judge.
func shownAnswers(text string) [][2]int {
	if !strings.ContainsAny(text, "[(<（") {
		return nil
	}
	var out [][2]int
	for _, m := range bracketRE.FindAllStringSubmatchIndex(text, 64) {
		c := text[m[2]:m[3]]
		if text[m[0]:m[1]] == SecretMask || strings.TrimSpace(text[strings.LastIndexByte(text[:m[0]], '\n')+1:m[0]]) == "" {
			continue
		}
		if strings.TrimSpace(c) == "" || strings.ContainsAny(c, " \t") || rangeRE.MatchString(c) {
			continue
		}
		at := m[2]
		for _, o := range strings.FieldsFunc(c, func(r rune) bool { return r == '/' || r == '|' || r == ',' }) {
			i := at + strings.Index(text[at:m[3]], o)
			at = i + len(o)
			if w := strings.Trim(o, "<>[]'\""); utf8.RuneCountInString(w) > 1 && !yesNoWords[fold(w)] && !unsetWords[fold(w)] {
				out = append(out, [2]int{i, at})
			}
		}
	}
	// Judging the words costs more than finding the brackets: only a
	// prompt that shows a candidate is judged.
	if len(out) == 0 || !SecretPrompt(text) {
		return nil
	}
	return out
}

// unsetWords are defaults that say no value is set or kept as it is.
var unsetWords = map[string]bool{
	"none": true, "null": true, "nil": true, "empty": true, "blank": true, "unset": true, "n/a": true, "keep": true,
	"current": true, "unchanged": true, "default": true, "hidden": true, "skip": true, "auto": true, "random": true,
	"generate": true, "generated": true,
}

// labelledValues returns the spans of values shown after a label that
// asks for a secret (its clause judged by secretPromptLabel), or after any
// colon followed by a space when the whole text asks for one.
func labelledValues(text string) [][2]int {
	var out [][2]int
	whole := -1 // SecretPrompt(text), judged once when needed
	for _, m := range labelSepRE.FindAllStringSubmatchIndex(text, 64) {
		vs := m[1]
		if vs >= len(text) || m[1] == m[0]+1 && text[m[0]] == '=' {
			continue // nothing after it; NAME=VALUE is secretAssignment's
		}
		run := valueRunRE.FindString(text[vs:])
		run = strings.TrimRight(run, ".,;:!?)]'\"")
		if run == "" || strings.HasPrefix(text[vs:], SecretMask) {
			continue
		}
		start := strings.LastIndexAny(text[:m[0]], clauseEnd) + 1
		if m[4] >= 0 {
			// A copula: the word right before it is the label ("PSK is x",
			// not "Token x is about").
			start = strings.LastIndexAny(text[:m[0]], clauseEnd+" \t") + 1
		}
		// A label is short: judging at most maxLabelBytes before each of
		// up to 64 separators bounds the work a 4 KiB prompt can cause.
		if m[0]-start > maxLabelBytes {
			start = m[0] - maxLabelBytes
			for start < m[0] && !utf8.RuneStart(text[start]) {
				start++
			}
		}
		// A mask already in the text is no label ("Token [secret] is").
		secret := secretPromptLabel(strings.ReplaceAll(text[start:m[0]], SecretMask, " ")) != ""
		if g := text[m[2]:m[3]]; !secret && (g == ":" || g == "：") && m[1] > m[3] {
			if whole < 0 {
				whole = 0
				if SecretPrompt(text) {
					whole = 1
				}
			}
			secret = whole == 1
		}
		if secret {
			out = append(out, [2]int{vs, vs + len(run)})
		}
	}
	return out
}
