package terminal

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"

	"github.com/viterin/vek/vek32"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/internal/clip"
)

// Prompt types.
const (
	TypePassword = "password"
	TypeYesNo    = "yes_no"
	TypeChoice   = "choice"
	TypePath     = "path"
	TypeText     = "text"
	TypeCommand  = "command"
	TypeUnknown  = "unknown"
	notPrompt    = "not_prompt"
)

// Embedder embeds texts as unit-length vectors, one per text, all of one
// length; the daemon passes the model engine, tests a fake.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// rule is a structural prompt pattern with its prior strength.
type rule struct {
	name     string
	typ      string
	re       *regexp.Regexp
	strength float64
}

func r(name, typ string, strength float64, re string) rule {
	return rule{name: name, typ: typ, strength: strength, re: regexp.MustCompile(re)}
}

// rules are checked in order on the last line; the first match wins. They
// describe families of prompts (confirmation wording, bracketed answer
// lists, REPL and pager shapes), never one program's text: see
// docs/terminal.md for how they were written and scored.
var rules = []rule{
	r("sudo_password", TypePassword, 0.97, `(?i)^\[sudo\] password for [^:]+:\s*$`),
	r("password_colon", TypePassword, 0.95, `(?i)\b(password|passphrase|pass phrase|passcode|pin|token|secret( access)?( key)?|api key|one-time (code|password)|otp|verification code|2fa code|authentication code|\d+-digit code|code from your \w+( app)?)\b([^:?\n]|'[^'\n]*'|"[^"\n]*"){0,60}[:?]\s*$`),
	// Yes or no, and a key that abandons rather than answers: (y,n,^C),
	// (y,n,esc), (y/n, Return cancels connection, i for more info).
	r("yes_no_cancel", TypeYesNo, 0.95, `(?i)[\[(]\s*y(es)?\s*[,/]\s*n(o)?\s*,\s*(\^[a-z]|esc(ape)?|ctrl-[a-z]|(return|enter) cancels[^\])]{0,60})\s*[\])]\s*[?:]?\s*$`),
	// Yes and no as words, the default marked: ([yes]/no), ([yes]/no/?),
	// ([y]es, [n]o); or bare: Yes/No?
	r("yes_no_words", TypeYesNo, 0.95, `(?i)(\(\s*(\[y\]es\s*[,/]\s*\[n\]o|\[?yes\]?\s*/\s*\[?no\]?(\s*/\s*\?)?)\s*\)|\b(yes\s*/\s*no|y/n)\?)\s*[?:]?\s*$`),
	// More than two answers offered: (Y)es / (N)o / (A)lways, [ynesfdaq?],
	// [ynW...], [y,n,q,a,d,s,e,?], Y/I/N/O/D/Z.
	r("choice_letters", TypeChoice, 0.95, `(?i)(\[[a-z]{3,}[?.]+\]|\[[a-z?](,[a-z?]){2,}\]|\([a-z]\)[a-z]*\s*/\s*\([a-z]\)[a-z]*\s*/\s*\S|\b[a-z](/[a-z]){2,}\b)[^\n]{0,60}[?:>]?\s*$`),
	// Answers listed as words or keys: [<no>, yes, all, none, quit],
	// [1 - 2, all, quit], (y, n, !, ., q), (Yes/No/Cancel), [nyae]?, a
	// numbered range [0..3].
	r("choice_words", TypeChoice, 0.93, `(?i)(\[\s*<?[\w!.]+(\s*(-|\.\.)\s*\w+)?>?(\s*,\s*<?[\w!.]+>?){2,}\s*\]|\(\s*[\w!.]\s*(,\s*[^,()]{1,10}){2,}\)|\(\s*[a-z]\w*(\s*/\s*[a-z]\w*){2,}\s*\)|\[[a-z]{3,}\]\s*\?|\[\d+\s*(\.\.|-)\s*\d+\])\s*\)?\s*[?:]?\s*(\\c)?\s*$`),
	// Options marked by their key: (O)pen read-only, (E)dit anyway,
	// (R)ecover; o)verwrite O)verwrite-all s)kip.
	r("choice_keyed", TypeChoice, 0.93, `([\[(]\w[\])]\w*[^,/\n]{0,30}[,/]\s*){2,}[\[(]?\w[\])]\w*|(\b\w\)\w[\w-]*[,\s]+){2,}\w\)\w`),
	r("choice_options", TypeChoice, 0.9, `(?i)(\(\w+\)\s+\w+[^:]{0,40}options?|\[\w\]\w+, \[\w\]\w+)[^\n]*[:?]\s*$`),
	r("yes_no_brackets", TypeYesNo, 0.96, `(?i)(\?\s*\[(y|n|yes|no)\]\s*:|[\[(<]\s*(y\s*/\s*n|n\s*/\s*y|yn|ny|yes\s*/\s*no(\s*/\s*\[?fingerprint\]?)?|y\s*,\s*n|y(es)? or \[?n(o)?\]?|\[?y\]? or n|y|n)\s*[\])>]|yes\s*\|\s*esc|= yes\b.*= no\b|type '?yes'?)[^\n]{0,80}[?:]?\s*$`),
	// A command shown for confirmation before it runs (xargs -p, parallel -p).
	r("confirm_command", TypeYesNo, 0.9, `\S\?\.{3}\s*$`),
	// Asking what to do, not whether: the answers are actions.
	r("choice_action", TypeChoice, 0.9, `(?i)\b(what|how) (do|would|shall|should) (you|we|i) (want to|like to|wish to)? ?(do|proceed|continue|handle)\b[^?]{0,200}\?\s*$`),
	// Whether, ending with a colon: "Are you sure you want to release it:".
	r("yes_no_sure", TypeYesNo, 0.9, `(?i)\b(are you (really )?sure|do you (really )?(want|wish)|really (want|wish))\b[^?:]{0,200}[?:]\s*$`),
	r("yes_no_question", TypeYesNo, 0.9, `(?i)(\b(overwrite|remove|delete|replace|continue|proceed|are you sure|do you want|do you wish|confirm|ok|okay|descend|extract|fix|discard|revert|apply|assume|wipe|format|write|destroy|create|install|uninstall|retry|abort|keep|save|use|trust|accept|allow|enable|leave|quit|exit|anyway)\b[^?]{0,200}|^[^?]{0,200}\S\s*\.{3}|^<[^>]*>\s*)\?\s*(\.{3}|:\s*(y|n|yes|no))?\s*$`),
	r("menu_select", TypeChoice, 0.92, `(?i)(^#\?\s*$|\b(select|choose|pick|(enter|type) (a |the |your )?(choice|selection|option|number)( number)?)\b[^:?>]{0,80}[:?>]\s*$)`),
	r("save_key_path", TypePath, 0.95, `(?i)enter file in which to save[^:]*:\s*$`),
	r("rename_path", TypePath, 0.9, `(?i)\brename\b[^\n]{0,200}(->|:|>)\s*$`),
	r("path_colon", TypePath, 0.85, `(?i)\b(path|directory|folder|file ?name|file to \w+|location|save (it )?as)\b[^:]{0,80}:\s*$`),
	r("python_repl", TypeCommand, 0.97, `^(>>>|\.\.\.)\s?$`),
	r("command_help", TypeCommand, 0.95, `(?i)^\s*(\w+\s+)?(command|cmd)\b[^:]{0,40}:\s*$`),
	r("tool_repl", TypeCommand, 0.96, `^(\(gdb\)|sqlite>|mysql>|[a-z_]+=[#>]|irb\([^)]*\):\d+:\d+>|\(Pdb\)|redis[^>]*>|>)\s?$`),
	// REPL shapes: a short word (or nothing) and a prompt sign, no sentence.
	r("repl_shape", TypeCommand, 0.9, `^\s*((\S{0,24}\s?)?([>#$%:&]|\?-|>>|=>|->|\]|\*)|\?)\s?$`),
	r("pager_end", TypeCommand, 0.9, `(?i)(\(END\)|--\s*more\s*--|\(\d+%\)|\blines \d+-\d+\b|^:\s*$|press (return|enter|q)\b|\bq to quit\b)`),
	r("shell_prompt", TypeCommand, 0.9, `^[^\s]*(@[^\s:]+)?(:[^\s$#]*)?[$#%]\s?$`),
	// A field whose default answer is a path: "Login Shell [/bin/sh]:".
	r("path_default", TypePath, 0.85, `[\[(]\s*(/|~/|\./|\.\./)[^\])\s]*\s*[\])]:\s*$`),
	r("field_default", TypeText, 0.85, `(?i)\[[^\]]*\]:\s*$`),
	r("text_colon", TypeText, 0.7, `:\s*$`),
	r("question", TypeText, 0.6, `\?\s*$`),
}

