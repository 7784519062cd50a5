package terminal

import (
	"math/big"
	"regexp"
	"strings"
)

// The ninth hostile pass: secrets typed on a command line, or shown in a
// prompt's text, in shapes the credential formats of secretValueREs do not
// know. Each shape here is judged by SecretValue (an answer holding one is
// kept as a length and keyed hash) and masked by MaskSecrets.

// shapeREs are secrets found by their place in a command or a sentence.
var shapeREs = []*regexp.Regexp{
	// SQL: ALTER USER … PASSWORD 'x', CREATE USER … IDENTIFIED BY 'x'.
	regexp.MustCompile(`(?i)\b(password|identified\s+by)\s*=?\s*'[^']+'`),
	regexp.MustCompile(`(?i)\b(password|identified\s+by)\s*=?\s*"[^"]+"`),
	// user/password@service (sqlplus, Oracle connect strings), user,password
	// after -u (lftp).
	regexp.MustCompile(`(?:^|[\s'"=])[\w.-]+/[^\s/@'"]+@[\w.-]+`),
	regexp.MustCompile(`\s(-u|--user)\s+[^\s,]+,[^\s,]+`),
	// An Authorization header with any scheme, an API key header.
	regexp.MustCompile(`(?i)\bauthorization\s*[:=]\s*\S+\s+[^\s'"]+`),
	// A card's security code or PIN written after its name: "cvv 123".
	regexp.MustCompile(`(?i)\b(cvv2?|cvc2?|pin)\s+\d{3,8}\b`),
}

// commandShapeREs are secrets by their place on a command line; they are
// judged in typed answers only (a prompt's sentence may say "password for
// alice" without a password in it).
var commandShapeREs = []*regexp.Regexp{
	// A secret word as an argument followed by its value: mysqladmin …
	// password x, openssl passwd -1 x.
	regexp.MustCompile(`(?i)(^|\s)(password|passwd|passphrase|pass|secret|token)\s+(-\S+\s+)*['"]?[^\s'"$<>|;&-]`),
	// -p with a user given: az login -u bob -p x; usermod -p x.
	regexp.MustCompile(`\s(-u|--user|--username)[\s=]+\S+[^;&|]*\s-p\s*['"]?[^\s'"$-]`),
	regexp.MustCompile(`\s-p\s*['"]?[^\s'"$-]\S*[^;&|]*\s(-u|--user|--username)[\s=]`),
	regexp.MustCompile(`\b(usermod|useradd|adduser)\b[^;&|]*\s-p\s+['"]?[^\s'"$-]`),
	// A verb whose bare argument is the secret: vault login x, rclone
	// obscure x, … unlock x (a host name has a dot or a colon).
	regexp.MustCompile(`\b(login|unlock|obscure)\s+['"]?[^\s.\-/'"$:@<>|;&]+['"]?(\s|$)`),
}

// commandLineRE is a line that starts as a command does: variable
// assignments, then a program's name (not a sentence such as "Fix: the
// password reset form").
var commandLineRE = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*[a-z0-9_./~-]+(\s|$)`)

// cardRE finds runs of 13 to 19 digits, spaced or dashed in groups.
var cardRE = regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`)

