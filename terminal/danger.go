package terminal

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Danger is a learned judgement: a logistic model over general evidence
// (what the question says will happen, what the command line does, which
// answer is the default, whether the program is a console opened in a
// writing mode), never over one program's text. Its weights are fitted
// (danger_fit.go) on the capture corpus, and its probability is the
// response's danger_confidence. docs/terminal.md says how it was fitted and
// scored.

// evidence is one feature of the danger model: a name, what it means (for
// danger_reason) and a hand-set prior weight, the fit's starting point and
// the centre of its regularisation, so evidence that the training data
// never shows keeps the weight its meaning gives it.
type evidence struct {
	name  string
	says  string // a reason: "the prompt says %q"
	prior float64
}

// The words of destruction, grouped by what they say will happen.
var (
	destroyWords     = `reset|uninstall\w*|delete[ds]?|deleting|deletion|remove[ds]?|removing|erase[ds]?|erasing|wipe[ds]?|wiping|destroy\w*|purg\w+|kill\w*|obliterat\w+|shred\w*|drop\w*|truncat\w+|zap\w*|uncommit|rm|clean\w*`
	overwriteWords   = `overwrit\w+|replac\w+|clobber\w*|already exists?|exists|supersede`
	loseWords        = `discard\w*|lose|los[ti]ng?|lost|without saving|not been saved|haven't been saved|not saved|unsaved|modified buffers?|buffer \S+ modified|abandon\w*|revert\w*|reverse\w*`
	formatWords      = `format\w*|fix\w*|repair\w*|rebuild\w*|salvage|mkfs|partition table|wipe out|label type|new label|disk ?label|reformat\w*|luksformat|unusable`
	irreversibleWord = `cannot be undone|can't be undone|not be undoable|irreversibl\w+|permanently|all data|for good|will be lost|no way back|cannot be recovered|unrecoverable`
	sureWords        = `are you sure|really|sure you want|type '?yes'?|capital letters|if you understand`
	trustWords       = `host key|authenticity of host|continue connecting|fingerprint|trust (this|these|the) (certificate|key|host|server|site)s?|trust it`
	recoverWords     = `recover\w*|swap file|crashed|auto ?save`
	saveWords        = `save\w*|write out|write (the )?changes`
	// keepWords ask which of several to keep: the others go (a duplicate
	// finder's "preserve files [1 - 2, all]", "keep which files?").
	keepWords       = `keep which|which (\w+ )?(to keep|to preserve|should be kept)|preserve (files?|which|one)|(files?|ones?|copies) to (keep|preserve)`
	benignWords     = `install\w*|creat\w+|download\w*|enable\w*|continue|proceed|upgrade\w*|possibilities|correct|keep|restore|select|choose`
	warnWords       = `warning|caution|danger\w*|destructive|!!!`
	destroyCmdWords = destroyWords + `|revert|discard|uninstall|format|luks\w*format|restore|release|reset|removekey|killslot|-delete|--delete\S*|--rebuild\S*`
)

// wordsRE matches whole words of w in lower-cased text.
func wordsRE(w string) *regexp.Regexp { return regexp.MustCompile(`\b(` + w + `)\b`) }