// prompt-type examples for the semantic classifier; not_prompt holds
// ordinary output that merely contains a colon or a question mark.
var examples = map[string][]string{
	TypePassword: {"Password:", "Enter passphrase for key '/home/u/.ssh/id_ed25519':", "[sudo] password for alice:", "Enter PIN:",
		"Verify password:", "New password:", "Retype new password:", "Enter PEM pass phrase:", "Password for 'https://github.com':", "Enter database password:"},
	TypeYesNo: {"Do you want to continue? [Y/n]", "Overwrite existing file? (y/n)", "Are you sure you want to continue connecting (yes/no/[fingerprint])?",
		"Proceed anyway? (y,N)", "rm: remove regular file 'a.txt'?", "cp: overwrite 'b.txt'?", "Delete 3 tables? (yes/no):", "Is the information correct? [Y/n]",
		"Continue? [y/N]", "Do you wish to proceed?"},
	TypeChoice: {"Select an option [1-3]:", "Enter your choice:", "#?", "Please choose a number:", "Which one do you want? (1, 2 or 3):",
		"Pick a region:", "Select a profile [default]:", "Enter selection (default 1):"},
	TypePath: {"Enter file in which to save the key (/root/.ssh/id_rsa):", "Save as:", "Enter path to the config file:", "Output directory:",
		"Install location [/usr/local]:", "Where should I put the file?", "Destination folder:"},
	TypeText: {"Full Name []:", "Country Name (2 letter code) [AU]:", "Enter your name:", "Email address:", "Commit message:", "Username:",
		"Project name (my-app):", "Enter a description:", "Organization Name (eg, company) [Internet Widgits Pty Ltd]:"},
	TypeCommand: {">>>", "sqlite>", "(gdb)", "mysql>", "$", "user@host:~/src$", "postgres=#", "irb(main):001:0>", ">", "root@box:/#"},
	notPrompt: {"Note: the file was saved.", "Downloading packages: 45%", "Compiling main.go", "error: cannot find module 'x'",
		"Why? Because the cache was stale.", "INFO 2024-01-01 server started on :8080", "total 48", "drwxr-xr-x 2 root root 4096 Jan 1 docs",
		"Build succeeded.", "Warning: deprecated option used", "Connecting to host example.com", "Time: 0.02s", "Done.", "3 files changed, 10 insertions(+)"},
}

