// Command terminal-eval measures input-prompt detection on labelled
// captures of real programs: waiting-detection precision, recall and F1,
// prompt-type accuracy, dangerous recall and false positives.
//
//	go run ./tools/terminal-eval [-dir terminal/testdata/captured] [-min 0.70]
//	go run ./tools/terminal-eval -lopo [-dir terminal/testdata/corpus] [-v]
//
// -lopo evaluates leave-program-out on the corpus: for each program, the
// detector learns example prompts from the other programs' captures only
// and is scored on the held-out program's. It prints the table of
// docs/terminal.md: overall and per family, with the command line as a hint
// and screen only, on the dev half of the programs (looked at while writing
// rules) and the test half (only scored).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

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
	lopo := flag.Bool("lopo", false, "leave-program-out on the corpus")
	verbose := flag.Bool("v", false, "with -lopo: print every capture's verdict")
	writeExamples := flag.Bool("write-examples", false, "write the corpus's prompt lines to "+terminal.CorpusExamplesFile+" (the examples the daemon ships) and exit")
	flag.Parse()
	if *writeExamples {
		return writeCorpusExamples()
	}
	if *model == "" {
		*model = ".cache/models/all-MiniLM-L6-v2-int8"
	}
	if *lib == "" {
		*lib = ".cache/onnxruntime-1.24.3/libonnxruntime.so.1"
	}
	if *dir == "" {
		*dir = "terminal/testdata/captured"
		if *lopo {
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
	if *lopo {
		return leaveProgramOut(ctx, det, *dir, *minConf, *verbose, *jsonOut)
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
	fmt.Fprintf(w, "%s %s%-28s want waiting=%-5v type=%-8s dangerous=%-5v got waiting=%-5v type=%-8s dangerous=%-5v conf=%.2f %s %q %s\n",
		mark, tag, c.Name, c.Waiting, c.Type, c.Dangerous, c.Got.Detected, c.Got.Type, c.Got.Dangerous, c.Got.Confidence, c.Got.MatchedPattern, c.Got.PromptText, c.Got.DangerReason)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// leaveProgramOut prints the leave-program-out table.
func leaveProgramOut(ctx context.Context, det *terminal.Detector, dir string, minConf float64, verbose bool, jsonOut string) error {
	caps, err := terminal.LoadCaptures(dir)
	if err != nil {
		return err
	}
	programs := map[string]bool{}
	for _, c := range caps {
		programs[c.Program] = true
	}
	reports := map[string]terminal.Report{}
	for _, hints := range []struct {
		name string
		use  terminal.Evidence
	}{{"command line", terminal.WithCommand}, {"screen only", terminal.ScreenOnly}, {"pty signals and command line", terminal.WithPty}} {
		res, err := terminal.LeaveProgramOut(ctx, det, caps, minConf, hints.use)
		if err != nil {
			return err
		}
		if verbose {
			for _, c := range res {
				half := "test "
				if terminal.DevHalf(c.Program) {
					half = "dev  "
				}
				printCase(os.Stdout, half+hints.name[:6]+" ", c)
			}
		}
		groups := map[string][]terminal.CaseResult{}
		var families []string
		for _, c := range res {
			keys := []string{"all", "family " + c.Family}
			if terminal.DevHalf(c.Program) {
				keys = append(keys, "dev half")
			} else {
				keys = append(keys, "test half")
			}
			for _, k := range keys {
				if _, ok := groups[k]; !ok && k != "all" && k != "dev half" && k != "test half" {
					families = append(families, k)
				}
				groups[k] = append(groups[k], c)
			}
		}
		sort.Strings(families)
		fmt.Printf("\nLeave-program-out, %s: %d captures of %d programs, min_confidence %.2f\n\n", hints.name, len(caps), len(programs), minConf)
		fmt.Println("| set | captures | waiting P | waiting R | waiting F1 | type acc. | dangerous | dangerous recall | dangerous FP |")
		fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, k := range append([]string{"all", "dev half", "test half"}, families...) {
			r := terminal.Summarise(groups[k])
			reports[hints.name+"/"+k] = r
			name := k
			if k == "all" || k == "dev half" || k == "test half" {
				name = "**" + k + "**"
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %d | %s | %d (%.1f%%) |\n", name, r.Cases,
				orDash(r.Waiting, r.Precision), orDash(r.Waiting, r.Recall), orDash(r.Waiting, r.F1), orDash(r.Waiting, r.TypeAccuracy),
				r.Dangerous, orDash(r.Dangerous, r.DangerousRecall), r.DangerousFP, 100*r.DangerousFPRate)
		}
	}
	if jsonOut != "" {
		return writeJSON(jsonOut, reports)
	}
	return nil
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
