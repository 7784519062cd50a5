package terminal

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// foldRunes are letters that fold to others without a Unicode
// decomposition: ß, ł, đ, ø, æ, œ, ı, Greek final sigma, and the Arabic
// and Persian letters written more than one way (ta marbuta, alif maqsura,
// Persian yeh and keheh); the tatweel (a stretching stroke) goes.
var foldRunes = map[rune]string{
	'ß': "ss", 'ł': "l", 'đ': "d", 'ð': "d", 'ø': "o", 'æ': "ae", 'œ': "oe", 'ı': "i", 'ħ': "h", 'ς': "σ",
	'ة': "ه", 'ى': "ي", 'ی': "ي", 'ک': "ك", 'ـ': "",
}

// fold is the form prompts and secret words are compared in: NFKC (so
// fullwidth letters and punctuation such as "：" become their plain
// forms), lower case, format characters (zero-width joiners, soft
// hyphens) dropped, the accents of Latin, Greek and Cyrillic letters and
// the vowel marks of Arabic and Hebrew dropped, and foldRunes applied.
// The marks of other scripts (Indic vowel signs, Japanese voicing marks)
// are part of their letters and stay.
func fold(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	s = strings.ToLower(norm.NFKC.String(s))
	var b strings.Builder
	b.Grow(len(s))
	var base rune
	for _, r := range norm.NFD.String(s) {
		switch {
		case unicode.Is(unicode.Mn, r):
			if stripsMarks(base) {
				continue
			}
		case unicode.Is(unicode.Cf, r):
			continue
		default:
			base = r
			if f, ok := foldRunes[r]; ok {
				b.WriteString(f)
				continue
			}
		}
		b.WriteRune(r)
	}
	return norm.NFC.String(b.String())
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// stripsMarks reports whether the combining marks after base are accents
// or vowel points that words are written with or without.
func stripsMarks(base rune) bool {
	return unicode.In(base, unicode.Latin, unicode.Greek, unicode.Cyrillic, unicode.Arabic, unicode.Hebrew)
}

// wordScript reports whether r belongs to a script whose words are
// matched as words (Latin, Greek, Cyrillic, digits); the words of every
// other script are matched as substrings.
func wordScript(r rune) bool {
	return unicode.In(r, unicode.Latin, unicode.Greek, unicode.Cyrillic) || unicode.IsDigit(r)
}

// promptDoc is a prompt made ready for matching: its words (the parts of
// identifiers split at '_', '-', camelCase and digit boundaries and at a
// change of script, in order), the whole identifiers too, and the folded
// text without spaces for the scripts matched as substrings.
type promptDoc struct {
	parts []string        // folded words in order, for phrases
	words map[string]bool // parts and whole identifiers
	text  string          // folded text, spaces removed
}

func newPromptDoc(s string) promptDoc {
	d := promptDoc{words: map[string]bool{}}
	s = norm.NFKC.String(s)
	raw := strings.FieldsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || unicode.Is(unicode.Cf, r))
	})
	folded := map[string][]string{} // a repeated word is split and folded once
	for _, tok := range raw {
		fs, ok := folded[tok]
		if !ok {
			parts := splitIdentifier(tok)
			for _, p := range parts {
				if f := fold(p); f != "" {
					fs = append(fs, f)
					d.words[f] = true
				}
			}
			if len(parts) > 1 {
				d.words[fold(tok)] = true
			}
			folded[tok] = fs
		}
		d.parts = append(d.parts, fs...)
	}
	d.text = strings.Join(strings.Fields(fold(s)), "")
	return d
}

// splitIdentifier splits a word at camelCase boundaries ("adminPwd",
// "DBPassword"), between letters and digits ("Password1") and where the
// script changes ("PIN码"). Marks stay with their letter.
func splitIdentifier(tok string) []string {
	rs := []rune(tok)
	var out []string
	start := 0
	class := func(r rune) int {
		switch {
		case unicode.IsDigit(r):
			return 1
		case wordScript(r):
			return 2
		default:
			return 3
		}
	}
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		if unicode.IsMark(cur) || unicode.Is(unicode.Cf, cur) {
			continue
		}
		cut := false
		switch {
		case unicode.IsMark(prev) || unicode.Is(unicode.Cf, prev):
			// A mark continues the word of the letter before it.
		case class(prev) != class(cur):
			cut = true
		case unicode.IsLower(prev) && unicode.IsUpper(cur):
			cut = true
		case unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			cut = true
		}
		if cut {
			out = append(out, string(rs[start:i]))
			start = i
		}
	}
	return append(out, string(rs[start:]))
}

// lexicon is a compiled list of secret, weak or benign words.
//
// Syntax of a word (after folding): in Latin, Greek or Cyrillic script,
// "w" matches a word or identifier part equal to w, "w*" one starting with
// w, "*w*" one containing w (compounds: "Datenbankpasswort"), and several
// words are a phrase matched against consecutive words, each exact or,
// ending in '*', a prefix. A word with a letter of any other script is
// matched as a substring of the prompt with its spaces removed, so no word
// boundary is ever asked of Chinese, Japanese, Thai or Korean.
type lexicon struct {
	exact      map[string]string
	prefixes   []lexWord
	infixes    []lexWord
	phrases    map[string][]lexPhrase // by first word (exact) or "" (a prefix first word)
	substrings []lexWord
}

type lexWord struct{ w, label string }