var classes = []string{TypePassword, TypeYesNo, TypeChoice, TypePath, TypeText, TypeCommand, notPrompt}

// Detector decides whether output is waiting for input. It is safe for
// concurrent use.
type Detector struct {
	emb   Embedder
	dims  int         // length of every vector, checked once so vek never panics
	vecs  [][]float32 // unit-length example vectors
	label []int       // class index per example vector
	// builtin is how many of vecs are the built-in examples (the rest
	// were learned: the corpus, or a fold's training programs).
	builtin int
	T       float64
	danger  *DangerModel
}

// newBaseDetector embeds the built-in examples and fits the semantic
// classifier's temperature by leave-one-out on them.
func newBaseDetector(ctx context.Context, emb Embedder) (*Detector, error) {
	d := &Detector{emb: emb, danger: priorModel()}
	var texts []string
	for ci, c := range classes {
		for _, e := range examples[c] {
			texts = append(texts, e)
			d.label = append(d.label, ci)
		}
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("terminal: embed examples: %w", err)
	}
	if len(vecs) != len(texts) || len(vecs[0]) == 0 {
		return nil, fmt.Errorf("%w: %d vectors for %d examples", ErrEmbedding, len(vecs), len(texts))
	}
	d.dims = len(vecs[0])
	for _, v := range vecs {
		if len(v) != d.dims {
			return nil, fmt.Errorf("%w: example vectors of %d and %d dimensions", ErrEmbedding, d.dims, len(v))
		}
	}
	d.vecs, d.builtin = vecs, len(vecs)
	var scores [][]float64
	for i := range vecs {
		scores = append(scores, d.classScores(vecs[i], i))
	}
	d.T = calibrate.FitTemperature(scores, d.label)
	return d, nil
}

// classScores is, per class, the best cosine to its examples (skipping
// example skip, for leave-one-out). v has d.dims elements.
func (d *Detector) classScores(v []float32, skip int) []float64 {
	out := make([]float64, len(classes))
	for i := range out {
		out[i] = -1
	}
	for i, e := range d.vecs {
		if i == skip {
			continue
		}
		// Unit vectors: the dot product is the cosine.
		out[d.label[i]] = math.Max(out[d.label[i]], float64(vek32.Dot(e, v)))
	}
	return out
}

// Detection is the answer for one output tail.
type Detection struct {
	Detected       bool
	PromptText     string
	Confidence     float64
	Type           string
	MatchedPattern string
	Position       int // byte offset of the prompt's line in the input
	Dangerous      bool
	// DangerConfidence is the danger model's probability that answering
	// is dangerous; Dangerous is DangerConfidence at or above the model's
	// threshold.
	DangerConfidence float64
	DangerReason     string
}

// Example is a labelled prompt line for the semantic classifier: Type is
// a prompt type, or empty for a line that is not a prompt.
type Example struct {
	Text string `json:"text"`
	Type string `json:"type,omitempty"`
}

// ExampleFrom makes an example of a capture: its candidate prompt line,
// labelled with the prompt type when the program was waiting and as not a
// prompt otherwise. Text is empty when the capture has no line of text.
func ExampleFrom(raw []byte, waiting bool, typ string) Example {
	lines, _ := Clean(raw)
	last := lastText(lines)
	if last < 0 {
		return Example{}
	}
	if !waiting {
		typ = ""
	}
	return Example{Text: strings.TrimRight(lines[last].Text, " \t"), Type: typ}
}

