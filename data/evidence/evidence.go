// Package evidence holds the cross-catalog confidence maps
// (calibrate.Evidence) that `make fit-evidence` fitted for known models,
// one JSON file per model. indexbuild gives a catalog without examples of
// its own the map of the model that embeds it; a model without one keeps
// the reference-catalog prior.
package evidence

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sync"

	"github.com/classifierd/classifierd/calibrate"
)

//go:embed *.json
var files embed.FS

var (
	once  sync.Once
	maps  map[string]*calibrate.Evidence // by model fingerprint
	loadE error
)

func load() {
	maps = map[string]*calibrate.Evidence{}
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		loadE = err
		return
	}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			loadE = err
			return
		}
		var ev calibrate.Evidence
		if err := json.Unmarshal(b, &ev); err != nil {
			loadE = fmt.Errorf("evidence: %s: %w", n, err)
			return
		}
		if err := ev.Validate(); err != nil {
			loadE = fmt.Errorf("evidence: %s: %w", n, err)
			return
		}
		if ev.Record == nil || ev.Record.Fingerprint == "" {
			loadE = fmt.Errorf("evidence: %s: no record of the model it was fitted for", n)
			return
		}
		maps[ev.Record.Fingerprint] = &ev
	}
}

// For returns the map fitted for the model with this fingerprint (the
// sha256 of its model.onnx and manifest, as embed.Engine reports it). The
// map is shared: callers must not modify it.
func For(fingerprint string) (*calibrate.Evidence, bool, error) {
	once.Do(load)
	if loadE != nil {
		return nil, false, loadE
	}
	ev, ok := maps[fingerprint]
	return ev, ok, nil
}
