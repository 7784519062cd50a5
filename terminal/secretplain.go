package terminal

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// This file holds the positive evidence that an answer is not secret. The
// secret words of secretwords.go can only ever be a partial list (the
// ninth hostile pass found 66 prompts they missed: glued identifiers,
// languages not in the list, echo-off cues in words, security questions),
// so the decision is inverted: an answer is kept in clear, and may be
// suggested, only when plainAnswer finds evidence that it is not a secret;
// every other answer keeps its length and keyed hash only. The evidence is
// of two kinds:
//
//   - the value's shape: empty, one character, a yes/no word, one of the
//     answers the prompt offers, a number of at most two digits, a number
//     within the range the prompt offers, a number or a path where the
//     prompt's default is one;
//   - the prompt's kind: a shell or REPL prompt ("bob@host:~$ ", ">>> "),
//     whose commands are judged by SecretValue's shapes; or a label every
//     word of which is in plainWords, a list of non-secret fields (name,
//     user name, e-mail, file, path, number, port...) in many languages.
//
// A word the lists do not know is doubt: "What is the name of your first
// pet?" has "name" but also "first" and "pet", so it is not plain.

// plainKind is what a plain label asks for.
type plainKind int

const (
	kindNone    plainKind = iota // filler words only ("Enter:", "Continue?")
	kindNumeric                  // a number (port, count, number)
	kindFree                     // any value (name, user name, file, path, e-mail)
)

// plainLanguage is one language's words for non-secret fields: fill are
// the words a label is phrased with (enter, your, please, the), numeric
// the fields whose value is a number, free those whose value is anything
// but a secret. Words are folded (fold); in Latin, Greek and Cyrillic a
// word is matched against the label's words (a phrase against consecutive
// words, "*w" a word ending in w, "w*" one starting with it); in other
// scripts as a substring of a word.
type plainLanguage struct {
	fill, numeric, free []string
}