// WithExamples returns a copy of d that also knows examples; d is not
// changed. The temperature stays the one fitted on the built-in examples.
func (d *Detector) WithExamples(ctx context.Context, examples []Example) (*Detector, error) {
	index := map[string]int{}
	for i, c := range classes {
		index[c] = i
	}
	var texts []string
	var labels []int
	for _, e := range examples {
		typ := e.Type
		if typ == "" {
			typ = notPrompt
		}
		ci, ok := index[typ]
		if !ok {
			return nil, fmt.Errorf("%w: example type %q", ErrBadArgument, e.Type)
		}
		texts = append(texts, e.Text)
		labels = append(labels, ci)
	}
	out := *d
	if len(texts) == 0 {
		return &out, nil
	}
	vecs, err := d.emb.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("terminal: embed examples: %w", err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("%w: %d vectors for %d examples", ErrEmbedding, len(vecs), len(texts))
	}
	for _, v := range vecs {
		if len(v) != d.dims {
			return nil, fmt.Errorf("%w: example vectors of %d and %d dimensions", ErrEmbedding, d.dims, len(v))
		}
	}
	out.vecs = append(append([][]float32(nil), d.vecs...), vecs...)
	out.label = append(append([]int(nil), d.label...), labels...)
	return &out, nil
}

// lastText is the index of the last line with text, or -1.
func lastText(lines []Line) int {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i].Text) != "" {
			return i
		}
	}
	return -1
}

// Hints is what the hub may know besides the screen: the command line that
// started the program ("fdisk disk.img"), the program's name, and its
// reading of the pty (package ptysignal). Any may be empty or nil.
type Hints struct {
	CommandLine string
	Program     string
	// ReadingInput: the foreground program is blocked reading the
	// terminal. True makes a silent program (dc, cat, ed) waiting; false
	// means nothing is waiting, whatever the screen shows.
	ReadingInput *bool
	// EchoOff and Canonical are the terminal's ECHO and ICANON modes.
	// Echo off in line mode (canonical true or unknown) is how getpass
	// asks for a secret, whatever the prompt's words; a line editor turns
	// both off and is not a secret.
	EchoOff   *bool
	Canonical *bool
}

// secretMode reports the getpass signature: echo off, line mode kept.
func (h Hints) secretMode() bool {
	return h.EchoOff != nil && *h.EchoOff && (h.Canonical == nil || *h.Canonical)
}

// readingConfidence is a detection's confidence when the hub says the
// program is blocked reading the terminal: the kernel's word, not a guess
// from the screen.
const readingConfidence = 0.9

// notReadingFactor scales a detection's confidence when the hub says the
// program is not reading the terminal.
const notReadingFactor = 0.8

// Limits on hints, checked before any matching.
const (
	MaxCommandLine = 4096
	MaxProgram     = 256
)

// Detect inspects the tail of some output, screen only. minConf is the
// detection threshold in [0,1].
func (d *Detector) Detect(ctx context.Context, raw []byte, minConf float64) (Detection, error) {
	return d.DetectWithHints(ctx, raw, Hints{}, minConf)
}