var (
	destroyRE      = wordsRE(destroyWords)
	overwriteRE    = wordsRE(overwriteWords)
	loseRE         = wordsRE(loseWords)
	formatRE       = wordsRE(formatWords)
	irreversibleRE = wordsRE(irreversibleWord)
	sureRE         = wordsRE(sureWords)
	trustRE        = wordsRE(trustWords)
	recoverRE      = wordsRE(recoverWords)
	saveRE         = wordsRE(saveWords)
	keepRE         = wordsRE(keepWords)
	// sentenceEndRE ends a sentence inside a prompt: what follows the
	// last one is the question itself ("Buffer a.txt not saved. Save
	// it?").
	sentenceEndRE = regexp.MustCompile(`[.;!]\s+`)
	benignRE      = wordsRE(benignWords)
	warnRE2       = wordsRE(warnWords)
	// destroyCmdRE is a destructive subcommand, mode or flag on a command
	// line: "remove", "luksRemoveKey", "-delete", "release -d". A reason
	// names only the destructive word, never the rest of its token (which
	// may carry a value such as a key).
	destroyCmdRE = regexp.MustCompile(`(?i)(^|[\s/])(\S*(` + destroyCmdWords + `)\S*)`)
	// writeModeRE is a flag that opens a tool for writing, in expert mode
	// or forced: -w, -x (an inspector's expert mode), --write, --rw,
	// --force, --repair.
	writeModeRE = regexp.MustCompile(`(^|\s)(-w|-x|-rw|--write|--rw|--read-write|--expert|--force|-F|--repair|--fix|-y)(\s|$)`)
	// interactiveRE asks a program to confirm each action it takes:
	// rm -i, cp -i, find -ok, xargs -p.
	// readOnlyRE is a flag that opens a tool read-only or only to list.
	readOnlyRE    = regexp.MustCompile(`(^|\s)(-r|-n|-l|--read-?only|--dry-run|--list|--check|--no-act)(\s|$)`)
	interactiveRE = regexp.MustCompile(`(^|\s)(-i|-I|-ri|-ir|-si|-p|-ok|--interactive)(\s|$)`)
	// extractRE is a command line that extracts files into place: a first
	// argument in tar's bundled style with x (-xwf, xvf), an extract
	// subcommand (x, e, extract), or --extract anywhere. A question such a
	// command asks of each file is whether to write it over what is there.
	extractRE = regexp.MustCompile(`^(-[a-wyzA-Z]*x[a-zA-Z]*|[vwzjfkp]*x[vwzjfkp]*|e|extract)(\s|$)|(^|\s)--extract(\s|=|$)`)
	// deviceRE is a target that is a disk: a block device or an image.
	deviceRE = regexp.MustCompile(`(?i)(^|[\s=:])(/dev/(sd|hd|vd|xvd|nvme|mmcblk|loop|md|mapper/|dm-)\S*|\S+\.(img|iso|raw|qcow2?|vhdx?|vmdk|dd))(\s|$)`)
	// diskToolRE is the family of programs that exist to rewrite disks,
	// by the stems of their names: partition editors, formatters,
	// checkers, volume managers, filesystem debuggers.
	diskToolRE  = regexp.MustCompile(`(?i)^(\S*disk|parted|mk\w*fs(\.\w+)?|mkswap|mkntfs|wipefs|\w*fsck(\.\w+)?|lvm|pv\w+|vg\w+|lv\w+|xfs_\w+|debugfs|cryptsetup|mdadm|\w*fs_db|\w*parts)$`)
	answerYesRE = regexp.MustCompile(`(\[Y/n\]|\(Y/n\)|\[Yn|\[yes\]|\(yes\)|\[Y\]|<Y>|\(default:? y(es)?\))`)
	answerNoRE  = regexp.MustCompile(`(\[y/N\]|\(y/N\)|\(y,N\)|\[n/y\]|\[<?no>?[,\]]|\(n\)|\[N\]|\(N\)|<no>|\(default:? n(o)?\))`)
)