var plainLanguages = []plainLanguage{
	{ // English
		fill: []string{"enter", "type", "input", "provide", "specify", "please", "your", "the", "a", "an", "new", "default",
			"of", "for", "to", "in", "on", "at", "from", "into", "which", "save", "choose", "select", "pick", "what", "is", "s",
			"deploy", "use", "run", "create", "install", "target", "set", "change", "rename", "copy", "move", "open"},
		numeric: []string{"number", "port", "count", "amount", "size", "max tokens", "timeout", "retries", "threads", "workers",
			"replicas", "age", "year", "quantity", "an option", "option", "choice", "selection"},
		free: []string{"name", "names", "username", "user", "login name", "first name", "last name", "full name", "display name",
			"email", "e mail", "email address", "address", "host", "hostname", "server", "url", "domain", "file", "filename",
			"files", "path", "directory", "dir", "folder", "location", "message", "commit", "title", "description", "comment",
			"project", "package", "environment", "region", "country", "language", "language code", "letter code", "postal code",
			"zip code", "keyword", "passenger", "branch", "tag", "version", "label", "author", "organization", "company", "team",
			"namespace", "ip", "ip address", "cluster", "database name", "table", "schema", "key fingerprint", "trust"}},
	{ // Spanish, Portuguese, Italian, French, Catalan, Romanian
		fill: []string{"introduzca", "introduce", "ingrese", "escriba", "su", "el", "la", "un", "una", "del", "de", "d", "entrez",
			"saisissez", "votre", "le", "du", "digite", "insira", "informe", "seu", "sua", "o", "um", "inserisci", "il", "lo",
			"tuo", "di", "introduceti", "nou", "noua"},
		numeric: []string{"numero", "nombre", "porta", "puerto", "porte"},
		free: []string{"nombre", "nom", "nome", "usuario", "utilisateur", "utente", "utilizador", "nome utente",
			"nom d utilisateur", "nombre de usuario", "nome de usuario", "correo", "correo electronico", "courriel", "e mail",
			"ruta", "archivo", "fichero", "chemin", "fichier", "caminho", "arquivo", "ficheiro", "percorso", "file",
			"palabra clave", "mot cle", "palavra chave", "parola chiave", "nume", "utilizator", "fisier", "cale"}},
	{ // German, Dutch, Scandinavian
		fill: []string{"geben", "sie", "ein", "eingeben", "bitte", "ihren", "ihre", "den", "die", "das", "neuer", "neue",
			"voer", "in", "uw", "de", "het", "ange", "skriv", "din", "ditt", "oppgi"},
		numeric: []string{"zahl", "nummer", "anzahl", "getal", "tal", "antal"},
		free: []string{"name", "benutzername", "benutzer", "*name", "*datei", "datei", "dateiname", "pfad", "verzeichnis",
			"ordner", "gebruikersnaam", "naam", "bestand", "bestandsnaam", "pad", "anvandarnamn", "namn", "brukernavn",
			"navn", "fil", "filnavn", "filnamn", "brugernavn", "*namn", "*navn"}},
	{ // Slavic, Baltic, Hungarian, Finnish, Turkish, Greek
		fill: []string{"введите", "укажите", "ваш", "ваше", "новое", "новый", "к", "wpisz", "podaj", "zadejte", "zadajte",
			"vnesite", "unesite", "введіть", "girin", "giriniz", "adinizi", "syota", "anna", "adja", "meg", "εισαγετε", "το",
			"czy"},
		numeric: []string{"число", "номер", "порт", "liczba", "numer", "cislo", "sayi", "numara", "luku", "szam", "αριθμος"},
		free: []string{"имя", "имя пользователя", "пользователя", "пользователь", "ключевое слово", "путь", "файл", "файлу",
			"файла", "к файлу", "имя файла", "ім я", "користувача", "шлях", "nazwa", "uzytkownika", "nazwa uzytkownika",
			"plik", "sciezka", "uzivatelske", "jmeno", "uzivatel", "soubor", "cesta", "kullanici", "adi", "kullanici adi",
			"dosya", "yol", "kayttajatunnus", "kayttajanimi", "nimi", "tiedosto", "polku", "felhasznalonev", "nev", "fajl",
			"ονομα", "χρηστη", "ονομα χρηστη", "αρχειο", "korisnicko", "ime", "korisnik", "datoteka", "uporabnisko"}},
	{ // Asian and other languages written in Latin script
		fill:    []string{"masukkan", "anda", "nhap", "cua", "ban", "la", "ingiza", "ilagay", "ang", "iyong"},
		numeric: []string{"nomor", "angka", "so"},
		free: []string{"nama", "pengguna", "nama pengguna", "berkas", "ten", "nguoi dung", "ten nguoi dung", "tep", "duong dan",
			"jina", "mtumiaji", "jina la mtumiaji", "faili", "njia", "pangalan"}},
	{ // Chinese, Japanese, Korean, Thai
		fill: []string{"请输入", "請輸入", "输入", "輸入", "您的", "你的", "を入力してください", "を入力", "入力してください", "入力",
			"の", "을", "를", "입력하세요", "입력", "의", "กรุณาใส่", "ใส่", "ป้อน"},
		numeric: []string{"数字", "數字", "端口", "ポート番号", "ポート", "番号", "숫자", "포트", "번호", "ตัวเลข"},
		free: []string{"用户名", "用戶名", "使用者名稱", "名称", "名稱", "名字", "文件名", "文件", "路径", "路徑", "项目", "項目", "檔案",
			"邮箱", "電子郵件", "ユーザー名", "ユーザ名", "ファイル名", "ファイル", "名前", "パス名", "ディレクトリ", "사용자", "이름",
			"사용자 이름", "파일", "경로", "ชื่อผู้ใช้", "ชื่อ", "ผู้ใช้", "ไฟล์"}},
	{ // Arabic, Persian, Urdu, Hebrew, Indic
		fill:    []string{"أدخل", "ادخل", "ادخال", "وارد کنید", "درج کریں", "הזן", "दर्ज करें", "अपना"},
		numeric: []string{"رقم", "رقما", "عدد", "מספר", "संख्या"},
		free: []string{"اسم المستخدم", "اسم", "المستخدم", "نام کاربری", "نام", "کاربری", "صارف نام", "صارف", "שם משתמש", "שם",
			"משתמש", "उपयोगकर्ता नाम", "उपयोगकर्ता", "नाम", "ব্যবহারকারীর নাম", "ব্যবহারকারীর", "নাম", "பயனர் பெயர்", "பயனர்",
			"பெயர்", "వినియోగదారు పేరు", "వినియోగదారు", "పేరు", "ملف", "فایل", "फ़ाइल"}},
}