// DetectWithHints is Detect with what the hub knows about the program.
// Output with no text (empty or only whitespace) is not waiting.
func (d *Detector) DetectWithHints(ctx context.Context, raw []byte, h Hints, minConf float64) (Detection, error) {
	if minConf < 0 || minConf > 1 || math.IsNaN(minConf) {
		return Detection{}, ErrBadConfidence
	}
	if len(raw) > TailBytes {
		return Detection{}, fmt.Errorf("%w: text is limited to %d bytes", ErrTooLarge, TailBytes)
	}
	if len(h.CommandLine) > MaxCommandLine || len(h.Program) > MaxProgram {
		return Detection{}, fmt.Errorf("%w: command_line is at most %d bytes and program %d", ErrBadArgument, MaxCommandLine, MaxProgram)
	}
	reading := h.ReadingInput != nil && *h.ReadingInput
	notReading := h.ReadingInput != nil && !*h.ReadingInput
	v := viewOf(raw)
	if err := ctx.Err(); err != nil {
		return Detection{}, err
	}
	lines, last, partial := v.lines, v.last, v.partial
	cand := Line{}
	if last >= 0 {
		cand = lines[last]
	}
	text := strings.TrimRight(cand.Text, " \t")
	res := Detection{PromptText: strings.TrimSpace(cand.Text), Position: cand.Pos, Type: TypeUnknown}

	// A program that holds the whole terminal (the alternate screen, or a
	// screen painted by cursor moves) is an editor, pager, browser or
	// menu, waiting for keys. Its question, if it asks one, is on the row
	// where it left the cursor.
	if v.scr != nil {
		row := v.scr.questionText()
		res = Detection{PromptText: row, Position: len(raw), Type: TypeCommand, MatchedPattern: "full_screen", Confidence: 0.9}
		if t, name := inputBox(v.scr); t != "" {
			// The cursor is in a dialog's entry field: its label says
			// what to type, whatever the buttons below.
			res.Type, res.MatchedPattern = t, name
		} else if t := wordButtons(v.scr); t != "" {
			// A dialog's buttons name its answers, whatever its
			// question's words: Yes and No, or more.
			res.Type, res.MatchedPattern = t, "dialog_words"
		} else if r := screenRule(row); r != nil {
			res.Type, res.MatchedPattern = r.typ, "screen_"+r.name
		} else if t, name := screenButtons(v.scr); t != "" {
			res.Type, res.MatchedPattern = t, name
		} else if screenSelectRE.MatchString(row) {
			// An instruction to pick ("Select a type...") on the row
			// the program asks on: a menu.
			res.Type, res.MatchedPattern = TypeChoice, "screen_select"
		} else if bracketButtons(v.scr) {
			res.Type, res.MatchedPattern = TypeChoice, "dialog_bracket_buttons"
		} else if v.scr.emptyRows() >= 3 {
			// Rows of "~" mark the empty lines of a vi-family (modal)
			// editor: its keys are commands.
			res.MatchedPattern = "modal_editor"
		} else if editorRE.MatchString(v.scr.all()) {
			res.Type, res.MatchedPattern = TypeText, "full_screen_editor"
		}
		if h.secretMode() {
			res.Type, res.MatchedPattern = TypePassword, "echo_off"
		}
		if notReading {
			res.Confidence *= notReadingFactor
		}
		res.Detected = res.Confidence >= minConf
		if res.Detected {
			d.judgeDanger(&res, v, h)
		}
		return res, nil
	}

	if last < 0 || spinnerRE.MatchString(text) {
		if !reading {
			return Detection{}, nil
		}
		// Silent, or nothing but a spinner, yet blocked on the terminal:
		// waiting, for nothing the screen names.
		res = Detection{Type: TypeUnknown, MatchedPattern: "reading_input", Confidence: readingConfidence, Position: len(raw)}
		if h.secretMode() {
			res.Type, res.MatchedPattern = TypePassword, "echo_off"
		}
		res.Detected = res.Confidence >= minConf
		if res.Detected {
			d.judgeDanger(&res, v, h)
		}
		return res, nil
	}
	editing, editPrompt := lineEditing(raw)
	vec, err := d.emb.Embed(ctx, []string{shortWords(text, maxWordBytes)})
	if err != nil {
		return Detection{}, fmt.Errorf("terminal: embed prompt: %w", err)
	}
	if len(vec) != 1 || len(vec[0]) != d.dims {
		return Detection{}, fmt.Errorf("%w: want one vector of %d dimensions", ErrEmbedding, d.dims)
	}
	if err := ctx.Err(); err != nil {
		return Detection{}, err
	}
	probs := calibrate.Softmax(d.classScores(vec[0], -1), d.T)
	pNot := probs[len(classes)-1]

	var matched *rule
	for i := range rules {
		if rules[i].re.MatchString(cand.Text) || rules[i].re.MatchString(text) {
			matched = &rules[i]
			break
		}
	}
	// A line that ends with a newline is usually finished output, not a
	// prompt: programs leave the cursor on the prompt's line. Some print a
	// question with its answers and then a newline; those still count.
	waitFactor := 1.0
	if !partial {
		waitFactor = 0.5
		if matched != nil && (matched.typ == TypeYesNo || matched.typ == TypeChoice) {
			waitFactor = 0.9
		}
	}
	if matched != nil {
		res.Type, res.MatchedPattern = matched.typ, matched.name
		res.Confidence = waitFactor * (0.75*matched.strength + 0.25*(1-pNot))
		if matched.typ == TypeCommand && signOnlyRE.MatchString(text) && numberedMenu(lines, last) {
			// A bare sign under a numbered list asks for one of its
			// items, as a select loop's "#?" does.
			res.Type, res.MatchedPattern = TypeChoice, "numbered_menu"
		}
	} else {
		best := 0
		for i := 0; i < len(classes)-1; i++ {
			if probs[i] > probs[best] {
				best = i
			}
		}
		res.Type, res.MatchedPattern = classes[best], "semantic"
		res.Confidence = waitFactor * 0.8 * (1 - pNot)
	}
	if editing && !h.secretMode() && res.Confidence < readingConfidence {
		// A line editor is reading; with no prompt of its own the line
		// before is a banner, and an editor with no prompt reads commands.
		res.Confidence, res.MatchedPattern = readingConfidence, "line_editor"
		if !editPrompt {
			res.Type = TypeCommand
		}
	}
	if h.secretMode() {
		res.Type, res.MatchedPattern = TypePassword, "echo_off"
		res.Confidence = max(res.Confidence, 0.95)
	} else if reading && res.Confidence < readingConfidence {
		res.Confidence = readingConfidence
		if res.MatchedPattern == "semantic" {
			// Waiting by the kernel's word; the type stays the
			// classifier's best guess (right more often than "unknown"
			// on the corpus's dev half and test half alike).
			res.MatchedPattern = "reading_input"
		}
	}
	if notReading {
		// The kernel says nothing reads the terminal now. The program may
		// be about to (the hub looked a moment early) or read it in a way
		// the hub cannot see (a multiplexer's server): a plain prompt
		// still counts, a doubtful one does not.
		res.Confidence *= notReadingFactor
	}
	res.Confidence = math.Round(res.Confidence*1000) / 1000
	res.Detected = res.Confidence >= minConf
	if res.Detected {
		d.judgeDanger(&res, v, h)
	}
	return res, nil
}

