// Command terminal-eval measures input-prompt detection on labelled
// captures of real programs: waiting-detection precision, recall and F1,
// prompt-type accuracy, dangerous recall and false positives, and how well
// danger_confidence is calibrated.
//
//	go run ./tools/terminal-eval [-dir terminal/testdata/corpus] [-v] [-evidence command,screen,pty]
//	go run ./tools/terminal-eval -captured [-dir terminal/testdata/captured] [-min 0.70]
//	go run ./tools/terminal-eval -fit-danger
//
// By default it evaluates the corpus held out two ways: leave-one-family-out
// (for each family, the detector learns its example prompts and its danger
// model from the other families' captures only, less any program the
// family has) and leave-program-out (the same, one program at a time). It
// prints the tables of docs/terminal.md: overall, per family, and on the
// dev half of the programs (looked at while writing rules) and the test
// half (only scored). -fit-danger fits the danger model the daemon ships
// on the whole corpus and writes it to terminal/danger_model.json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/embed"
	"github.com/classifierd/classifierd/models"
	"github.com/classifierd/classifierd/terminal"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "terminal-eval:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "labelled captures (default terminal/testdata/captured, or terminal/testdata/corpus with -lopo)")
	model := flag.String("model", os.Getenv("MODEL_DIR"), "model directory")
	lib := flag.String("ort-lib", os.Getenv("ORT_LIB"), "ONNX Runtime library")
	minConf := flag.Float64("min", 0.70, "detection threshold")
	jsonOut := flag.String("json", "", "write the report as JSON here")
	captured := flag.Bool("captured", false, "score the detector as served on a directory of captures (default terminal/testdata/captured), nothing held out")
	_ = flag.Bool("lopo", true, "held-out evaluation on the corpus (the default; kept for old scripts)")
	verbose := flag.Bool("v", false, "print every capture's verdict")
	evidence := flag.String("evidence", "command,screen,pty", "what the detector is given besides the screen, comma-separated: command (the command line), screen (nothing), pty (the pty signals and the command line)")
	schemes := flag.String("schemes", "family,program", "held-out schemes, comma-separated: family (leave-one-family-out), program (leave-program-out)")
	fitDanger := flag.Bool("fit-danger", false, "fit the danger model on the whole corpus, write it to "+terminal.DangerModelFile+" and exit")
	priorCurve := flag.Bool("prior", false, "print the danger model's held-out log loss for each prior strength (by family and by program) and the weights the data move most, and exit")
	only := flag.String("only", "", "score only the captures named in this file (one name a line; held out as usual, the learners still see the rest) and add a row for the programs the rest of the corpus lacks")
	half := flag.String("half", "all", "with -prior: the programs to fit on, all, dev (looked at while writing rules) or test")
	exclude := flag.String("exclude", "", "leave out the captures named in this file (one name a line), e.g. a round kept for a held-out check: with -prior from the fit, otherwise from learning and scoring alike")
	confusion := flag.Bool("confusion", false, "after each table, print the confusion matrix of prompt types (labelled by detected) over the waiting captures, and the misses")
	writeExamples := flag.Bool("write-examples", false, "write the corpus's prompt lines to "+terminal.CorpusExamplesFile+" (the examples the daemon ships) and exit")
	flag.Parse()
	if *writeExamples {
		return writeCorpusExamples()
	}
	if *fitDanger {
		return writeDangerModel()
	}
	if *priorCurve {
		return printPriorCurve(*half, *exclude)
	}
	lopo := !*captured
	if *model == "" {
		*model = ".cache/models/all-MiniLM-L6-v2-int8"
	}
	if *lib == "" {
		*lib = ".cache/onnxruntime-1.24.3/libonnxruntime.so.1"
	}
	if *dir == "" {
		*dir = "terminal/testdata/captured"
		if lopo {
			*dir = "terminal/testdata/corpus"
		}
	}
	man, err := models.Resolve(*model, "")
	if err != nil {
		return err
	}
	rt, err := embed.InitRuntime(*lib)
	if err != nil {
		return err
	}
	defer rt.Close()
	eng, err := embed.Open(rt, embed.Config{ModelDir: *model, Manifest: man})
	if err != nil {
		return err
	}
	defer eng.Close()
	ctx := context.Background()
	det, err := terminal.NewDetector(ctx, eng)
	if err != nil {
		return err
	}
	if lopo {
		return heldOut(ctx, det, *dir, *minConf, *verbose, *jsonOut, *evidence, *schemes, *only, *exclude, *confusion)
	}
	rep, cases, err := terminal.Evaluate(ctx, det, *dir, *minConf)
	if err != nil {
		return err
	}
	for _, c := range cases {
		printCase(os.Stdout, "", c)
	}
	fmt.Printf("terminal prompts: %d captures (%d waiting): precision %.3f recall %.3f F1 %.3f type accuracy %.3f dangerous recall %.3f (false dangerous %d) at min_confidence %.2f\n",
		rep.Cases, rep.Waiting, rep.Precision, rep.Recall, rep.F1, rep.TypeAccuracy, rep.DangerousRecall, rep.DangerousFP, *minConf)
	if *jsonOut != "" {
		return writeJSON(*jsonOut, rep)
	}
	return nil
}

