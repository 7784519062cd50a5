package terminal

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strings"
)

// SecretPrompt reports whether a prompt asks for a secret, from its
// words in any of the languages of secretLanguages: "Password:",
// "Passwort:", "Пароль:", "パスワード:", "密码：", "Mot de passe :",
// "Enter DB_PASSWORD:", "adminPwd:", "Enter vault unseal key:", "Enter
// PIN:", a one-time or verification code. A strong word (password, PIN
// code, secret, credentials, unseal...) is enough; a weak one (key, code,
// token, PIN, pass) is enough unless a benign word says what else is
// meant ("Enter file in which to save the key", "Country code", "Max
// tokens") or the prompt offers yes/no answers ("Pin the version? [y/N]").
// A prompt ending in '>' whose name holds a secret word glued to others
// ("MASTERKEY> ", "mypass> ", "keystore> ") asks for one too, though it
// is shaped like a REPL's (replSecretLabel).
// It is judged on the prompt itself, so a client's prompt_type can add
// redaction but never remove it.
func SecretPrompt(prompt string) bool {
	return secretPromptLabel(prompt) != ""
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
	regexp.MustCompile(`\b[rs]k_(live|test)_[0-9A-Za-z]{10,}`),                      // Stripe secret and restricted keys
	regexp.MustCompile(`\bhf_[A-Za-z0-9]{30,}`),                                     // Hugging Face
	regexp.MustCompile(`\bnpm_[A-Za-z0-9]{30,}`),                                    // npm
	regexp.MustCompile(`\bpypi-[A-Za-z0-9_-]{30,}`),                                 // PyPI
	regexp.MustCompile(`\bhvs\.[A-Za-z0-9_-]{20,}`),                                 // Vault service token
	regexp.MustCompile(`\bya29\.[0-9A-Za-z_-]{20,}`),                                // Google OAuth access token
	regexp.MustCompile(`\bSG\.[\w-]{16,}\.[\w-]{16,}`),                              // SendGrid
	regexp.MustCompile(`\bshp(at|ca|pa|ss)_[a-fA-F0-9]{32}`),                        // Shopify
	regexp.MustCompile(`\bgl(ptt|dt|rt|cbt)-[A-Za-z0-9_-]{16,}`),                    // GitLab trigger, deploy, runner tokens
	regexp.MustCompile(`\bAGE-SECRET-KEY-1[0-9A-Z]{50,}`),                           // age identity
	regexp.MustCompile(`(?i)\b(AccountKey|SharedAccessKey)=[^;\s]{16,}`),            // Azure connection strings
	regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s/:@]*:[^\s/@]+@`),             // URL with a password (postgres://u:pw@host)
	regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`),             // Authorization header values
	// A password on a command line, by the flag its program reads it
	// from (the third hostile pass found these kept whole when the
	// password itself looked ordinary). A flag that makes the program
	// ask for the password (mysql -p alone) is not one.
	regexp.MustCompile(`\b(mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^;&|]*\s-p\S`), // -pPASSWORD
	regexp.MustCompile(`\bsshpass\b[^;&|]*\s-p\s*\S`),
	regexp.MustCompile(`\b(mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport)\b[^;&|]*\s-p\s+[^-\s]`),
	regexp.MustCompile(`\bredis-cli\b[^;&|]*\s-a\s+\S`),
	regexp.MustCompile(`\b(curl|wget)\b[^;&|]*\s(-u|--user)[\s=]+[^\s:]+:\S`), // user:password
	regexp.MustCompile(`\bsmbclient\b[^;&|]*\s-U\s*\S+%\S`),                   // user%password
	regexp.MustCompile(`\bhtpasswd\b[^;&|]*\s-[a-zA-Z]*b`),                    // batch mode: the password is an argument
	regexp.MustCompile(`\bopenssl\b[^;&|]*\s-k\s+\S`),
	regexp.MustCompile(`\bldap[a-z]*\b[^;&|]*\s-w\s+\S`),
	regexp.MustCompile(`\bsqlcmd\b[^;&|]*\s-P\s*\S`),
	regexp.MustCompile(`\b(docker|podman|nerdctl|helm)\s+(registry\s+)?login\b[^;&|]*\s-p\s+\S`),
	regexp.MustCompile(`\bssh-keygen\b[^;&|]*\s-[NP]\s*['"]?[^\s'"]`), // new and old passphrase; -N '' is none
	// The fifth hostile pass: more programs' password flags, and a
	// password written into a program that reads it from its input (echo
	// or printf into a pipe, a here-string). A variable ($PW) is not one.
	regexp.MustCompile(`\b(keytool|jarsigner)\b[^;&|]*\s-(store|key|srcstore|deststore|srckey|destkey)pass\s+\S`),
	regexp.MustCompile(`\b(zip|unzip|zipcloak)\b[^;&|]*\s-P\s*\S`),
	regexp.MustCompile(`\b(rar|unrar|7z|7za|7zr)\b[^;&|]*\s-p[^\s-]`), // -p alone asks, -p- asks nothing
	regexp.MustCompile(`\bmosquitto_(pub|sub|rr)\b[^;&|]*\s-P\s+\S`),
	regexp.MustCompile(`\bnmcli\b[^;&|]*\s(password|psk|wifi-sec\.psk|802-11-wireless-security\.psk)\s+\S`),
	regexp.MustCompile(`\bwpa_passphrase\s+\S+\s+\S`),
	regexp.MustCompile(`(?i)\bnet\s+user\s+\S+\s+[^\s/*]`), // net user NAME PASSWORD; * asks
	regexp.MustCompile(`\b(echo|printf)(\s+-[a-zA-Z]+)*\s+['"]?[^\s$'"|;&][^|;&]*\|\s*` + stdinPasswordReader),
	regexp.MustCompile(stdinPasswordReader + `[^;&|]*<<<\s*['"]?[^\s$'"]`),
	// The tenth hostile pass: a password hash given to useradd or usermod
	// (crackable offline), and rclone's KEY VALUE pairs, whose secret keys
	// (pass, secret_access_key, client_secret, token...) name no flag.
	regexp.MustCompile(`\b(useradd|usermod)\b[^;&|]*\s(-p|--password)(\s+|=)['"]?[^\s'"-]`),
	regexp.MustCompile(`(?i)\brclone\s+config\s+(create|update|password)\b[^;&|]*\s\S*(pass|secret|token|key)\S*\s+['"]?[^\s'"]`),
	// The sixteenth hostile pass: Windows' net use, whose password is the
	// bare word after the share (before or after its /options; * asks),
	// and cmdkey's /pass:.
	regexp.MustCompile(`(?i)\bnet\s+use\b[^;&|]*?\s\\\\\S+(\s+/\S+)*\s+['"]?[^\s/*'"]`),
	regexp.MustCompile(`(?i)\bcmdkey\b[^;&|]*\s/pass:['"]?[^\s'"]`),
	// httpie's user:password, a Wi-Fi key given to iwconfig (s:ASCII or
	// hex; off, on and open are no key) or to wpa_cli.
	regexp.MustCompile(`\b(http|https|xh|xhs)\b[^;&|]*\s(-a|--auth)[\s=]+[^\s:]+:\S`),
	regexp.MustCompile(`\biwconfig\b[^;&|]*\s(key|enc)\s+(\[\d\]\s+)?(s:\S|[0-9A-Fa-f]{4})`),
	regexp.MustCompile(`\bwpa_cli\b[^;&|]*\bset_network\s+\S+\s+(psk|password|wep_key\d|sae_password)\s+\S`),
}

