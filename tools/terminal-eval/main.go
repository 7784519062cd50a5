// Command terminal-eval measures input-prompt detection on the labelled
// captures of real programs (terminal/testdata/captured): waiting-detection
// precision and recall, prompt-type accuracy and dangerous recall.
//
//	go run ./tools/terminal-eval [-dir terminal/testdata/captured] [-min 0.70]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

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
	dir := flag.String("dir", "terminal/testdata/captured", "labelled captures")
	model := flag.String("model", os.Getenv("MODEL_DIR"), "model directory")
	lib := flag.String("ort-lib", os.Getenv("ORT_LIB"), "ONNX Runtime library")
	minConf := flag.Float64("min", 0.70, "detection threshold")
	jsonOut := flag.String("json", "", "write the report as JSON here")
	flag.Parse()
	if *model == "" {
		*model = "../shared/models/use-lite-en"
	}
	if *lib == "" {
		*lib = ".cache/onnxruntime-1.24.3/libonnxruntime.so.1"
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
	rep, cases, err := terminal.Evaluate(ctx, det, *dir, *minConf)
	if err != nil {
		return err
	}
	for _, c := range cases {
		mark := "ok  "
		if c.Got.Detected != c.Waiting || (c.Waiting && (c.Got.Type != c.Type || c.Got.Dangerous != c.Dangerous)) {
			mark = "MISS"
		}
		fmt.Printf("%s %-24s waiting=%-5v type=%-8s dangerous=%-5v conf=%.2f %s\n", mark, c.Name, c.Got.Detected, c.Got.Type, c.Got.Dangerous, c.Got.Confidence, c.Got.MatchedPattern)
	}
	fmt.Printf("terminal prompts: %d captures (%d waiting): precision %.3f recall %.3f type accuracy %.3f dangerous recall %.3f (false dangerous %d) at min_confidence %.2f\n",
		rep.Cases, rep.Waiting, rep.Precision, rep.Recall, rep.TypeAccuracy, rep.DangerousRecall, rep.DangerousFP, *minConf)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return os.WriteFile(*jsonOut, b, 0o644)
	}
	return nil
}
