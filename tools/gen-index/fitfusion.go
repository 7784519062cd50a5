package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/data/catalogs"
	"github.com/classifierd/classifierd/indexbuild"
	"github.com/classifierd/classifierd/labels"
	"github.com/classifierd/classifierd/models"
)

// runFitFusion fits the model's fusion weights (lexical bonuses, BM25,
// tool pooling, server/tool lifts) on the reference catalog and prints
// them; with --write it writes models/fusion/NAME.json, which every index
// build for that model then starts from (indexbuild.ModelFusion).
func runFitFusion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen-index fit-fusion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	refPath := fs.String("reference", "", "reference catalog (default: the built-in data/catalogs/default.json)")
	write := fs.String("write", "", "write the fit as JSON into this models folder (models/fusion/NAME.json under it)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gen-index fit-fusion --model DIR [--write models]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw := catalogs.Default
	if *refPath != "" {
		b, err := os.ReadFile(*refPath)
		if err != nil {
			return err
		}
		raw = b
	}
	ref, err := catalog.Parse(raw, *refPath)
	if err != nil {
		return err
	}
	eng, closeModel, err := mf.open()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeModel()) }()
	man := eng.Manifest()
	res, err := indexbuild.FitFusion(ctx, eng.Labels(), labels.Model{Name: man.Name, Fingerprint: eng.Fingerprint(), Dims: eng.Dims()}, ref)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	cmd := "gen-index fit-fusion --model DIR"
	if *refPath != "" {
		cmd += " --reference " + filepath.Base(*refPath)
	}
	out := indexbuild.FusionFile{Model: man.Name, Fingerprint: eng.Fingerprint(), ReferenceSHA256: hex.EncodeToString(sum[:]),
		Command: cmd, Fit: res}
	fmt.Fprintf(stdout, "%s: %s\n", man.Name, res)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	b := buf.Bytes()
	if *write == "" {
		_, err = stdout.Write(b)
		return err
	}
	if strings.ContainsAny(man.Name, `/\`) {
		return fmt.Errorf("model name %q cannot name a file", man.Name)
	}
	path := filepath.Join(*write, models.FusionFile(man.Name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return nil
}