// stdinPasswordReader matches a command that reads a password from its
// standard input: sudo -S, --password-stdin (docker, podman, helm...),
// passwd --stdin, chpasswd, kinit, cryptsetup, vncpasswd, pass insert.
const stdinPasswordReader = `(\bsudo\b[^;&|<]*\s-[a-zA-Z]*S|\S[^;&|<]*\s--password-stdin\b|\bpasswd\b[^;&|<]*\s--stdin\b|\bchpasswd\b|\bkinit\b|\bcryptsetup\b|\bvncpasswd\b|\bpass\s+(insert|add)\b)`

// assignmentREs find NAME=VALUE, NAME: VALUE and --name VALUE in a typed
// line; secretAssignment judges the name.
var assignmentREs = []*regexp.Regexp{
	regexp.MustCompile(`(?:^|[\s;&|('"?=,])([\pL_][\pL\pN_.-]*)\s*[=:]\s*['"]?[^\s'"]`),
	regexp.MustCompile(`(?:^|\s)--?([\pL][\pL\pN_-]*)(?:=|\s+)['"]?[^\s'"-]`),
	// The sixteenth hostile pass: NAME VALUE set by a command, fish's
	// "set -x DB_PASSWORD x", csh's setenv, Windows' "setx API_TOKEN x",
	// "aws configure set aws_secret_access_key x" (any "... set NAME
	// VALUE"), and PowerShell's "$env:API_KEY = 'x'".
	regexp.MustCompile(`(?:^|[\s;&|(])(?:set|setx|setenv)(?:\s+[-/][-\w]+)*\s+([\pL_][\pL\pN_.-]*)\s+['"]?[^\s'"|;&<>]`),
	regexp.MustCompile(`(?i)\$env:([\pL_][\pL\pN_.-]*)\s*=\s*['"]?[^\s'"]`),
	// PowerShell's "Set-Item env:API_KEY x" (-Value, -Path too), found
	// kept by the re-verification of the sixteenth pass.
	regexp.MustCompile(`(?i)(?:^|[\s;|(])(?:set-item|si|new-item|ni)\s+(?:-path\s+)?env:([\pL_][\pL\pN_.-]*)\s+(?:-value\s+)?['"]?[^\s'"-]`),
}