// signOnlyRE is a prompt of nothing but a sign: ">", "?", "#?".
var signOnlyRE = regexp.MustCompile(`^\s*[>?#:]{1,2}\s*$`)

// numberedItemRE is an item of a numbered list: " 1. Africa", "2) Americas".
var numberedItemRE = regexp.MustCompile(`^\s*\d{1,3}[.)]\s+\S`)

// numberedMenu reports whether the lines just above lines[last] are a
// numbered list of at least two items.
func numberedMenu(lines []Line, last int) bool {
	n := 0
	for i := last - 1; i >= 0 && i >= last-contextLines; i-- {
		if !numberedItemRE.MatchString(lines[i].Text) {
			break
		}
		n++
	}
	return n >= 2
}

// judgeDanger sets res's danger from the model: the prompt, its type, what
// came before it on the screen and the command line.
func (d *Detector) judgeDanger(res *Detection, v view, h Hints) {
	in := v.evidence(res.Type, h)
	in.Prompt = res.PromptText
	res.Dangerous, res.DangerConfidence, res.DangerReason = d.danger.judge(in)
}

// view is what Detect reads of a tail: its last cleaned lines and, when a
// program holds the terminal, the screen it painted.
type view struct {
	lines   []Line
	last    int // the last line with text, or -1
	partial bool
	scr     *screen // nil unless a full-screen program holds the terminal
}

// viewOf reads raw. Only the end matters: the prompt and the lines before
// it. Cleaning the last 8 KiB keeps the cost flat whatever the tail's
// size; a painted screen is played from its last clear, within the tail.
func viewOf(raw []byte) view {
	start := 0
	if len(raw) > cleanBytes {
		start = len(raw) - cleanBytes
		if i := bytes.IndexByte(raw[start:], '\n'); i >= 0 {
			start += i + 1
		}
	}
	var v view
	v.lines, v.partial = LastLines(raw[start:])
	for i := range v.lines {
		v.lines[i].Pos += start
	}
	v.last = lastText(v.lines)
	if v.last != len(v.lines)-1 {
		v.partial = false
	}
	full := fullScreen(raw) || (v.last >= 0 && editorRE.MatchString(v.lines[v.last].Text))
	if full || len(addressRE.FindAllIndex(raw[start:], minPaint)) == minPaint {
		scr := renderScreen(raw[paintStart(raw):])
		if full || (scr.isPainted() && len(raw) > 0 && raw[len(raw)-1] != '\n') {
			v.scr = scr
		}
	}
	return v
}

// addressRE is a cursor addressing sequence (CUP or VPA).
var addressRE = regexp.MustCompile(`\x1b\[\d*(;\d*)?[Hfd]`)

// evidence is the danger model's input for a prompt of type typ: the
// candidate prompt, the lines before it (a screen's other rows) and the
// command line.
func (v view) evidence(typ string, h Hints) dangerInput {
	in := dangerInput{Type: typ, CommandLine: h.CommandLine, Program: h.Program}
	if v.scr != nil {
		q := v.scr.questionRow()
		in.Prompt = v.scr.questionText()
		for r := range v.scr.rows {
			if t := strings.TrimSpace(v.scr.text(r)); t != "" && r != q {
				in.Context = append(in.Context, t)
			}
		}
		return in
	}
	if v.last < 0 {
		return in
	}
	in.Prompt = strings.TrimSpace(v.lines[v.last].Text)
	for i := max(0, v.last-contextLines); i < v.last; i++ {
		in.Context = append(in.Context, v.lines[i].Text)
	}
	return in
}

// promptEvidence is the danger model's input for a capture, found as
// Detect finds it.
func promptEvidence(raw []byte, typ string, h Hints) dangerInput {
	if len(raw) > TailBytes {
		raw = raw[len(raw)-TailBytes:]
	}
	return viewOf(raw).evidence(typ, h)
}

// screenRules are the rules that name a question when they match the row
// a full-screen program left its cursor on; the rest (REPL and shell
// shapes, a colon at the end) would match any row of text.
var screenRules = map[string]bool{"sudo_password": true, "password_colon": true, "yes_no_cancel": true, "choice_letters": true, "choice_options": true, "choice_words": true, "choice_keyed": true,
	"yes_no_brackets": true, "yes_no_question": true, "yes_no_words": true, "choice_action": true, "yes_no_sure": true, "save_key_path": true, "rename_path": true}

func screenRule(row string) *rule {
	for i := range rules {
		if screenRules[rules[i].name] && rules[i].re.MatchString(row) {
			return &rules[i]
		}
	}
	return nil
}