type lexPhrase struct {
	words  []string // folded; a trailing '*' makes a prefix
	label  string
	prefix bool // first word is a prefix
}

// compileLexicon compiles the words pick chooses of every language; a
// word that folds to nothing or mixes the syntaxes is a programming error.
func compileLexicon(langs []secretLanguage, pick func(secretLanguage) []string) (*lexicon, error) {
	lx := &lexicon{exact: map[string]string{}, phrases: map[string][]lexPhrase{}}
	for _, l := range langs {
		for _, w := range pick(l) {
			label := l.code + ":" + w
			f := fold(w)
			if strings.TrimSpace(strings.Trim(f, "*")) == "" {
				return nil, fmt.Errorf("terminal: secret word %q folds to nothing", label)
			}
			if !allWordScript(f) {
				lx.substrings = append(lx.substrings, lexWord{strings.Join(strings.Fields(f), ""), label})
				continue
			}
			fs := strings.Fields(strings.NewReplacer("'", " ", "-", " ", "_", " ").Replace(f))
			switch {
			case len(fs) > 1:
				p := lexPhrase{words: fs, label: label}
				first := fs[0]
				if strings.HasSuffix(first, "*") {
					p.prefix, first = true, ""
				}
				lx.phrases[first] = append(lx.phrases[first], p)
			case strings.HasPrefix(f, "*") && strings.HasSuffix(f, "*"):
				lx.infixes = append(lx.infixes, lexWord{strings.Trim(f, "*"), label})
			case strings.HasSuffix(f, "*"):
				lx.prefixes = append(lx.prefixes, lexWord{strings.TrimSuffix(f, "*"), label})
			case strings.Contains(f, "*"):
				return nil, fmt.Errorf("terminal: secret word %q: '*' only at the ends", label)
			default:
				lx.exact[f] = label
			}
		}
	}
	return lx, nil
}

// allWordScript reports whether every letter of s is Latin, Greek or
// Cyrillic.
func allWordScript(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) && !wordScript(r) {
			return false
		}
	}
	return true
}

func mustLexicon(pick func(secretLanguage) []string) *lexicon {
	lx, err := compileLexicon(secretLanguages, pick)
	if err != nil {
		panic(err)
	}
	return lx
}

var (
	strongLex = mustLexicon(func(l secretLanguage) []string { return l.strong })
	weakLex   = mustLexicon(func(l secretLanguage) []string { return l.weak })
	benignLex = mustLexicon(func(l secretLanguage) []string { return l.benign })
)

// match returns the label of the first word of lx found in d.
func (lx *lexicon) match(d promptDoc) (string, bool) {
	for w := range d.words {
		if l, ok := lx.exact[w]; ok {
			return l, true
		}
		for _, p := range lx.prefixes {
			if strings.HasPrefix(w, p.w) {
				return p.label, true
			}
		}
		for _, p := range lx.infixes {
			if strings.Contains(w, p.w) {
				return p.label, true
			}
		}
	}
	for i := range d.parts {
		for _, p := range lx.phrases[d.parts[i]] {
			if p.matchAt(d.parts, i) {
				return p.label, true
			}
		}
		for _, p := range lx.phrases[""] {
			if p.matchAt(d.parts, i) {
				return p.label, true
			}
		}
	}
	for _, s := range lx.substrings {
		if strings.Contains(d.text, s.w) {
			return s.label, true
		}
	}
	return "", false
}

func (p lexPhrase) matchAt(parts []string, i int) bool {
	if i+len(p.words) > len(parts) {
		return false
	}
	for j, w := range p.words {
		got := parts[i+j]
		if pre, ok := strings.CutSuffix(w, "*"); ok {
			if !strings.HasPrefix(got, pre) {
				return false
			}
		} else if got != w {
			return false
		}
	}
	return true
}

// yesNoRE finds the answers a yes/no prompt offers: [y/N], (yes/no),
// [s/N], [J/n], [Д/н], [是/否], (o/n), [y,n,q].
var yesNoRE = regexp.MustCompile(`[\[(]\s*\pL{1,4}\s*[/|,]\s*\pL{1,4}\s*[/|,\])]`)

// secretPromptLabel is why a prompt asks for a secret ("" when it does
// not): a strong secret word, or a weak one with no benign word and no
// yes/no answer offered. It judges the prompt's last MaxPromptBytes.
func secretPromptLabel(prompt string) string {
	prompt = clipEnd(prompt, MaxPromptBytes)
	if !utf8.ValidString(prompt) {
		prompt = strings.ToValidUTF8(prompt, "\uFFFD")
	}
	if l := lexiconLabel(prompt); l != "" {
		return l
	}
	// A secret word in disguise: look-alike letters of another script,
	// leet digits, letters spaced apart ("Раssword:", "p@ssw0rd:",
	// "P a s s w o r d:").
	if u, ok := unconfuse(prompt); ok {
		if l := lexiconLabel(u); l != "" {
			return l
		}
	}
	return replSecretLabel(prompt)
}

// lexiconLabel is secretPromptLabel's judgement of prompt as written.
func lexiconLabel(prompt string) string {
	d := newPromptDoc(prompt)
	if l, ok := strongLex.match(d); ok {
		return l
	}
	l, ok := weakLex.match(d)
	if !ok {
		return ""
	}
	if _, benign := benignLex.match(d); benign || yesNoRE.MatchString(d.text) {
		return ""
	}
	return l
}