func printCase(w io.Writer, tag string, c terminal.CaseResult) {
	mark := "ok  "
	if c.Got.Detected != c.Waiting || (c.Waiting && c.Got.Type != c.Type) || c.Got.Detected && c.Got.Dangerous != c.Dangerous || c.Dangerous && !c.Got.Dangerous {
		mark = "MISS"
	}
	fmt.Fprintf(w, "%s %s%-28s want waiting=%-5v type=%-8s dangerous=%-5v got waiting=%-5v type=%-8s dangerous=%-5v conf=%.2f danger=%.2f %s %q %s\n",
		mark, tag, c.Name, c.Waiting, c.Type, c.Dangerous, c.Got.Detected, c.Got.Type, c.Got.Dangerous, c.Got.Confidence, c.Got.DangerConfidence, c.Got.MatchedPattern, c.Got.PromptText, c.Got.DangerReason)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// heldOut prints the leave-one-family-out and leave-program-out tables.
func heldOut(ctx context.Context, det *terminal.Detector, dir string, minConf float64, verbose bool, jsonOut, evidence, schemes, only, exclude string, confusion bool) error {
	all, err := terminal.LoadCaptures(dir)
	if err != nil {
		return err
	}
	skip, _, err := onlySet(exclude, all)
	if err != nil {
		return err
	}
	var caps []terminal.Capture
	for _, c := range all {
		if !skip[c.Name] {
			caps = append(caps, c)
		}
	}
	if exclude != "" {
		fmt.Printf("left out: the %d captures named in %s (neither learned from nor scored)\n", len(all)-len(caps), exclude)
	}
	scored, newPrograms, err := onlySet(only, caps)
	if err != nil {
		return err
	}
	programs, families := map[string]bool{}, map[string]bool{}
	for _, c := range caps {
		programs[c.Program] = true
		families[c.Family] = true
	}
	evidences := map[string]terminal.Evidence{"command": terminal.WithCommand, "screen": terminal.ScreenOnly, "pty": terminal.WithPty}
	titles := map[string]string{"command": "screen and command line", "screen": "screen only", "pty": "pty signals, screen and command line"}
	reports := map[string]terminal.Report{}
	for _, scheme := range []struct {
		key, name string
		run       func(context.Context, *terminal.Detector, []terminal.Capture, float64, terminal.Evidence) ([]terminal.CaseResult, error)
	}{{"family", "Leave-one-family-out", terminal.LeaveFamilyOut}, {"program", "Leave-program-out", terminal.LeaveProgramOut}} {
		if !slices.Contains(strings.Split(schemes, ","), scheme.key) {
			continue
		}
		for _, ev := range strings.Split(evidence, ",") {
			use, ok := evidences[ev]
			if !ok {
				return fmt.Errorf("unknown evidence %q (command, screen or pty)", ev)
			}
			res, err := scheme.run(ctx, det, caps, minConf, use)
			if err != nil {
				return err
			}
			if verbose {
				for _, c := range res {
					half := "test "
					if terminal.DevHalf(c.Program) {
						half = "dev  "
					}
					printCase(os.Stdout, half+ev[:3]+" ", c)
				}
			}
			groups := map[string][]terminal.CaseResult{}
			var fams []string
			for _, c := range res {
				if scored != nil && !scored[c.Name] {
					continue
				}
				keys := []string{"all", "family " + c.Family}
				if newPrograms[c.Program] {
					keys = append(keys, "new programs")
				}
				if terminal.DevHalf(c.Program) {
					keys = append(keys, "dev half")
				} else {
					keys = append(keys, "test half")
				}
				for _, k := range keys {
					if _, ok := groups[k]; !ok && strings.HasPrefix(k, "family ") {
						fams = append(fams, k)
					}
					groups[k] = append(groups[k], c)
				}
			}
			sort.Strings(fams)
			fmt.Printf("\n%s, %s: %d captures of %d programs in %d families, min_confidence %.2f\n", scheme.name, titles[ev], len(caps), len(programs), len(families), minConf)
			rows := []string{"all", "dev half", "test half"}
			if scored != nil {
				fmt.Printf("scored: the %d captures named in %s (new programs: the %d of their programs no other capture has)\n", len(groups["all"]), only, len(newPrograms))
				rows = append(rows, "new programs")
			}
			fmt.Println()
			fmt.Println("| set | captures | waiting P | waiting R | waiting F1 | type acc. | dangerous | dangerous recall | dangerous FP |")
			fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
			for _, k := range append(rows, fams...) {
				r := terminal.Summarise(groups[k])
				reports[scheme.name+"/"+ev+"/"+k] = r
				name := k
				if !strings.HasPrefix(k, "family ") {
					name = "**" + k + "**"
				}
				fmt.Printf("| %s | %d | %s | %s | %s | %s | %d | %s | %d (%.1f%%) |\n", name, r.Cases,
					orDash(r.Waiting, r.Precision), orDash(r.Waiting, r.Recall), orDash(r.Waiting, r.F1), orDash(r.Waiting, r.TypeAccuracy),
					r.Dangerous, orDash(r.Dangerous, r.DangerousRecall), r.DangerousFP, 100*r.DangerousFPRate)
			}
			var calib []terminal.CaseResult
			for _, c := range res {
				if scored == nil || scored[c.Name] {
					calib = append(calib, c)
				}
			}
			brier, ece, n := terminal.Calibration(calib)
			fmt.Printf("\ndanger_confidence on the %d detected captures: Brier %.3f, expected calibration error %.3f (bins of 0.1)\n", n, brier, ece)
			if confusion {
				printConfusion(os.Stdout, groups["all"])
			}
		}
	}
	if jsonOut != "" {
		return writeJSON(jsonOut, reports)
	}
	return nil
}

// onlySet reads the names of the captures to score from path (none: score
// all) and finds the programs among them that no other capture has.
func onlySet(path string, caps []terminal.Capture) (scored, newPrograms map[string]bool, err error) {
	if path == "" {
		return nil, nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	scored = map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if name := strings.TrimSpace(line); name != "" && !strings.HasPrefix(name, "#") {
			scored[name] = true
		}
	}
	known := map[string]bool{}
	for _, c := range caps {
		known[c.Name] = true
	}
	for name := range scored {
		if !known[name] {
			return nil, nil, fmt.Errorf("%s names %q, which is not a capture", path, name)
		}
	}
	newPrograms, seen := map[string]bool{}, map[string]bool{}
	for _, c := range caps {
		if scored[c.Name] {
			newPrograms[c.Program] = true
		} else {
			seen[c.Program] = true
		}
	}
	for p := range seen {
		delete(newPrograms, p)
	}
	return scored, newPrograms, nil
}

// writeDangerModel fits the danger model on the whole corpus (its
// settings chosen by leave-one-family-out) and writes the file the daemon
// embeds.
func writeDangerModel() error {
	caps, err := terminal.LoadCaptures("terminal/testdata/corpus")
	if err != nil {
		return err
	}
	var samples []terminal.DangerSample
	programs, families, dangerous := map[string]bool{}, map[string]bool{}, 0
	for _, c := range caps {
		programs[c.Program], families[c.Family] = true, true
		samples = append(samples, terminal.DangerSampleOf(c, c.Family))
		if c.Dangerous {
			dangerous++
		}
	}
	m, err := terminal.FitDangerHeldOut(samples)
	if err != nil {
		return err
	}
	m.Fit = terminal.FitRecord{
		Data: fmt.Sprintf("terminal/testdata/corpus: %d captures (%d dangerous) of %d programs in %d families; the waiting captures fitted (danger is judged only for a detected prompt), each with its labelled prompt type and its command line; the others count in the false-positive rate",
			len(caps), dangerous, len(programs), len(families)),
		Method: "logistic regression, maximum a posteriori: log loss plus a Gaussian prior centred on the hand-set prior weights of terminal/danger.go, minimised with gonum optimize.LBFGS",
		Lambda: m.Fit.Lambda,
		Chosen: fmt.Sprintf("lambda from %v by leave-one-family-out log loss (a family's programs never in its training folds); threshold %.3f by cost, not fitted: a missed dangerous prompt costs twice a needless confirmation",
			terminal.DangerLambdas(), terminal.DangerThreshold),
		Command: "go run ./tools/terminal-eval -fit-danger",
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("danger model: lambda %v threshold %v\n", m.Fit.Lambda, m.Threshold)
	return os.WriteFile(terminal.DangerModelFile, append(b, '\n'), 0o644)
}

func orDash(n int, v float64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", v)
}

// writeCorpusExamples regenerates the daemon's built-in corpus examples
// from terminal/testdata/corpus.
func writeCorpusExamples() error {
	caps, err := terminal.LoadCaptures("terminal/testdata/corpus")
	if err != nil {
		return err
	}
	b, err := terminal.MarshalCorpusExamples(terminal.CorpusExamplesOf(caps))
	if err != nil {
		return err
	}
	return os.WriteFile(terminal.CorpusExamplesFile, b, 0o644)
}

// printPriorCurve prints how the held-out log loss of the danger model
// varies with its prior's strength, held out by family (as the shipped
// model is chosen) and by program, over a wider range than the choice
// uses; then, at the chosen strength and at a weak one, the weights the
// data move furthest from their priors.
func printPriorCurve(half, exclude string) error {
	all, err := terminal.LoadCaptures("terminal/testdata/corpus")
	if err != nil {
		return err
	}
	if half != "all" && half != "dev" && half != "test" {
		return fmt.Errorf("-half %q: all, dev or test", half)
	}
	skip, _, err := onlySet(exclude, all)
	if err != nil {
		return err
	}
	var caps []terminal.Capture
	for _, c := range all {
		if skip[c.Name] || half == "dev" && !terminal.DevHalf(c.Program) || half == "test" && terminal.DevHalf(c.Program) {
			continue
		}
		caps = append(caps, c)
	}
	fmt.Printf("%d captures (%s half", len(caps), half)
	if exclude != "" {
		fmt.Printf(", less those named in %s", exclude)
	}
	fmt.Print(")\n")
	lambdas := []float64{0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000}
	fmt.Printf("danger model: mean held-out log loss per waiting capture by prior strength (the choice uses %v)\n\n", terminal.DangerLambdas())
	fmt.Println("| lambda | leave-one-family-out | leave-program-out |")
	fmt.Println("|---:|---:|---:|")
	var bySample [2][]terminal.DangerSample
	for _, c := range caps {
		bySample[0] = append(bySample[0], terminal.DangerSampleOf(c, c.Family))
		bySample[1] = append(bySample[1], terminal.DangerSampleOf(c, c.Program))
	}
	var curves [2][]float64
	for k := range bySample {
		if curves[k], err = terminal.DangerPriorCurve(bySample[k], lambdas); err != nil {
			return err
		}
	}
	for i, l := range lambdas {
		fmt.Printf("| %g | %.4f | %.4f |\n", l, curves[0][i], curves[1][i])
	}
	for _, l := range []float64{100, 1} {
		m, err := terminal.FitDanger(bySample[0], l, terminal.DangerThreshold)
		if err != nil {
			return err
		}
		ws := append([]terminal.Weight(nil), m.Weights...)
		sort.Slice(ws, func(i, j int) bool {
			return math.Abs(ws[i].Weight-ws[i].Prior) > math.Abs(ws[j].Weight-ws[j].Prior)
		})
		fmt.Printf("\nfitted on these captures at lambda %g, the weights furthest from their priors:\n", l)
		for _, w := range ws[:8] {
			fmt.Printf("  %-30s prior %+.2f fitted %+.2f\n", w.Feature, w.Prior, w.Weight)
		}
	}
	return nil
}

// printConfusion prints, over the waiting captures the detector found,
// how often each labelled prompt type (a row) was detected as each type
// (a column), then the waiting captures it did not find, by type.
func printConfusion(w io.Writer, res []terminal.CaseResult) {
	types := []string{terminal.TypePassword, terminal.TypeYesNo, terminal.TypeChoice, terminal.TypePath, terminal.TypeText, terminal.TypeCommand, terminal.TypeUnknown}
	count := map[[2]string]int{}
	missed := map[string]int{}
	for _, c := range res {
		if !c.Waiting {
			continue
		}
		if !c.Got.Detected {
			missed[c.Type]++
			continue
		}
		count[[2]string{c.Type, c.Got.Type}]++
	}
	fmt.Fprintf(w, "\nprompt types, labelled (rows) by detected (columns), waiting captures found; then those not found\n\n")
	fmt.Fprint(w, "| labelled \\ detected |")
	for _, t := range types {
		fmt.Fprintf(w, " %s |", t)
	}
	fmt.Fprintln(w, " right | not found |")
	fmt.Fprint(w, "|---|")
	for range types {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---:|---:|")
	for _, row := range types {
		n := missed[row]
		for _, col := range types {
			n += count[[2]string{row, col}]
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s |", row)
		found := 0
		for _, col := range types {
			found += count[[2]string{row, col}]
			if v := count[[2]string{row, col}]; v > 0 {
				fmt.Fprintf(w, " %d |", v)
			} else {
				fmt.Fprint(w, " · |")
			}
		}
		fmt.Fprintf(w, " %s | %d |\n", orDash(found, float64(count[[2]string{row, row}])/float64(max(found, 1))), missed[row])
	}
}