// Buttons of a dialog box: < Yes > < No >, <Ok> <Cancel>, [ Quit ].
var (
	yesNoButtonsRE = regexp.MustCompile(`(?i)<\s*yes\s*>.*<\s*no\s*>`)
	buttonsRE      = regexp.MustCompile(`(?i)(<\s*(ok|cancel|select|exit|back)\s*>|\[\s*(ok|cancel|quit|proceed|close|select|exit|back|write|delete)\s*\])`)
)

// screenButtons types a painted screen by its buttons: Yes and No make a
// confirmation, a bar of many actions a command screen (a partition
// editor's Delete, Write, Quit...), other buttons a choice among the
// screen's items.
func screenButtons(s *screen) (string, string) {
	all := s.all()
	if yesNoButtonsRE.MatchString(all) {
		return TypeYesNo, "dialog_yes_no"
	}
	if len(actionRE.FindAllStringIndex(all, minActions)) == minActions {
		return TypeCommand, "action_bar"
	}
	if len(buttonsRE.FindAllStringIndex(all, 2)) == 2 {
		return TypeChoice, "dialog_buttons"
	}
	return "", ""
}

// screenSelectRE is an instruction to pick one of the screen's items.
var screenSelectRE = regexp.MustCompile(`(?i)^\W{0,3}(select|choose|pick) (a|an|the|one|your|which|from)\b`)

// boxDrawing strips a row's box-drawing characters and blanks.
func boxDrawing(r rune) bool { return r == ' ' || r >= 0x2500 && r <= 0x257F || r == '|' }

// fieldPathRE is an entry field pre-filled with a path.
var fieldPathRE = regexp.MustCompile(`^(/|~/|\./|\.\./)\S*$`)

// okButtonRE is a dialog's OK button.
var okButtonRE = regexp.MustCompile(`(?i)<\s*ok\s*>|\[\s*ok\s*\]`)

// inputBox types a dialog whose cursor is in an entry field (a boxed or
// underlined row, empty or holding a path) above an OK button: by the
// field's label (a secret's words, a path's) or its path, else text.
func inputBox(s *screen) (string, string) {
	if s.row < 0 || s.row >= len(s.rows) || !okButtonRE.MatchString(s.all()) {
		return "", ""
	}
	raw := s.text(s.row)
	field := strings.TrimFunc(raw, boxDrawing)
	underline := strings.Trim(field, "_") == "" && strings.Contains(field, "_")
	if !strings.ContainsAny(raw, boxSides) && !underline {
		return "", ""
	}
	if field != "" && !underline && !fieldPathRE.MatchString(field) {
		return "", ""
	}
	if fieldPathRE.MatchString(field) {
		return TypePath, "input_box_path"
	}
	for r := s.row - 1; r >= 0 && r >= s.row-6; r-- {
		label := strings.TrimFunc(s.text(r), boxDrawing)
		if label == "" || strings.Trim(label, "_") == "" {
			continue
		}
		for i := range rules {
			if (rules[i].typ == TypePassword || rules[i].typ == TypePath) && rules[i].re.MatchString(label) {
				return rules[i].typ, "input_box_" + rules[i].name
			}
		}
		break
	}
	return TypeText, "input_box"
}

// bracketButtonRowRE is a row of nothing but two to four bracketed
// buttons: "[<Close>]  [ Configure ]", "< Save >  < Discard >".
var bracketButtonRowRE = regexp.MustCompile(`^(\s*(\[\s*<?\s*[A-Za-z][\w-]*( [\w-]+)?\s*>?\s*\]|<\s*[A-Za-z][\w-]*( [\w-]+)?\s*>)){2,4}\s*$`)

// bracketButtons reports whether a row inside a box is a dialog's row of
// bracketed buttons: its answers.
func bracketButtons(s *screen) bool {
	for r := range s.rows {
		t := s.text(r)
		if !strings.ContainsAny(t, boxSides) {
			continue
		}
		if bracketButtonRowRE.MatchString(s.inner(r)) {
			return true
		}
	}
	return false
}

// actionRE is one bracketed button of a program's action bar: [ Delete ].
var actionRE = regexp.MustCompile(`\[\s*[A-Za-z][\w-]{0,10}\s*\]`)

// minActions is how many buttons make an action bar rather than a
// dialog's answers (dialogs offer two to four).
const minActions = 6

// buttonWords are the words a dialog's plain buttons say.
var buttonWords = map[string]bool{"yes": true, "no": true, "cancel": true, "ok": true, "abort": true, "retry": true, "ignore": true, "skip": true, "all": true, "none": true, "quit": true}

// buttonSepRE splits a row of plain buttons: box sides, brackets and runs
// of spaces.
var buttonSepRE = regexp.MustCompile(`[\s\[\]<>│┃|]*[\[\]<>│┃|][\s\[\]<>│┃|]*|\s{2,}`)