// dangerEvidence are the model's features, in the order of its weights.
var dangerEvidence = []evidence{
	{"prompt_destroy", "the prompt says %q", 3.0},
	{"prompt_overwrite", "the prompt says %q", 3.0},
	{"prompt_lose", "the prompt says %q", 3.0},
	{"prompt_format", "the prompt says %q", 3.0},
	{"prompt_irreversible", "the prompt says %q", 2.0},
	{"prompt_sure", "the prompt asks %q", 1.0},
	{"prompt_trust", "the prompt says %q", 3.0},
	{"prompt_recover", "the prompt says %q", 1.5},
	{"prompt_save", "the prompt asks to %q", -1.0},
	{"prompt_keep_selection", "the prompt asks %q: the others go", 3.0},
	{"prompt_benign", "the prompt says %q", -0.5},
	{"context_destroy", "the output before says %q", 1.0},
	{"context_overwrite", "the output before says %q", 1.0},
	{"context_lose", "the output before says %q", 1.0},
	{"context_format", "the output before says %q", 1.0},
	{"context_irreversible", "the output before says %q", 1.5},
	{"context_trust", "the output before says %q", 1.5},
	{"context_warning", "the output before warns: %q", 1.0},
	{"context_staged_write", "the session stages writes: %q", 1.0},
	{"command_destroy", "the command line says %q", 1.5},
	{"command_write_mode", "the command line opens for writing: %q", 1.0},
	{"command_interactive", "the command line asks to confirm each action: %q", 0.5},
	{"command_disk_target", "the command line targets a disk: %q", 1.0},
	{"program_disk_tool", "program %q rewrites disks", 1.5},
	{"default_yes", "the default answer is yes: %q", 0.3},
	{"default_no", "the default answer is no: %q", -0.3},
	{"type_password", "a secret is asked%.0s", -2.5},
	{"type_command", "a console%.0s", -1.5},
	{"type_free_text", "free text is asked%.0s", -1.5},
	{"console_writing", "a console opened in a writing mode%.0s", 3.5},
	{"console_disk_tool", "the console of %q, a program that rewrites disks", 3.0},
	{"command_read_only", "the command line opens read-only: %q", -1.5},
	{"secret_for_destruction", "a secret asked by a destructive command%.0s", 4.5},
	{"question_destructive_command", "a question of a destructive command%.0s", 1.0},
	{"question_says_destroy", "a question that says it destroys%.0s", 2.0},
	{"question_after_destroy", "a question after output that says it destroys%.0s", 2.0},
	{"question_of_disk_tool", "a question of a program that rewrites disks%.0s", 1.0},
	{"question_of_extraction", "a question of a command that extracts files in place: %q", 2.5},
	{"question_asks_save", "the question asks to save%.0s", -3.0},
}

// dangerBiasPrior is the prior of the intercept: with no evidence, a
// prompt is not dangerous.
const dangerBiasPrior = -2.5

// dangerInput is what the danger model judges: the prompt, its type, the
// lines before it (nearest last) and what started the program.
type dangerInput struct {
	Prompt      string
	Type        string
	Context     []string
	CommandLine string
	Program     string
}

// keyRE is an answer's key marked inside its word: (O)pen, [D]elete, o)verwrite.
var keyRE = regexp.MustCompile(`[\[(]?(\w)[\])](\w)`)

// unkey joins keyed answers back into their words, so "(D)elete it" and
// "o)verwrite" say delete and overwrite.
func unkey(s string) string { return keyRE.ReplaceAllString(s, "$1$2") }