// ibanRE finds IBAN-shaped runs: country, check digits, 11 to 30 more.
var ibanRE = regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b`)

// base32RE finds base32 runs of 16 or more (TOTP seeds).
var base32RE = regexp.MustCompile(`\b[A-Z2-7]{16,}={0,6}`)

// wordRunRE finds runs of 12 or more short lower-case words: a wallet's
// recovery phrase (BIP39 words are 3 to 8 letters).
var wordRunRE = regexp.MustCompile(`\b[a-z]{3,8}(?:[ \t]+[a-z]{3,8}){11,}\b`)

// shapeSpans returns the spans of the secrets of this file in s; command
// adds the shapes judged in typed command lines only.
func shapeSpans(s string, command bool) [][2]int {
	var out [][2]int
	res := shapeREs
	if command && commandLineRE.MatchString(s) {
		res = append(append([]*regexp.Regexp(nil), shapeREs...), commandShapeREs...)
	}
	for _, re := range res {
		for _, m := range re.FindAllStringIndex(s, 64) {
			for m[0] < m[1] && strings.IndexByte(" \t'\"=", s[m[0]]) >= 0 {
				m[0]++ // the mark a shape starts after stays
			}
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	for _, m := range cardRE.FindAllStringIndex(s, 64) {
		if luhn(s[m[0]:m[1]]) {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	for _, m := range ibanRE.FindAllStringIndex(s, 64) {
		if ibanValid(s[m[0]:m[1]]) {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	for _, m := range base32RE.FindAllStringIndex(s, 64) {
		if base32Seed(s[m[0]:m[1]]) {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	for _, m := range wordRunRE.FindAllStringIndex(s, 16) {
		out = append(out, [2]int{m[0], m[1]})
	}
	return out
}

// luhn reports whether the digits of s pass the Luhn check of card numbers.
func luhn(s string) bool {
	sum, n, double := 0, 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
		double = !double
	}
	return n >= 13 && n <= 19 && sum%10 == 0
}

// ibanValid reports whether s passes the IBAN check (mod 97 of the
// rearranged digits is 1).
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	var b strings.Builder
	for _, r := range s[4:] + s[:4] {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteString(big.NewInt(int64(r - 'A' + 10)).String())
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(b.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

// base32Seed judges a base32 run: letters and digits both (a word in
// capitals is not a seed).
func base32Seed(s string) bool {
	s = strings.TrimRight(s, "=")
	digits := 0
	for _, r := range s {
		if r >= '2' && r <= '7' {
			digits++
		}
	}
	return digits >= 2 && len(s)-digits >= 8
}

// secretRedirectRE finds text written by echo or printf into a file.
var secretRedirectRE = regexp.MustCompile(`\b(echo|printf)\b[^|;&>]*>>?\s*['"]?([^\s'"|;&]+)`)

// secretRedirect reports whether a command writes text into a file whose
// name asks for a secret (echo x > ~/.vault_pass).
func secretRedirect(v string) bool {
	for _, m := range secretRedirectRE.FindAllStringSubmatch(v, 16) {
		name := m[2]
		if i := strings.LastIndexAny(name, `/\`); i >= 0 {
			name = name[i+1:]
		}
		if secretPromptLabel(strings.TrimLeft(name, ".")) != "" || gluedSecretName(name) {
			return true
		}
	}
	return false
}

// gluedStems are the parts of identifiers that name a secret when glued
// to other words without a separator (ADMINPASS, rootpw, dbpwd,
// AUTHTOKEN, PRIVKEY); gluedExceptions are ordinary words holding one.
var (
	gluedStems      = []string{"pass", "pwd", "token", "secret", "apikey", "privkey", "privatekey", "credential", "cookie", "hmac", "salt", "pepper"}
	gluedExceptions = []string{"passenger", "bypass", "compass", "passthrough", "passive", "oldpwd", "tokenizer", "tokens", "saltstack"}
)

// gluedSecretName reports whether an identifier names a secret by a glued
// stem, or ends in "pw" (rootpw, masterpw).
func gluedSecretName(name string) bool {
	n := strings.ToLower(name)
	if n == "pwd" {
		return false // the working directory
	}
	for _, e := range gluedExceptions {
		n = strings.ReplaceAll(n, e, "")
	}
	for _, s := range gluedStems {
		if strings.Contains(n, s) {
			return true
		}
	}
	letters := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		return -1
	}, n)
	return strings.HasSuffix(letters, "pw") || strings.HasSuffix(letters, "pwd")
}

// The sixteenth hostile pass: a prompt ending in '>' is shaped like a
// REPL's ("mysql> ", "ftp> "), so judgePrompt takes what is typed at it
// for commands, and a secret word glued into its name went unseen:
// "MASTERKEY> ", "SIGNINGKEY> ", "ADMINPASS> ", "mypass> ", "keystore> "
// kept their answers in clear and suggested them back. replSecretLabel
// judges such a name before it is taken for a REPL's.

// replGlued are the words that make a '>' prompt's name secret when
// found anywhere in it (folded): the glued stems, "key", and the single
// strong and weak secret words of secretLanguages written in Latin,
// Greek or Cyrillic letters, of four letters or more (a shorter one is
// too often part of another word: "pin" in "spinner", "cle" in
// "oracle"). replGluedExceptions are names of ordinary programs and
// words that hold one ("cqlsh:mykeyspace> ", "monkey", "opcode").
var (
	replGlued           = compileReplGlued()
	replGluedExceptions = append([]string{"keyspace", "keyboard", "keyword", "keynote", "monkey", "donkey", "turkey", "hockey",
		"jockey", "whiskey", "opcode", "bytecode", "unicode", "vscode", "barcode", "encode", "decode", "postcode", "zipcode",
		"passage", "keycloak", "passport", "hotkey", "keychain", "keymap", "keypad", "keystroke", "turnkey",
		"hockey", "passenger", "passover", "compass", "bypass"}, gluedExceptions...)
)

func compileReplGlued() []string {
	seen := map[string]bool{"key": true}
	out := append([]string{"key"}, gluedStems...)
	for _, s := range gluedStems {
		seen[s] = true
	}
	for _, l := range secretLanguages {
		for _, w := range append(append([]string(nil), l.strong...), l.weak...) {
			f := strings.Trim(fold(w), "*")
			if strings.ContainsAny(f, " *") || !allWordScript(f) || len([]rune(f)) < 4 || seen[f] {
				continue
			}
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// replSecretLabel is why a prompt whose last line ends in '>' asks for a
// secret ("" when it does not): the name before the '>' (its last word)
// is or holds a secret word glued to others (replGlued), or is a glued
// secret identifier (gluedSecretName: ADMINPASS, rootpw). A name that is
// a path is a shell's working directory ("PS C:\Users\bob> "), not a
// question.
func replSecretLabel(prompt string) string {
	line := strings.TrimRight(prompt, " \t\r\n")
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if !strings.HasSuffix(line, ">") {
		return ""
	}
	// psql's "db=> " and "db=# " name a database, not a field.
	fields := strings.Fields(strings.TrimRight(strings.TrimRight(line, "> \t"), "=-#"))
	if len(fields) == 0 {
		return ""
	}
	name := fields[len(fields)-1]
	if strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, "~") {
		return ""
	}
	if gluedSecretName(name) {
		return "glued:" + name
	}
	n := fold(name)
	for _, e := range replGluedExceptions {
		n = strings.ReplaceAll(n, e, " ")
	}
	for _, w := range replGlued {
		if strings.Contains(n, w) {
			return "glued:" + w
		}
	}
	return ""
}
