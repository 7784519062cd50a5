package models

import (
	"embed"
	"strings"
)

// The fusion weights fitted for each known model on the reference catalog
// (`gen-index fit-fusion`, docs/models.md#fusion-weights-per-model): one
// JSON file per model, named by the manifest's name.
//
//go:embed fusion/*.json
var fusionFS embed.FS

// FusionPrior returns the committed fusion fit for the model with this
// manifest name (the JSON `gen-index fit-fusion --write` wrote), if any.
func FusionPrior(name string) ([]byte, bool) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return nil, false
	}
	data, err := fusionFS.ReadFile("fusion/" + name + ".json")
	return data, err == nil
}

// FusionFile is the file `gen-index fit-fusion --write` writes for the
// model with this manifest name, relative to this folder.
func FusionFile(name string) string { return "fusion/" + name + ".json" }