// wordButtons types a screen by a row of plain buttons ("Yes  No
// Cancel", "[ Yes ]  [ No ]"): Yes and No alone make a yes/no question,
// more answers a choice; "" when no row is only buttons.
func wordButtons(s *screen) string {
	for r := len(s.rows) - 1; r >= 0; r-- {
		t := strings.TrimSpace(s.text(r))
		if t == "" || len(t) > 80 {
			continue
		}
		var words []string
		only := true
		for _, w := range buttonSepRE.Split(t, -1) {
			if w = strings.ToLower(strings.TrimSpace(w)); w == "" {
				continue
			}
			if !buttonWords[w] {
				only = false
				break
			}
			words = append(words, w)
		}
		if !only || len(words) < 2 || len(words) > 4 {
			continue
		}
		if len(words) == 2 && words[0] == "yes" && words[1] == "no" {
			return TypeYesNo
		}
		return TypeChoice
	}
	return ""
}

// spinnerRE is a line of nothing but progress glyphs (braille spinners,
// block and box characters): a busy program, not a prompt.
var spinnerRE = regexp.MustCompile(`^[\s\x{2800}-\x{28FF}\x{2500}-\x{259F}|/\\.-]+$`)

// contextLines is how many lines before a prompt count as its context for
// danger: enough for a boxed warning and the lines after it.
const contextLines = 16

// cleanBytes is how much of the output's end Detect cleans and reads.
const cleanBytes = 8 << 10

// fullScreen reports whether the output leaves the terminal on the
// alternate screen: its last switch (ESC[?1049, 1047 or 47) is on (h), not
// off (l).
func fullScreen(raw []byte) bool {
	// From the end, the last private mode switch of the alternate screen
	// decides: one backwards scan for ESC [ ?, not one per mode.
	end := len(raw)
	for {
		i := bytes.LastIndex(raw[:end], []byte("\x1b[?"))
		if i < 0 {
			return false
		}
		rest := raw[i+3:]
		for _, mode := range []string{"1049", "1047", "47"} {
			if bytes.HasPrefix(rest, []byte(mode)) && len(rest) > len(mode) {
				switch rest[len(mode)] {
				case 'h':
					return true
				case 'l':
					return false
				}
			}
		}
		end = i
	}
}

// lineEditing reports whether the output leaves a line editor reading: its
// last bracketed-paste switch (ESC[?2004) is on. Readline, libedit and
// most REPLs turn it on when they start reading a line and off when the
// line is accepted, so "on" at the end means a line is being read now,
// whatever the prompt looks like (bc prints no prompt at all). It also
// reports whether the output after the switch has text: the prompt.
func lineEditing(raw []byte) (on, prompt bool) {
	i := bytes.LastIndex(raw, []byte("\x1b[?2004h"))
	if i < 0 || bytes.LastIndex(raw, []byte("\x1b[?2004l")) > i {
		return false, false
	}
	lines, _ := Clean(raw[i+len("\x1b[?2004h"):])
	return true, lastText(lines) >= 0
}

// editorRE is what modeless editors show: a help bar of control keys
// (^X Exit, Ctrl-K), an Emacs-style mode line, a line/column status.
var editorRE = regexp.MustCompile(`(?i)(\^[A-Z] ?[A-Z][a-z]+|\bctrl-[a-z]\b|\bemacs\b|\beditor\b|\bL:\s*\d+\s+C:\s*\d+|\bL:\[\s*\d+|-L\d+-|\((text|fundamental)\)|\b\d{1,2}Save\b|\bmodified\b)`)

var warnRE = regexp.MustCompile(`(?i)\b(warning|danger|caution)\b.*\b(contains|exist|data|filesystem|file system|lost|destroy)|\bcontains an? \S+ (file ?system|partition table)|\bwill be (lost|erased|destroyed|overwritten)\b|\bmake a backup\b|\bback ?up (your|the|all) (data|files|disk|drive)\b`)

// stagedWriteRE is output saying that changes are held until written: the
// session's commands rewrite a disk or table once "w" is typed.
var stagedWriteRE = regexp.MustCompile(`(?i)\bwrite\b[^.\n]*\b(changes|partition table|to disk)\b|\b(changes|partition table)\b[^.\n]*\bwrite\b`)

// Dangerous reports whether answering the prompt would destroy data or
// weaken security, judging by the prompt, its type and the lines before it
// alone, with the danger model the daemon ships (InferExpectedInput has no
// command line). It says why, naming the evidence.
func Dangerous(prompt, typ string, context []string) (bool, string) {
	m, err := shippedDanger()
	if err != nil {
		// The same file failed NewDetector at start, so a daemon never
		// serves without it; a library caller gets the prior.
		m = priorModel()
	}
	ok, _, why := m.judge(dangerInput{Prompt: prompt, Type: typ, Context: context})
	return ok, why
}

// shippedDanger is ShippedDangerModel, parsed once.
var shippedDanger = sync.OnceValues(ShippedDangerModel)

// clipText trims s and shortens it to n bytes on a rune boundary: a reason
// cut inside a character would not be valid UTF-8, and the response
// carrying it could not be sent.
func clipText(s string, n int) string { return clip.String(strings.TrimSpace(s), n) }