// secretAssignment reports whether v sets a variable, option or field
// whose name asks for a secret (PGPASSWORD=…, --token …, "api_key: …").
func secretAssignment(v string) bool {
	for _, re := range assignmentREs {
		for _, m := range re.FindAllStringSubmatch(v, 64) {
			if secretPromptLabel(m[1]) != "" || gluedSecretName(m[1]) {
				return true
			}
		}
	}
	return false
}

// fileOrVersionRE matches words that are file names or versions, which
// mix cases, digits and symbols without being secrets.
var fileOrVersionRE = regexp.MustCompile(`^v?\d+(\.\d+)+|\.[A-Za-z][A-Za-z0-9]{0,4}$`)

// base64RunRE finds long base64 or base64url runs (keyMaterial judges
// them).
var base64RunRE = regexp.MustCompile(`[A-Za-z0-9+/_-]{32,}={0,2}`)

// SecretValue reports whether a typed value looks like a secret whatever
// the prompt said: a known credential format (AWS, GitHub, GitLab, Slack,
// Stripe, Hugging Face, npm, PyPI, Vault, Google, SendGrid, Shopify, age,
// Azure, JWT, PEM private key), a URL with a password, an Authorization
// value, a long hex or base64 run, a high-entropy word, a short word with
// lower and upper case letters, digits and symbols, an assignment to a
// name that asks for a secret (PGPASSWORD=…, --token …, ADMINPASS=…), or
// a secret by its shape or place (shapeSpans: a quoted SQL password,
// user/password@service, an Authorization header, a password argument, a
// Luhn-valid card number, an IBAN, a base32 seed, a run of 12 or more
// recovery words; secretRedirect: echo x > ~/.vault_pass).
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
	return secretAssignment(v) || len(shapeSpans(v, true)) > 0 || secretRedirect(v)
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
	case fileOrVersionRE.MatchString(w):
		return false
	case n >= 12:
		return charClasses(w) >= 4 && entropy(w) >= 3.2
	case n >= 8:
		// A short word with all four classes is how password rules make
		// passwords ("Tr0ub4dor&3", "P@ssw0rd!").
		return charClasses(w) >= 4
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
// password (the client's hint or the detector's verdict), the pty had echo
// off, the prompt's words ask for a secret in any language (SecretPrompt),
// the value looks like a credential (SecretValue), or there is no
// positive evidence that the answer is not a secret (plainAnswer: a yes/no
// or offered answer, a small number, a command at a shell prompt, a label
// made only of known non-secret fields such as a name or a file). Any one
// is enough: when in doubt, the answer is not stored. Both stores decide
// with it before they write (storeCore.prepare) and again when they read
// (storeCore.redact), and the suggestion path too (suggestable, Infer).
func IsSecret(prompt, typ, input string, tty TTYState) bool {
	return typ == TypePassword || tty.secretTTY() || SecretPrompt(prompt) || SecretValue(input) || !plainAnswer(prompt, input)
}

// suggestable is what a store may offer as learned answers to prompt, from
// the answers counted for its pattern: nothing when the prompt asks for a
// secret (whatever an older version stored), never a redacted or
// secret-looking answer, nor one without evidence that it is not secret
// (plainAnswer); the most successful first (then by answer), at
// most maxLearned, each with the total of those offered.
func suggestable(prompt string, counted []Learned) []Learned {
	if SecretPrompt(prompt) {
		return nil
	}
	slices.SortFunc(counted, func(a, b Learned) int {
		return cmp.Or(cmp.Compare(b.Successes, a.Successes), cmp.Compare(a.Input, b.Input))
	})
	var out []Learned
	total := 0
	for _, l := range counted[:min(len(counted), maxLearned)] {
		if l.Successes <= 0 || l.Input == Redacted || SecretValue(l.Input) || !plainAnswer(prompt, l.Input) {
			continue
		}
		total += l.Successes
		out = append(out, l)
	}
	for i := range out {
		out[i].Total = total
	}
	return out
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
