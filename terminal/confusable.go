package terminal

import (
	"regexp"
	"strings"
	"unicode"
)

// confusables are the Cyrillic and Greek letters that look like Latin
// ones, as a prompt spoofing "Password:" would use them (Cyrillic "Р"
// and "а" in "Раssword:").
var confusables = map[rune]rune{
	'а': 'a', 'в': 'b', 'е': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x',
	'і': 'i', 'ј': 'j', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T', 'У': 'Y', 'Х': 'X',
	'І': 'I', 'Ј': 'J', 'Ѕ': 'S', 'Ԁ': 'D', 'Ԛ': 'Q', 'Ԝ': 'W',
	'α': 'a', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'ν': 'v', 'κ': 'k', 'ι': 'i',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
}

// leet are the digits and signs written for letters ("p@ssw0rd").
var leet = map[rune]rune{'0': 'o', '@': 'a', '$': 's', '5': 's', '3': 'e', '4': 'a', '1': 'i', '7': 't'}

// spacedRE finds three or more single letters spaced apart ("P a s s w o r d").
var spacedRE = regexp.MustCompile(`(?:^|[^\pL])((?:\pL ){2,}\pL)(?:[^\pL]|$)`)

// unconfuse undoes the disguises a prompt may put on a secret word: a
// word of Latin letters with Cyrillic or Greek look-alikes among them
// gets the Latin ones, a word with letters and leet digits or signs gets
// the letters, and letters spaced one by one are joined. A word wholly in
// one script, a number, a path of digits are left as they are; ok is
// false when nothing changed.
func unconfuse(prompt string) (string, bool) {
	out := spacedRE.ReplaceAllStringFunc(prompt, func(m string) string {
		sub := spacedRE.FindStringSubmatchIndex(m)
		return m[:sub[2]] + strings.ReplaceAll(m[sub[2]:sub[3]], " ", "") + m[sub[3]:]
	})
	fields := strings.FieldsFunc(out, unicode.IsSpace)
	seen := map[string]bool{}
	for _, w := range fields {
		if seen[w] {
			continue
		}
		seen[w] = true
		if u := unconfuseWord(w); u != w {
			out = strings.ReplaceAll(out, w, u)
		}
	}
	return out, out != prompt
}

// unconfuseWord maps look-alikes and leet in a word that mixes them with
// Latin letters.
func unconfuseWord(w string) string {
	latin, lookalike, leetish := 0, 0, 0
	for _, r := range w {
		switch {
		case r < 128 && unicode.IsLetter(r):
			latin++
		case confusables[r] != 0:
			lookalike++
		case leet[r] != 0:
			leetish++
		}
	}
	if latin < 2 || lookalike+leetish == 0 || unicode.IsDigit([]rune(w)[0]) {
		return w
	}
	return strings.Map(func(r rune) rune {
		if c := confusables[r]; c != 0 {
			return c
		}
		if c := leet[r]; c != 0 {
			return c
		}
		return r
	}, w)
}
