package terminal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSecretLanguages: the lexicon covers at least the 20 most spoken
// languages, each with strong words.
func TestSecretLanguages(t *testing.T) {
	want := []string{"en", "zh", "hi", "es", "fr", "ar", "bn", "pt", "ru", "ur", "id", "de", "ja", "sw", "mr", "te", "tr", "ta",
		"vi", "ko", "it", "pl", "nl", "fa", "th", "sh", "sl", "lt", "lv", "et", "eu"}
	have := map[string]bool{}
	for _, l := range secretLanguages {
		if len(l.strong) == 0 {
			t.Errorf("%s has no strong words", l.code)
		}
		if have[l.code] {
			t.Errorf("%s listed twice", l.code)
		}
		have[l.code] = true
	}
	for _, c := range want {
		if !have[c] {
			t.Errorf("no secret words for %s", c)
		}
	}
	t.Logf("%d languages", len(secretLanguages))
}

func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"ＰＡＳＳＷＯＲＤ：": "password:", "Contraseña": "contrasena", "Straße": "strasse", "Hasło": "haslo", "ŞİFRE": "sifre",
		"Mật khẩu": "mat khau", "Пароль": "пароль", "Ключ": "ключ", "Κωδικός": "κωδικοσ", "Pass\u200bword": "password",
		"كَلِمَة": "كلمه", "パスワード": "パスワード", "비밀번호": "비밀번호", "पासवर्ड": "पासवर्ड",
	} {
		if got := fold(in); got != want {
			t.Errorf("fold(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplitIdentifier(t *testing.T) {
	for in, want := range map[string][]string{
		"adminPwd":   {"admin", "Pwd"},
		"DBPassword": {"DB", "Password"},
		"Password1":  {"Password", "1"},
		"PIN码":       {"PIN", "码"},
		"2fa":        {"2", "fa"},
		"パスワード":      {"パスワード"},
	} {
		if got := splitIdentifier(in); !slices.Equal(got, want) {
			t.Errorf("splitIdentifier(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSecretPromptRules covers what the table does not: identifiers,
// weak words with and without benign ones, yes/no offers, the borderline
// decision, and words that only look like secret words.
func TestSecretPromptRules(t *testing.T) {
	for _, tc := range []struct {
		prompt string
		secret bool
	}{
		{"export GITHUB_TOKEN=", true},
		{"Enter apiKey:", true},
		{"APIKEY:", true},
		{"Enter cvv2:", true},
		{"Your one-time code:", true},
		{"Two-factor code:", true},
		{"ssh-keygen: Enter passphrase (empty for no passphrase):", true},
		{"Key:", true},
		{"Code:", true},
		{"Ключ к успеху", true}, // ключ is "key": weak, nothing benign, so not stored
		{"Key fingerprint:", false},
		{"Country code:", false},
		{"Press any key to continue", false},
		{"Use arrow keys to move", false},
		{"Max tokens:", false},
		{"Pin the version? [y/N]", false},
		{"Save the key? [y/N]", false},
		{"Save password? [y/N]", true}, // strong words are not undone by a yes/no offer
		{"Password file path:", true},  // nor by a benign word
		{"Passport number:", false},
		{"Compass heading:", false},
		{"Spin count:", false},
		{"Keyboard layout:", false},
		{"Secretary:", false},
		{"Monkey name:", false},
		// The second hostile pass: languages and English words the first
		// list lacked.
		{"Lozinka:", true},
		{"Unesite lozinku:", true},
		{"Лозинка:", true},
		{"Geslo:", true},
		{"Slaptažodis:", true},
		{"Parole:", true},
		{"Parool:", true},
		{"Salasõna:", true},
		{"Pasahitza:", true},
		{"SSN:", true},
		{"Social security number:", true},
		{"Security answer (mother's maiden name):", true},
		// Disguised: look-alike letters of another script, leet,
		// spaced letters.
		{"Раssword:", true}, // Cyrillic Р and а
		{"Enter раsswоrd:", true},
		{"Pαssword:", true}, // Greek alpha
		{"P a s s w o r d:", true},
		{"Enter your P I N:", true},
		{"p@ssw0rd:", true},
		{"P4ssw0rd:", true},
		{"s3cr3t:", true},
		{"Enter t0ken:", true},
		// The third hostile pass: languages, glued identifiers, Wi-Fi
		// keys and wallet words the second list lacked.
		{"ពាក្យសម្ងាត់:", true},
		{"စကားဝှက်:", true},
		{"මුරපදය:", true},
		{"ລະຫັດຜ່ານ:", true},
		{"Нууц үг:", true},
		{"Сырсөз:", true},
		{"Fjalëkalimi:", true},
		{"Lykilorð:", true},
		{"Pasfhocal:", true},
		{"Cyfrinair:", true},
		{"Wagwoord:", true},
		{"Iphasiwedi:", true},
		{"Contrasinal:", true},
		{"Pasvorto:", true},
		{"Passwuert:", true},
		{"Katalaluan:", true},
		{"Tunnuskoodi:", true},
		{"Enter value for MY_APP_SECRETKEY:", true},
		{"PSK:", true},
		{"WPA2 key:", true},
		{"Seed:", true},
		{"12-word phrase:", true},
		{"Enter your 24 words:", true},
		{"Random seed:", false},
		{"Seed for the RNG:", false},
		{"World seed:", false},
		{"Word count:", false},
		{"Number of words:", false},
		{"Version 1.2.3 of md5sum:", false},
		{"Save to file0.txt? [y/N]", false},
		{"Р а з м е р:", false}, // Cyrillic spaced letters of an ordinary word
		{"Select a b c d:", false},
		{"Ime datoteke:", false},
		{"Šifra artikla? [y/N]", false},
		{"", false},
		// The sixteenth hostile pass: a '>' prompt (a REPL's shape) whose
		// name holds a secret word glued to others; ordinary REPL and
		// shell prompts stay ordinary.
		{"MASTERKEY> ", true},
		{"masterkey> ", true},
		{"SIGNINGKEY> ", true},
		{"ADMINPASS> ", true},
		{"mypass> ", true},
		{"keystore> ", true},
		{"Password> ", true},
		{"KEY> ", true},
		{"token> ", true},
		{"Enter rootpw> ", true},
		{"user@host:~$ ", false},
		{"mysql> ", false},
		{">>> ", false},
		{"irb(main):001:0> ", false},
		{`PS C:\Users\bob> `, false},
		{`PS C:\Users\mickey> `, false},
		{"sqlite> ", false},
		{"redis 127.0.0.1:6379> ", false},
		{"(gdb) ", false},
		{"ftp> ", false},
		{"psql=# ", false},
		{"cqlsh:mykeyspace> ", false},
		{"alice@box ~/src/keystore> ", false}, // a working directory, not a name
	} {
		if got := SecretPrompt(tc.prompt); got != tc.secret {
			t.Errorf("SecretPrompt(%q) = %v (%q), want %v", tc.prompt, got, secretPromptLabel(tc.prompt), tc.secret)
		}
	}
}

func TestSecretValueShapes(t *testing.T) {
	for _, v := range []string{"Tr0ub4dor&3", "P@ssw0rd!", "postgres://admin:hunter2@db:5432/app", "Authorization: Bearer abcdefgh12345",
		"PGPASSWORD=x psql", "--password hunter2", "api_key: abc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "hf_" + strings.Repeat("aB3", 11),
		"npm_" + strings.Repeat("aB3", 12), "hvs.CAESIJ0123456789abcdefghij", "AGE-SECRET-KEY-1" + strings.Repeat("QZ3", 20),
		// The third hostile pass: passwords on command lines.
		"mysql -uroot -phunter2", "sshpass -p hunter2 ssh h", "mongosh -u admin -p hunter2", "redis-cli -a hunter2",
		"curl -u bob:hunter2 https://x", "smbclient //h/s -U bob%hunter2", "htpasswd -b users bob hunter2",
		"openssl enc -k hunter2 -in f", "ldapsearch -x -D cn=admin -w hunter2", "sqlcmd -S db -U sa -P hunter2",
		"docker login -u me -p hunter2 registry.example",
		// The fourth hostile pass: ssh-keygen's new and old passphrase flags.
		"ssh-keygen -N hunter2 -f k", "ssh-keygen -t ed25519 -N 'hunter2'", "ssh-keygen -p -P hunter2 -N new2 -f k",
		// The fifth hostile pass: more password flags, and passwords
		// written into a program that reads them from its input.
		"echo hunter2 | docker login -u me --password-stdin", "echo 'hunter2' | sudo -S ls", "printf 'hunter2\\n' | passwd --stdin bob",
		"echo 'bob:hunter2' | chpasswd", "echo hunter2 | kinit bob", "sudo -S ls <<< hunter2", "vncpasswd -f <<< hunter2",
		"cryptsetup luksOpen /dev/sdb x --key-file=- <<< hunter2", "pass insert -e x <<< hunter2",
		"keytool -list -storepass hunter2", "jarsigner -keypass hunter2 a.jar k", "zip -e -P hunter2 a.zip f", "unzip -P hunter2 a.zip",
		"unrar x -phunter2 a.rar", "rar a -phunter2 a.rar f", "7z a -phunter2 a.7z f", "mosquitto_pub -P hunter2 -t x -m y",
		"nmcli dev wifi connect W password hunter2", "wpa_passphrase W hunter2", "net user bob hunter2 /add", "psql 'password=hunter2'",
		// The tenth hostile pass: a password hash for useradd/usermod, and
		// rclone's secret KEY VALUE pairs.
		"usermod -p '$6$salt$hashhashhash' bob", "useradd -m -p hunter2 bob", "useradd --password=hunter2 bob",
		"rclone config create s3 s3 secret_access_key RcloneSak77", "rclone config update gd client_secret hunter2",
		"rclone config create sftp1 sftp host h user bob pass hunter2",
		// The sixteenth hostile pass: fish, csh, Windows and aws ways of
		// setting a secret, httpie, iwconfig and wpa_cli.
		"set -x DB_PASSWORD hunter2", "set -gx API_TOKEN abc", "setx API_TOKEN abc123", `net use \\srv\share /user:alice S3cret!`,
		"aws configure set aws_secret_access_key abc123", "setenv DB_PASSWORD hunter2", "$env:API_KEY = 'abc123'",
		"cmdkey /add:srv /user:u /pass:hunter2", "http -a bob:hunter2 example.org", "iwconfig wlan0 key s:hunter2",
		`wpa_cli set_network 0 psk '"hunter2"'`} {
		if !SecretValue(v) {
			t.Errorf("SecretValue(%q) = false", v)
		}
	}
	for _, v := range []string{"v1.2.3-RC1", "Q3-Report.pdf", "max_tokens=100", "Fix: the password reset form", "hello world",
		"eu-west-1", "staging", "git commit -m fix", "MyApp-2.0.tar.gz",
		"mysql -uroot -p", "mysql -p mydb", "redis-cli -h host", "curl -u bob https://x", "ssh -p 2222 host",
		"docker run -p 8080:80 img", "openssl x509 -in c.pem -text", "mongosh -u admin -p", "git commit -a -m fix",
		"ssh-keygen -N '' -f k", `ssh-keygen -t ed25519 -N ""`, "ssh-keygen -p -f k",
		"echo $PW | docker login --password-stdin", `echo "$PW" | sudo -S ls`, "cat pw.txt | docker login --password-stdin",
		"echo hi | grep h", "echo done; sudo -S ls", "sudo -S ls <<< $PW", "zip -r a.zip dir", "unzip -l a.zip", "rar a -p a.rar f",
		"rar a -p- a.rar f", "7z x a.7z", "keytool -list -storepass:env PW", "nmcli dev wifi list", "net user bob *", "kinit bob",
		"usermod -aG docker bob", "useradd -m -s /bin/bash bob", "rclone config create s3 s3 provider AWS", "rclone copy a remote:b",
		"set -x PATH /usr/bin", "set -e", "aws configure set region us-east-1", `setx PATH C:\bin`, `net use Z: \\srv\share`,
		`net use \\srv\share /user:alice *`, "cmdkey /list", "http GET example.org", "iwconfig wlan0 key off"} {
		if SecretValue(v) {
			t.Errorf("SecretValue(%q) = true", v)
		}
	}
}

// TestSecretPromptOnCorpus prints how the words alone judge the candidate
// lines of the detection corpus (testdata/corpus: real programs' screens,
// which the lexicon was not written from) and fails if they miss more
// than one password prompt or call more than 1% of the other prompts
// secret. Run it with -v for the figures.
func TestSecretPromptOnCorpus(t *testing.T) {
	ex, err := ShippedCorpusExamples()
	if err != nil {
		t.Fatal(err)
	}
	var tp, fn, fp, tn int
	for _, e := range ex {
		if e.Type == "" {
			continue // not waiting for input: nothing is typed, nothing stored
		}
		got := SecretPrompt(e.Text)
		switch want := e.Type == TypePassword; {
		case want && got:
			tp++
		case want:
			fn++
			t.Logf("missed %s: %q", e.Program, e.Text)
		case got:
			fp++
			t.Logf("called secret %s (%s): %q (%s)", e.Program, e.Type, e.Text, secretPromptLabel(e.Text))
		default:
			tn++
		}
	}
	t.Logf("password prompts: %d judged secret by their words, %d not; other prompts: %d judged secret, %d not", tp, fn, fp, tn)
	if fn > 1 || float64(fp) > 0.01*float64(fp+tn) {
		t.Fatalf("%d password prompts missed, %d of %d other prompts called secret", fn, fp, fp+tn)
	}
}

// TestSecretKeyed: of a secret answer a store keeps its length and
// HMAC-SHA256 under the key in its key file (0600), so a hash of a short
// PIN cannot be checked without the key; two keys give two hashes.
func TestSecretKeyed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var macs []string
	for _, name := range []string{"a", "b"} {
		path := filepath.Join(dir, name, "e.db")
		s, err := OpenStore(path, StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := s.Record(ctx, rec("s", "Пароль:", "4921", true))
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.History(ctx, "s", 10)
		if err != nil || len(h) != 1 {
			t.Fatal(h, err)
		}
		key, err := os.ReadFile(path + ".key")
		if err != nil {
			t.Fatal(err)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte("4921"))
		want := hex.EncodeToString(m.Sum(nil)[:secretMACBytes])
		if e.Input != Redacted || e.SecretLen != 4 || e.SecretMAC != want || h[0].SecretLen != 4 || h[0].SecretMAC != want {
			t.Fatalf("recorded %+v, history %+v; want length 4 and MAC %s", e, h[0], want)
		}
		bare := sha256.Sum256([]byte("4921"))
		if strings.Contains(e.SecretMAC, hex.EncodeToString(bare[:8])) {
			t.Fatal("the kept hash is a bare SHA-256")
		}
		if st, err := os.Stat(path + ".key"); err != nil || st.Mode() != 0o600 || st.Size() != secretKeyBytes {
			t.Fatalf("key file: %v %v", st, err)
		}
		macs = append(macs, e.SecretMAC)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// Reopened, the store keeps its key.
		s, err = OpenStore(path, StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if e2, _, err := s.Record(ctx, rec("s", "Пароль:", "4921", true)); err != nil || e2.SecretMAC != want {
			t.Fatalf("after reopening: %+v %v", e2, err)
		}
		s.Close()
	}
	if macs[0] == macs[1] {
		t.Fatal("two stores with two keys kept the same hash")
	}
}

func TestSecretKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new", "k")
	k, err := loadSecretKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v", st, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	k2, err := loadSecretKey(path)
	if err != nil || string(k2.k) != string(k.k) {
		t.Fatalf("reloaded key differs (%v)", err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("a 0644 key file stayed %v", st.Mode())
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSecretKey(short); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("a 4-byte key file: %v, want ErrSecretKey", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSecretKey(link); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("a symbolic link: %v, want ErrSecretKey", err)
	}
	if _, err := OpenStore(filepath.Join(dir, "e.db"), StoreConfig{KeyFile: short}); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("OpenStore with a bad key file: %v", err)
	}
}

// TestMigrateRedactsOldSecrets opens a version-2 database that stored
// answers to prompts not worded in English in clear: version 3 redacts
// them (keeping length and keyed hash), no longer suggests them, and
// leaves them neither in the database nor in its WAL.
func TestMigrateRedactsOldSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	old := map[string]string{"Passwort:": "qZold1", "密码：": "qZold2", "Enter the admin pwd:": "qZold3", "Name:": "qZkept"}
	i := 0
	for prompt, input := range old {
		i++
		if _, err := db.Exec(`INSERT INTO events VALUES (?, 's', ?, ?, 1, 'user_typed', 0, ?, 'text', ?)`,
			strings.Repeat("a", i), prompt, input, i, PatternKey(prompt)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO schema_version(version) VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(path, StoreConfig{ShareLearned: true, MaxAge: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	h, err := s.History(ctx, "s", 10)
	if err != nil || len(h) != 4 {
		t.Fatalf("history %+v %v", h, err)
	}
	for _, e := range h {
		secret := e.PromptText != "Name:"
		if secret != (e.Input == Redacted) || secret != (e.SecretLen == 6 && e.SecretMAC != "") {
			t.Errorf("after migration %q: %+v", e.PromptText, e)
		}
		l, err := s.Learned(ctx, e.PromptText, "other")
		if err != nil || secret != (len(l) == 0) {
			t.Errorf("Learned(%q) after migration: %+v %v", e.PromptText, l, err)
		}
	}
	raw := storeBytes(t, s)
	for prompt, input := range old {
		if strings.Contains(string(raw), input) != (prompt == "Name:") {
			t.Errorf("after migration the answer to %q is in the files: %v", prompt, strings.Contains(string(raw), input))
		}
	}
}

// FuzzSecretPrompt: any text is judged without a panic, and a strong word
// after it is always found, whatever bytes come before.
func FuzzSecretPrompt(f *testing.F) {
	for _, s := range []string{"Passwort:", "密码：", "adminPwd", "\xff\xfe", "ＰＡＳＳ", "é\u0301\u0301", "[y/N]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = SecretPrompt(s)
		_ = SecretValue(s)
		_ = plainAnswer(s, s)
		_ = MaskSecrets(s)
		if !SecretPrompt(s + " password:") {
			t.Fatalf("%q followed by password: not secret", s)
		}
	})
}

func BenchmarkSecretPrompt(b *testing.B) {
	for _, bc := range []struct{ name, prompt string }{
		{"short", "Enter the admin pwd:"},
		{"cjk", "请输入您的支付密码："},
		{"ordinary", "Enter file in which to save the key (/home/u/.ssh/id_ed25519):"},
		{"4KiB", strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit ", 80)[:MaxPromptBytes]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.prompt)))
			for b.Loop() {
				SecretPrompt(bc.prompt)
			}
		})
	}
}

// BenchmarkIsSecret is the whole decision on an answer, with the
// positive evidence of plainAnswer, and MaskSecrets on the prompt's text:
// what Record and History pay per event. The hostile cases are a 4 KiB
// prompt of unknown words, one of many colons (labelledValues judges a
// label before each), and a 4 KiB command line.
func BenchmarkIsSecret(b *testing.B) {
	colons := strings.Repeat("Field name: value ", 240)[:MaxPromptBytes]
	for _, bc := range []struct{ name, prompt, input string }{
		{"username", "Username:", "alice"},
		{"unknown", "Enter the magic word:", "hunter"},
		{"cjk", "请输入您的用户名：", "wang"},
		{"shell", "bob@host:~/src$ ", "psql -c \"ALTER USER alice PASSWORD 'hunter2'\""},
		{"4KiB-prompt", strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit ", 80)[:MaxPromptBytes], "y"},
		{"4KiB-colons", colons, "y"},
		{"4KiB-command", "$ ", strings.Repeat("echo hello world | grep -v x; ", 140)[:MaxPromptBytes]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				IsSecret(bc.prompt, "", bc.input, TTYState{})
				MaskSecrets(bc.prompt)
			}
		})
	}
}

// TestRedisScrubOldSecrets writes events as an older version did (an
// answer to "Passwort:" in clear and counted as learned) and checks that
// Run's Scrub redacts it, keeps its length and keyed hash, takes it out of
// the learned counts and of every key and value, and leaves ordinary
// answers alone.
func TestRedisScrubOldSecrets(t *testing.T) {
	_, rdb := startRedis(t)
	s, err := NewRedisStore(rdb, "", StoreConfig{ShareLearned: true, KeyFile: filepath.Join(t.TempDir(), "k")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	old := map[string]string{"Passwort:": "qZold1", "Enter the admin pwd:": "qZold2", "Name:": "qZkept"}
	i := 0
	for prompt, input := range old {
		i++
		if err := recordScript.Run(ctx, rdb, nil, s.prefix, fmt.Sprint("old", i), "s", prompt, input, "1", "user_typed", 0,
			now.UnixNano(), TypeText, PatternKey(prompt), "1", now.UnixMicro(), 1000, 0, "").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(string(storeBytes(t, s)), "qZold1") {
		t.Fatal("the old answer is not in Redis: the test would test nothing")
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(runCtx, time.Hour, func(err error) { t.Error(err) }); close(done) }()
	for deadline := time.Now().Add(10 * time.Second); rdb.Get(ctx, s.prefix+"t:rules").Val() != secretRulesVersion; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Run did not scrub in 10s")
		}
	}
	stop()
	<-done
	raw := string(storeBytes(t, s))
	for prompt, input := range old {
		if strings.Contains(raw, input) != (prompt == "Name:") {
			t.Errorf("after Scrub, the answer to %q in Redis: %v", prompt, strings.Contains(raw, input))
		}
	}
	h, err := s.History(ctx, "s", 10)
	if err != nil || len(h) != 3 {
		t.Fatal(h, err)
	}
	for _, e := range h {
		if secret := e.PromptText != "Name:"; secret != (e.Input == Redacted && e.SecretLen == 6 && e.SecretMAC != "") {
			t.Errorf("after Scrub %q: %+v", e.PromptText, e)
		}
	}
	if l, err := s.Learned(ctx, "Name:", "other"); err != nil || !learnedHas(l, "qZkept") {
		t.Errorf("Learned(Name:) after Scrub: %+v %v", l, err)
	}
	if err := s.Scrub(ctx); err != nil {
		t.Fatal(err)
	}
}