// features are the model's inputs for in: 0 or 1 per evidence, and the
// text that matched, for the reason.
func (in dangerInput) features() ([]float64, []string) {
	x := make([]float64, len(dangerEvidence))
	why := make([]string, len(dangerEvidence))
	set := func(name, what string) {
		for i, e := range dangerEvidence {
			if e.name == name {
				x[i], why[i] = 1, clipText(what, 60)
				return
			}
		}
		panic("terminal: unknown danger evidence " + name)
	}
	// Words are matched once, lower-cased, on the prompt and on the
	// lines before it joined: the cost is a few regexp scans whatever the
	// context's length.
	keyed := unkey(in.Prompt)
	prompt := strings.ToLower(keyed)
	context := strings.ToLower(unkey(strings.Join(in.Context, "\n")))
	for _, f := range []struct {
		name string
		re   *regexp.Regexp
	}{{"destroy", destroyRE}, {"overwrite", overwriteRE}, {"lose", loseRE}, {"format", formatRE}, {"irreversible", irreversibleRE}, {"trust", trustRE}, {"recover", recoverRE}} {
		if m := f.re.FindString(prompt); m != "" {
			set("prompt_"+f.name, m)
		}
		if f.name == "recover" {
			// A recovery tool's banner says "recovery"; only a question
			// about recovering counts.
			continue
		}
		if m := f.re.FindString(context); m != "" {
			set("context_"+f.name, m)
		}
	}
	if m := sureRE.FindString(prompt); m != "" {
		set("prompt_sure", m)
	}
	if m := saveRE.FindString(prompt); m != "" {
		set("prompt_save", m)
	}
	if m := keepRE.FindString(prompt); m != "" {
		set("prompt_keep_selection", m)
	}
	// The question itself, after the prompt's last full sentence.
	question := prompt
	if loc := sentenceEndRE.FindAllStringIndex(prompt, -1); len(loc) > 0 {
		question = prompt[loc[len(loc)-1][1]:]
	}
	asksSave := saveRE.MatchString(question) && !destroyRE.MatchString(question) && !overwriteRE.MatchString(question) && !loseRE.MatchString(question)
	if m := benignRE.FindString(prompt); m != "" {
		set("prompt_benign", m)
	}
	if m := warnRE.FindString(context); m != "" {
		set("context_warning", m)
	} else if m := warnRE2.FindString(context); m != "" {
		set("context_warning", m)
	}
	staged := false
	if m := stagedWriteRE.FindString(context); m != "" {
		set("context_staged_write", m)
		staged = true
	}
	if m := answerYesRE.FindString(keyed); m != "" {
		set("default_yes", m)
	} else if m := answerNoRE.FindString(keyed); m != "" {
		set("default_no", m)
	}

	cmd := in.CommandLine
	prog := in.Program
	fields := strings.Fields(cmd)
	if prog == "" && len(fields) > 0 {
		prog = fields[0]
	}
	prog = prog[strings.LastIndexByte(prog, '/')+1:]
	// The command line's arguments, less the program's own name: a
	// program called "rm" or "wipefs" is judged by its name stem below.
	args := cmd
	if len(fields) > 0 {
		args = strings.Join(fields[1:], " ")
	}
	destroyCmd := false
	if m := destroyCmdRE.FindStringSubmatch(args); m != nil {
		set("command_destroy", strings.ToLower(m[3]))
		destroyCmd = true
	} else if prog != "" && destroyRE.MatchString(strings.ToLower(prog)) {
		set("command_destroy", prog)
		destroyCmd = true
	}
	writeMode := false
	if m := writeModeRE.FindStringSubmatch(args); m != nil {
		set("command_write_mode", m[2])
		writeMode = true
	}
	if m := interactiveRE.FindStringSubmatch(args); m != nil {
		set("command_interactive", m[2])
	}
	if m := deviceRE.FindStringSubmatch(args); m != nil {
		set("command_disk_target", strings.TrimSpace(m[2]))
	}
	readOnly := false
	if m := readOnlyRE.FindStringSubmatch(args); m != nil {
		set("command_read_only", m[2])
		readOnly = true
	}
	diskTool := prog != "" && diskToolRE.MatchString(prog)
	if diskTool {
		set("program_disk_tool", prog)
	}

	// Whether the question, or the output just before it, says it
	// destroys: any prompt_ or context_ evidence of destruction.
	saysDestroy, afterDestroy := false, false
	for i, e := range dangerEvidence {
		if x[i] != 0 && strings.HasPrefix(e.name, "prompt_") && e.prior > 1.2 {
			saysDestroy = true
		}
		if x[i] != 0 && strings.HasPrefix(e.name, "context_") && e.prior > 0 {
			afterDestroy = true
		}
	}
	switch in.Type {
	case TypePassword:
		set("type_password", "")
		if destroyCmd {
			set("secret_for_destruction", "")
		}
	case TypeCommand, TypeUnknown:
		// A program reading with no prompt of its own is a console too.
		set("type_command", "")
		if writeMode || staged {
			set("console_writing", "")
		}
		if diskTool && !readOnly {
			set("console_disk_tool", prog)
		}
	case TypeText, TypePath:
		set("type_free_text", "")
	case TypeYesNo, TypeChoice:
		if destroyCmd {
			set("question_destructive_command", "")
		}
		if saysDestroy {
			set("question_says_destroy", "")
		}
		if afterDestroy {
			set("question_after_destroy", "")
		}
		if diskTool && !readOnly {
			set("question_of_disk_tool", "")
		}
		if m := extractRE.FindStringSubmatch(args); m != nil {
			set("question_of_extraction", strings.TrimSpace(m[0]))
		}
		if asksSave {
			set("question_asks_save", "")
		}
	}
	return x, why
}

// DangerModel is the fitted logistic model: a weight per evidence, an
// intercept, and the probability at which a prompt is called dangerous.
// Fit records what it was fitted on and how its settings were chosen.
type DangerModel struct {
	Weights   []Weight  `json:"weights"`
	Bias      float64   `json:"bias"`
	Threshold float64   `json:"threshold"`
	Fit       FitRecord `json:"fit"`
}