// plainLex is plainLanguages compiled: words and phrases by kind.
type plainLex struct {
	words    map[string]plainKind // exact folded words
	suffixes map[string]plainKind // "*w"
	phrases  [][]string           // consecutive folded words, longest first
	kinds    map[string]plainKind // a phrase's kind, by its words joined with " "
	subs     []plainSub           // substrings of the other scripts, longest first
}

type plainSub struct {
	s    string
	kind plainKind
}

var plainLexicon = compilePlain()

func compilePlain() *plainLex {
	lx := &plainLex{words: map[string]plainKind{}, suffixes: map[string]plainKind{}, kinds: map[string]plainKind{}}
	add := func(w string, k plainKind) {
		f := fold(w)
		if !allWordScript(f) {
			lx.subs = append(lx.subs, plainSub{strings.Join(strings.Fields(f), ""), k})
			return
		}
		fs := strings.Fields(strings.NewReplacer("'", " ", "-", " ", "_", " ").Replace(f))
		switch {
		case len(fs) > 1:
			key := strings.Join(fs, " ")
			if old, ok := lx.kinds[key]; !ok || k > old {
				lx.kinds[key] = k
			}
			lx.phrases = append(lx.phrases, fs)
		case strings.HasPrefix(f, "*"):
			lx.suffixes[strings.TrimPrefix(f, "*")] = max(lx.suffixes[strings.TrimPrefix(f, "*")], k)
		default:
			if old, ok := lx.words[f]; !ok || k > old {
				lx.words[f] = k
			}
		}
	}
	for _, l := range plainLanguages {
		for _, w := range l.fill {
			add(w, kindNone)
		}
		for _, w := range l.numeric {
			add(w, kindNumeric)
		}
		for _, w := range l.free {
			add(w, kindFree)
		}
	}
	// Longest first, so that "nombre de usuario" wins over "nombre".
	sortByLen := func(n int, less func(i, j int) bool, swap func(i, j int)) {
		for i := 1; i < n; i++ {
			for j := i; j > 0 && less(j, j-1); j-- {
				swap(j, j-1)
			}
		}
	}
	sortByLen(len(lx.phrases), func(i, j int) bool { return len(lx.phrases[i]) > len(lx.phrases[j]) },
		func(i, j int) { lx.phrases[i], lx.phrases[j] = lx.phrases[j], lx.phrases[i] })
	sortByLen(len(lx.subs), func(i, j int) bool { return len(lx.subs[i].s) > len(lx.subs[j].s) },
		func(i, j int) { lx.subs[i], lx.subs[j] = lx.subs[j], lx.subs[i] })
	return lx
}

// bracketRE finds the bracketed parts of a prompt: defaults ([8080],
// (app)), offered answers ([y/N]), notes ((2 letter code)).
var bracketRE = regexp.MustCompile(`[\[(<（]([^\[\]()<>（）]*)[\])>）]`)

// rangeRE is a numbered range offered in brackets: 1-3, 0..9.
var rangeRE = regexp.MustCompile(`^\s*(\d{1,4})\s*(?:-|–|\.\.)\s*(\d{1,4})\s*$`)

