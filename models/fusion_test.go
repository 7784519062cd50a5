package models

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

// TestFusionFiles: each committed fusion fit is named after the model it
// was fitted for, and FusionPrior finds it by that name only.
func TestFusionFiles(t *testing.T) {
	ents, err := fs.ReadDir(fusionFS, "fusion")
	if err != nil || len(ents) == 0 {
		t.Fatalf("no committed fusion fits: %v", err)
	}
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".json")
		data, ok := FusionPrior(name)
		if !ok {
			t.Fatalf("FusionPrior(%q): not found", name)
		}
		var f struct {
			Model string `json:"model"`
			Fit   struct {
				Fusion map[string]float64 `json:"fusion"`
			} `json:"fit"`
		}
		if err := json.Unmarshal(data, &f); err != nil || f.Model != name || len(f.Fit.Fusion) == 0 {
			t.Errorf("%s: model %q, %d weights, %v; want its own name and weights", e.Name(), f.Model, len(f.Fit.Fusion), err)
		}
	}
	for _, bad := range []string{"", "../models", "fusion/x", "no-such-model"} {
		if _, ok := FusionPrior(bad); ok {
			t.Errorf("FusionPrior(%q) found a fit", bad)
		}
	}
}
