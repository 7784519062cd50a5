package terminal

import (
	"math"
	"regexp"
	"strings"
)

// secretPromptRE matches prompts that ask for a secret, however worded:
// passwords and passphrases, PINs, tokens and keys, one-time and
// verification codes, two-factor prompts. It is judged on the prompt
// itself, so a client's prompt_type can add redaction but never remove it.
var secretPromptRE = regexp.MustCompile(`(?i)\b(` +
	`pass(word|wd|phrase|code)|pass ?phrase|pin( code| number)?|` +
	`secret|token|api[ _-]?key|access[ _-]?key|private[ _-]?key|secret[ _-]?key|auth(entication|orization)?[ _-]?(code|key|token)|` +
	`credentials?|otp|totp|hotp|one[ -]?time|2fa|mfa|two[ -]?factor|multi[ -]?factor|` +
	`verification[ _-]?code|security[ _-]?code|confirmation[ _-]?code|recovery[ _-]?code|backup[ _-]?code|` +
	`authenticator|yubikey|pinentry` +
	`)\b`)

// SecretPrompt reports whether a prompt asks for a secret, from its text:
// "Password for 'https://user@host':", "API token:", "Enter passphrase
// for key", "Secret access key", "Verification code", "Enter PIN", a 2FA
// or one-time code, "[sudo] password for alice:".
func SecretPrompt(prompt string) bool {
	return secretPromptRE.MatchString(clipEnd(prompt, MaxLineBytes))
}

// secretValueREs are formats of credentials that are secret wherever they
// are typed.
var secretValueREs = []*regexp.Regexp{
	regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), // AWS access key id
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}`),                              // GitHub tokens
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`),                            // GitHub fine-grained token
	regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{16,}`),                                // GitLab
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`),                           // Slack
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`),                                   // OpenAI-style secret keys
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`),                                 // Google API key
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), // JWT
	regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----`),            // PEM / PGP private keys
	regexp.MustCompile(`\b[0-9a-fA-F]{32,}\b`),                                      // long hex runs (keys, hashes of secrets)
}

// base64RunRE finds long base64 or base64url runs (keyMaterial judges
// them).
var base64RunRE = regexp.MustCompile(`[A-Za-z0-9+/_-]{32,}={0,2}`)

// SecretValue reports whether a typed value looks like a secret whatever
// the prompt said: a known credential format (AWS, GitHub, GitLab, Slack,
// JWT, PEM private key), a long hex or base64 run, or a high-entropy word.
// It errs on the side of redacting: a false positive costs one learned
// answer, a false negative leaks a credential.
func SecretValue(v string) bool {
	v = clipEnd(v, MaxInputBytes)
	for _, re := range secretValueREs {
		if re.MatchString(v) {
			return true
		}
	}
	for _, run := range base64RunRE.FindAllString(v, -1) {
		if keyMaterial(run) {
			return true
		}
	}
	for _, w := range strings.Fields(v) {
		if highEntropy(w) {
			return true
		}
	}
	return false
}

// highEntropy judges one word: long enough, varied in character classes
// and close to random. A path is judged by its components, so
// "/home/Alice/Projects-2" stays a path while a token inside one does not.
func highEntropy(w string) bool {
	if strings.ContainsRune(w, '/') {
		for _, part := range strings.Split(w, "/") {
			if highEntropy(part) {
				return true
			}
		}
		return false
	}
	n := len(w)
	switch {
	case n >= 20:
		return charClasses(w) >= 2 && entropy(w) >= 3.5
	case n >= 12:
		return charClasses(w) >= 4 && entropy(w) >= 3.2
	}
	return false
}

// charClasses counts the character classes of s: lower, upper, digit, other.
func charClasses(s string) int {
	var lo, up, dg, ot int
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lo = 1
		case r >= 'A' && r <= 'Z':
			up = 1
		case r >= '0' && r <= '9':
			dg = 1
		default:
			ot = 1
		}
	}
	return lo + up + dg + ot
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// TTYState is what the hub read from the pty when the input was typed;
// nil fields are unknown.
type TTYState struct {
	EchoOff       *bool
	CanonicalMode *bool
}

// secretTTY reports whether the pty was in the state of a getpass-style
// secret prompt: echo off in canonical (line) mode, or echo off with the
// mode unknown. Echo off in raw mode is what line editors and full-screen
// programs do (they echo themselves), so it is no evidence on its own.
func (t TTYState) secretTTY() bool {
	if t.EchoOff == nil || !*t.EchoOff {
		return false
	}
	return t.CanonicalMode == nil || *t.CanonicalMode
}

// IsSecret decides whether an answer is secret: the prompt type says
// password (the client's hint or the detector's verdict), the prompt's
// wording asks for a secret, the pty had echo off, or the value looks like
// a credential. Any one is enough.
func IsSecret(prompt, typ, input string, tty TTYState) bool {
	return typ == TypePassword || SecretPrompt(prompt) || tty.secretTTY() || SecretValue(input)
}

// keyMaterial judges a long base64-alphabet run: letters of both cases
// and digits, close to random, and not a path (a path starts with '/' and
// its words repeat letters, which keeps its entropy low).
func keyMaterial(run string) bool {
	if strings.HasPrefix(run, "/") || strings.HasPrefix(run, "-") {
		return false
	}
	alnum := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, run)
	return charClasses(alnum) >= 3 && entropy(run) >= 4.2
}
