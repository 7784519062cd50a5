package terminal

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// promptSecrets are prompts that show a secret in their own text (the
// seventh hostile pass found each kept in clear in History and the
// SQLite WAL while the same values typed as answers were redacted), with
// the secret.
var promptSecrets = []struct{ prompt, secret string }{
	{"Token ghp_Zq8wK2mN4pR7tV1xY3bD5fH6jL9cQ0sA2eGu is about to expire. Renew it? [y/N]", "ghp_Zq8wK2mN4pR7tV1xY3bD5fH6jL9cQ0sA2eGu"},
	{"Use the key sk-proj-9fKd82HsQm1ZxLw0PqT4vBn7 for this project? (yes/no)", "sk-proj-9fKd82HsQm1ZxLw0PqT4vBn7"},
	{"glpat-xR4Tq9WmZ2vKs8LpN3bY found in .env. Commit anyway? [y/N]", "glpat-xR4Tq9WmZ2vKs8LpN3bY"},
	{"Your recovery key is 7Fq2-Kx9P-Lm4Z-Wt8R-Vb3N-Hy6C. Have you written it down? [y/N]", "7Fq2-Kx9P-Lm4Z-Wt8R-Vb3N-Hy6C"},
	{"$ mysql -u root -pS3cr3tPassw0rd shop\nContinue with the import? [Y/n]", "S3cr3tPassw0rd"},
	{"export PGPASSWORD=hunter2hunter2\nRun the migration now? [y/N]", "hunter2hunter2"},
	{"Connecting to postgres://admin:Sup3rS3cret@db.internal:5432/app. Proceed? [y/N]", "Sup3rS3cret"},
	{"Enter passphrase for qL7v9XkR2mWp4TzN8bYc3HdF6jS1gA0e:", "qL7v9XkR2mWp4TzN8bYc3HdF6jS1gA0e"},
	// The tenth hostile pass: a secret prompt's own default or offered
	// answers are the secret typed back.
	{"Passphrase [alpha/bravo7x]: ", "bravo7x"},
	{"Password [sunflower]: ", "sunflower"},
	{"PIN (4711): ", "4711"},
	{"Passwort [geheimnis]: ", "geheimnis"},
}

// TestMaskSecrets: the secret is gone from the masked text and from its
// pattern key, the rest of the prompt stays.
func TestMaskSecrets(t *testing.T) {
	for _, tc := range promptSecrets {
		got := MaskSecrets(tc.prompt)
		if strings.Contains(got, tc.secret) || !strings.Contains(got, SecretMask) {
			t.Errorf("MaskSecrets(%q) = %q", tc.prompt, got)
		}
		if k := PatternKey(tc.prompt); strings.Contains(k, strings.ToLower(tc.secret)) {
			t.Errorf("PatternKey(%q) = %q holds the secret", tc.prompt, k)
		}
		if PatternKey(tc.prompt) != PatternKey(got) {
			t.Errorf("PatternKey differs between %q and its masked text", tc.prompt)
		}
	}
}

// TestMaskSecretsKeepsOrdinaryPrompts: no prompt of the secret table (its
// ordinary prompts in many languages, and the secret prompts, which name a
// secret without showing one) and no usual prompt is changed.
func TestMaskSecretsKeepsOrdinaryPrompts(t *testing.T) {
	tab := loadSecretTable(t)
	prompts := []string{
		"Do you want to continue? [Y/n]",
		"Overwrite /home/Alice/Projects-2/config-management.yaml? [y/N]",
		"Proceed with infrastructure-as-configuration-management changes? (yes/no)",
		"Delete 3 tables from production_db_2024? Type the database name to confirm:",
		"Select a version [1.2.3, 2.0.0-rc.1]:",
		"Which branch: feature/ISSUE-1234-add-login?",
		"Ok to proceed? (y)",
		// A secret prompt's yes/no answers, ranges and notes are no secrets.
		"Password? (yes/no)", "Remember this password? [Y/n]", "Enter PIN [1-9999]:", "Enter password (or 'skip'):",
		"Security key [none]:", "Port [5432]:",
	}
	for _, e := range tab.Ordinary {
		prompts = append(prompts, e.Prompt)
	}
	for _, e := range tab.Secret {
		prompts = append(prompts, e.Prompt)
	}
	for _, p := range prompts {
		if got := MaskSecrets(p); got != p {
			t.Errorf("MaskSecrets(%q) = %q, want it unchanged", p, got)
		}
	}
}