// Weight is one evidence's fitted weight and the prior it was fitted from.
type Weight struct {
	Feature string  `json:"feature"`
	Weight  float64 `json:"weight"`
	Prior   float64 `json:"prior"`
}

// FitRecord is the provenance of a fitted DangerModel.
type FitRecord struct {
	// Data names the captures: the corpus, how many, how many dangerous,
	// how many programs and families.
	Data string `json:"data"`
	// Method is the fit: the loss, the optimiser, the prior.
	Method string `json:"method"`
	// Lambda is the prior's strength, and Chosen how it and the threshold
	// were chosen (on families held out of the fit).
	Lambda float64 `json:"lambda"`
	Chosen string  `json:"chosen"`
	// Command reproduces the file.
	Command string `json:"command"`
}

// ErrDangerModel means the built-in danger model does not match the
// evidence this build computes: a build fault, caught at start.
var ErrDangerModel = errors.New("terminal: danger model does not match its features")

// priorModel is the model before any fit: the prior weights.
func priorModel() *DangerModel {
	m := &DangerModel{Bias: dangerBiasPrior, Threshold: 0.5}
	for _, e := range dangerEvidence {
		m.Weights = append(m.Weights, Weight{Feature: e.name, Weight: e.prior, Prior: e.prior})
	}
	return m
}

// check reports whether m's features are this build's evidence, in order.
func (m *DangerModel) check() error {
	if len(m.Weights) != len(dangerEvidence) {
		return fmt.Errorf("%w: %d weights for %d evidence", ErrDangerModel, len(m.Weights), len(dangerEvidence))
	}
	for i, e := range dangerEvidence {
		if m.Weights[i].Feature != e.name {
			return fmt.Errorf("%w: feature %d is %q, want %q", ErrDangerModel, i, m.Weights[i].Feature, e.name)
		}
		if math.IsNaN(m.Weights[i].Weight) || math.IsInf(m.Weights[i].Weight, 0) {
			return fmt.Errorf("%w: weight of %q is %v", ErrDangerModel, e.name, m.Weights[i].Weight)
		}
	}
	if !(m.Threshold > 0 && m.Threshold < 1) {
		return fmt.Errorf("%w: threshold %v outside (0,1)", ErrDangerModel, m.Threshold)
	}
	return nil
}

// probability is the model's P(dangerous | x).
func (m *DangerModel) probability(x []float64) float64 {
	z := m.Bias
	for i, v := range x {
		z += m.Weights[i].Weight * v
	}
	return 1 / (1 + math.Exp(-z))
}

// Judge decides danger for in: whether it is dangerous, the probability,
// and a reason naming the evidence that weighed most towards danger.
func (m *DangerModel) judge(in dangerInput) (bool, float64, string) {
	x, why := in.features()
	p := m.probability(x)
	best, bestW := -1, 0.0
	for i, v := range x {
		if v != 0 && m.Weights[i].Weight > bestW {
			best, bestW = i, m.Weights[i].Weight
		}
	}
	reason := ""
	if best >= 0 {
		reason = fmt.Sprintf(dangerEvidence[best].says, why[best])
	}
	p = math.Round(p*1000) / 1000
	return p >= m.Threshold, p, reason
}

// dangerModelJSON is the fitted model the daemon serves, written by
// `go run ./tools/terminal-eval -fit-danger`.
//
//go:embed danger_model.json
var dangerModelJSON []byte

// DangerModelFile is where dangerModelJSON lives, relative to the module root.
const DangerModelFile = "terminal/danger_model.json"

// ShippedDangerModel is the danger model built into the daemon.
func ShippedDangerModel() (*DangerModel, error) {
	m := new(DangerModel)
	if err := json.Unmarshal(dangerModelJSON, m); err != nil {
		return nil, fmt.Errorf("terminal: built-in danger model: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// WithDangerModel returns a copy of d that judges danger with m; d is not
// changed.
func (d *Detector) WithDangerModel(m *DangerModel) (*Detector, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	out := *d
	out.danger = m
	return &out, nil
}