// shellPromptRE is a shell or REPL prompt: "bob@host:~/src$ ", "# ",
// "(venv) alice@box %", "PS C:\Users\bob> ", ">>> ", "mysql> ", and
// "root@vm ~ #", "[bob@host src]$" (user@host and at most one word), and
// the debuggers' "(gdb) ", "(lldb) ", "(Pdb) " and redis-cli's "redis
// 127.0.0.1:6379> ", which the detector calls commands too (tool_repl).
// A prompt of this shape whose name holds a secret word ("MASTERKEY> ")
// is SecretPrompt's (replSecretLabel), whatever this says.
var shellPromptRE = regexp.MustCompile(`^\s*(\([^()\s]{1,40}\)\s*)?(PS\s+)?[^\s:]*(:[^\s]*)?(\$|#|%|>|❯|➜|»|>>>)\s*$|^\s*\[?[\w.-]+@[\w.-]+(\s+[^\s$#%]+)?\]?\s*[$#%]\s*$|^\s*\((gdb|lldb|Pdb|pdb|ipdb)\)\s*$|^\s*redis\s+[^\s>]+>\s*$`)

// plainPrompt is what the prompt's label says about the answer: its kind
// when every word is a known non-secret field or filler, the answers it
// offers, its default, and whether it offers a numbered range holding n.
type plainPrompt struct {
	kind    plainKind
	label   bool // every word of the label is known
	options []string
	def     string
	lo, hi  int
	shell   bool
}

func judgePrompt(prompt string) plainPrompt {
	prompt = clipEnd(prompt, MaxPromptBytes)
	if !utf8.ValidString(prompt) {
		prompt = strings.ToValidUTF8(prompt, "\uFFFD")
	}
	var p plainPrompt
	lines := strings.Split(strings.TrimRight(prompt, " \t\r\n"), "\n")
	if shellPromptRE.MatchString(lines[len(lines)-1]) && len(lines) == 1 {
		p.shell = true
		return p
	}
	p.lo, p.hi = -1, -1
	var notes []string
	rest := bracketRE.ReplaceAllStringFunc(norm.NFKC.String(prompt), func(m string) string {
		c := strings.TrimSpace(bracketRE.FindStringSubmatch(m)[1])
		switch {
		case c == "":
		case rangeRE.MatchString(c):
			r := rangeRE.FindStringSubmatch(c)
			p.lo, _ = strconv.Atoi(r[1])
			p.hi, _ = strconv.Atoi(r[2])
		case strings.ContainsAny(c, "/|,") && !strings.ContainsAny(c, " \t") && !looksPath(c):
			for _, o := range strings.FieldsFunc(c, func(r rune) bool { return r == '/' || r == '|' || r == ',' }) {
				p.options = append(p.options, strings.ToLower(strings.Trim(o, "<>[]")))
			}
		case strings.ContainsAny(c, "/|") && strings.Count(c, " ") > 0 && !looksPath(c):
			for _, o := range strings.FieldsFunc(c, func(r rune) bool { return r == '/' || r == '|' || r == ',' || r == ' ' }) {
				p.options = append(p.options, strings.ToLower(strings.Trim(o, "<>[]")))
			}
		case !strings.ContainsAny(c, " \t"):
			p.def = c
		default:
			notes = append(notes, c)
		}
		return " "
	})
	p.kind, p.label = plainLexicon.judge(strings.Join(append([]string{rest}, notes...), "\n"))
	return p
}

// judge reports whether every word of label is a known non-secret field
// or filler, and the kind of value it asks for (the freest of its fields).
func (lx *plainLex) judge(label string) (plainKind, bool) {
	raw := strings.FieldsFunc(label, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
	})
	var words []string
	for _, tok := range raw {
		for _, part := range splitIdentifier(tok) {
			if f := fold(part); f != "" {
				words = append(words, f)
			}
		}
	}
	kind := kindNone
	known := false
	for i := 0; i < len(words); {
		w := words[i]
		if !allWordScript(w) {
			k, ok := lx.consumeSubs(w)
			if !ok {
				return kindNone, false
			}
			kind, known, i = max(kind, k), true, i+1
			continue
		}
		if n, k := lx.phraseAt(words, i); n > 0 {
			kind, known, i = max(kind, k), true, i+n
			continue
		}
		if k, ok := lx.words[w]; ok {
			kind, known, i = max(kind, k), true, i+1
			continue
		}
		if isDigits(w) {
			i++
			continue
		}
		matched := false
		for suf, k := range lx.suffixes {
			if strings.HasSuffix(w, suf) && len(w) > len(suf) {
				kind, known, matched = max(kind, k), true, true
				break
			}
		}
		if !matched {
			return kindNone, false
		}
		i++
	}
	return kind, known
}