// TestPromptSecretsNotStored records each prompt of promptSecrets in both
// stores and checks the secret is in neither History nor the store's
// bytes (the SQLite file and its WAL, every Redis key and value), and that
// an answer learnt at the prompt is still suggested for it.
func TestPromptSecretsNotStored(t *testing.T) {
	ctx := context.Background()
	forEachStore(t, StoreConfig{ShareLearned: true}, func(t *testing.T, s store) {
		for _, tc := range promptSecrets {
			if _, _, err := s.Record(ctx, Event{SessionID: "p", PromptText: tc.prompt, Input: "y", Success: true,
				Source: "user_typed", PromptType: TypeText}); err != nil {
				t.Fatal(err)
			}
		}
		h, err := s.History(ctx, "p", 100)
		if err != nil || len(h) != len(promptSecrets) {
			t.Fatalf("history: %d events, %v", len(h), err)
		}
		for _, e := range h {
			for _, tc := range promptSecrets {
				if strings.Contains(e.PromptText, tc.secret) || strings.Contains(e.PatternKey, strings.ToLower(tc.secret)) {
					t.Errorf("history holds %q (pattern %q)", e.PromptText, e.PatternKey)
				}
			}
		}
		raw := storeBytes(t, s)
		for _, tc := range promptSecrets {
			if holdsSecret(raw, tc.secret) || holdsSecret(raw, strings.ToLower(tc.secret)) {
				t.Errorf("%q is in the store's bytes", tc.secret)
			}
			if IsSecret(tc.prompt, TypeText, "y", TTYState{}) {
				continue // a secret prompt's answer is never learnt
			}
			l, err := s.Learned(ctx, tc.prompt, "another")
			if err != nil || !learnedHas(l, "y") {
				t.Errorf("Learned(%q): %+v %v, want the answer y", tc.prompt, l, err)
			}
		}
		if !bytes.Contains(raw, []byte("Have you written it down?")) {
			t.Error("the prompts' text is not in the store's bytes: the scan sees nothing")
		}
	})
}

// holdsSecret reports whether raw holds secret. A secret of digits only
// counts where no digit is on either side: a four-digit PIN is found by
// chance inside the store's millisecond times and counters (CI failed once
// on "4711" inside such a number).
func holdsSecret(raw []byte, secret string) bool {
	digits := strings.Trim(secret, "0123456789") == ""
	for from := 0; ; {
		i := bytes.Index(raw[from:], []byte(secret))
		if i < 0 {
			return false
		}
		i += from
		end := i + len(secret)
		if !digits || ((i == 0 || !isDigit(raw[i-1])) && (end == len(raw) || !isDigit(raw[end]))) {
			return true
		}
		from = i + 1
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// TestHoldsSecret: the check finds a PIN standing alone and not one inside
// a longer number.
func TestHoldsSecret(t *testing.T) {
	for _, tc := range []struct {
		raw, secret string
		want        bool
	}{
		{"PIN (4711): ", "4711", true},
		{"4711", "4711", true},
		{"at=1795847112301", "4711", false},
		{"at=1795847112301 PIN 4711", "4711", true},
		{"key=ab4711cd", "4711", true},
		{"Password [sunflower]", "sunflower", true},
		{"Password [****]", "sunflower", false},
	} {
		if got := holdsSecret([]byte(tc.raw), tc.secret); got != tc.want {
			t.Errorf("holdsSecret(%q, %q) = %v, want %v", tc.raw, tc.secret, got, tc.want)
		}
	}
}
