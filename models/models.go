// Package models owns model manifests: the Manifest type (how to run a
// sentence-embedding model: inputs, output, pooling, normalisation, token
// cap, text rules), its parsing and validation, the layout of a model
// directory, and the committed manifests of known models. It is pure Go:
// reading a manifest needs no ONNX Runtime (embed/, the only cgo package,
// imports it). The weights are never committed; a model directory holds
// model.onnx and tokenizer.json, and optionally its own manifest.json.
package models

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed *.json
var known embed.FS

// ErrNoManifest reports a model directory with no manifest.json that
// matches no known model.
var ErrNoManifest = errors.New("models: no manifest for model")

// Known returns the names of the committed manifests.
func Known() []string {
	ents, _ := fs.ReadDir(known, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}

// Lookup returns the committed manifest with this name.
func Lookup(name string) (*Manifest, error) {
	data, err := known.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not one of %v", ErrNoManifest, name, Known())
	}
	return ParseManifest(data)
}

// Resolve finds the manifest for the model in dir: an explicit manifest
// file if given, else dir/manifest.json, else the committed manifest whose
// model_sha256 matches dir/model.onnx, else the committed manifest named
// like the directory.
func Resolve(dir, explicit string) (*Manifest, error) {
	if explicit != "" {
		data, err := os.ReadFile(explicit)
		if err != nil {
			return nil, fmt.Errorf("models: %w", err)
		}
		return ParseManifest(data)
	}
	m, err := ReadManifest(dir)
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sum, err := FileSHA256(filepath.Join(dir, ModelFile))
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	for _, name := range Known() {
		m, err := Lookup(name)
		if err != nil {
			return nil, err
		}
		if m.ModelSHA256 != "" && m.ModelSHA256 == sum {
			return m, nil
		}
	}
	if m, err := Lookup(filepath.Base(filepath.Clean(dir))); err == nil {
		return m, nil
	}
	return nil, fmt.Errorf("%w in %s: add %s there or pass --manifest (known: %v)", ErrNoManifest, dir, ManifestFile, Known())
}