func (lx *plainLex) phraseAt(words []string, i int) (int, plainKind) {
	for _, ph := range lx.phrases {
		if i+len(ph) > len(words) {
			continue
		}
		ok := true
		for j, w := range ph {
			if words[i+j] != w {
				ok = false
				break
			}
		}
		if ok {
			return len(ph), lx.kinds[strings.Join(ph, " ")]
		}
	}
	return 0, kindNone
}

// consumeSubs removes the known substrings from a word of a script
// written without word boundaries and reports whether nothing but marks
// and digits is left.
func (lx *plainLex) consumeSubs(w string) (plainKind, bool) {
	kind := kindNone
	for _, s := range lx.subs {
		if strings.Contains(w, s.s) {
			w = strings.ReplaceAll(w, s.s, " ")
			kind = max(kind, s.kind)
		}
	}
	for _, r := range w {
		if unicode.IsLetter(r) {
			return kindNone, false
		}
	}
	return kind, true
}

// yesNoWords are the yes and no answers of many languages, folded.
var yesNoWords = map[string]bool{
	"y": true, "n": true, "yes": true, "no": true, "ja": true, "nein": true, "nee": true, "nej": true, "oui": true,
	"non": true, "si": true, "sim": true, "nao": true, "да": true, "нет": true, "tak": true, "nie": true, "ano": true,
	"ne": true, "evet": true, "hayir": true, "igen": true, "nem": true, "kylla": true, "ei": true, "ok": true,
	"はい": true, "いいえ": true, "是": true, "否": true, "네": true, "아니요": true, "ναι": true, "οχι": true,
}

// plainAnswer reports whether there is positive evidence that input,
// typed at prompt, is not a secret (see the top of this file). IsSecret
// judges every answer without it secret.
func plainAnswer(prompt, input string) bool {
	v := strings.TrimSpace(clipEnd(input, MaxInputBytes))
	if utf8.RuneCountInString(v) <= 1 || yesNoWords[fold(v)] {
		return true
	}
	if isDigits(v) && len(v) <= 2 {
		return true
	}
	p := judgePrompt(prompt)
	if p.shell {
		return true // SecretValue judges the command
	}
	lv := strings.ToLower(v)
	for _, o := range p.options {
		if lv == o {
			return true
		}
	}
	if n, err := strconv.Atoi(v); err == nil && p.lo >= 0 && n >= p.lo && n <= p.hi {
		return true
	}
	if p.def != "" && isNumber(v) && isNumber(p.def) && weakFree(prompt) {
		return true
	}
	if p.def != "" && looksPath(v) && looksPath(p.def) {
		return true
	}
	if !p.label {
		return false
	}
	switch p.kind {
	case kindFree:
		return true
	case kindNumeric:
		return isNumber(v)
	}
	return false
}

// weakFree reports whether the prompt has no weak secret word (key, code,
// token, PIN), so that its default may vouch for the answer's kind.
func weakFree(prompt string) bool {
	_, weak := weakLex.match(newPromptDoc(prompt))
	return !weak
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// isNumber: digits with at most one decimal point or sign, a size such
// as 8080 or 1.5.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	a, b, ok := strings.Cut(s, ".")
	return isDigits(a) && (!ok || isDigits(b))
}

// looksPath: an absolute, home or relative path, or a file name with an
// extension, without spaces.
func looksPath(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t") {
		return false
	}
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") || strings.HasPrefix(s, "./") ||
		strings.HasPrefix(s, "../") || (len(s) > 2 && s[1] == ':' && (s[2] == '\\' || s[2] == '/'))
}
