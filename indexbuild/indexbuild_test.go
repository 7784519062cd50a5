package indexbuild

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/labels"
)

const dims = 128

var model = labels.Model{Name: "bow", Fingerprint: "f", Dims: dims}

// descriptionsOnly is testindex.FitCatalog with no examples at all.
const descriptionsOnly = `{"servers": [
  {"id": "meteo", "description": "weather service", "tools": [
    {"name": "forecast", "description": "weather forecast for a city"},
    {"name": "alerts", "description": "storm and heat alerts"}]},
  {"id": "exchange", "description": "stock exchange data", "tools": [
    {"name": "quote", "description": "latest share price"},
    {"name": "close", "description": "market close summary"}]}]}`

func build(t *testing.T, js string, opts Options) *index.Index {
	t.Helper()
	opts.Reference = testindex.Parse(t, testindex.FitCatalog)
	idx, err := Build(context.Background(), testindex.Parse(t, js), testindex.Embedder{Dims: dims}, model, opts)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestBuildFitsOnTheCatalogsOwnExamples(t *testing.T) {
	idx := build(t, testindex.FitCatalog, Options{})
	cal := idx.Calibration
	if cal == nil || !cal.Fitted || cal.Version != calibrate.Version1 {
		t.Fatalf("calibration %+v: want a fitted, versioned section", cal)
	}
	for name, m := range map[string]string{"servers": cal.Servers.Method, "tools": cal.Tools.Method, "categories_multi": cal.CategoriesMulti.Method} {
		if m == "prior" || strings.HasPrefix(m, "reference/") {
			t.Errorf("%s: method %q, want a map fitted on the catalog's own examples", name, m)
		}
	}
}

func TestBuildLearnsDescriptionOnlyMapsOnTheReference(t *testing.T) {
	cal := build(t, descriptionsOnly, Options{}).Calibration
	for name, m := range map[string]string{"servers": cal.Servers.Method, "tools": cal.Tools.Method} {
		if !strings.HasPrefix(m, "reference/") {
			t.Errorf("%s: method %q, want reference/<method> (no examples to fit on)", name, m)
		}
	}
}

func TestBuildWithoutCalibration(t *testing.T) {
	idx := build(t, testindex.FitCatalog, Options{NoCalibrate: true})
	if idx.Calibration != nil {
		t.Fatalf("calibration %+v, want none", idx.Calibration)
	}
	if got := calibrate.OrDefault(idx.Calibration); got.Fitted || got.Servers.Method != "prior" {
		t.Errorf("OrDefault: got %+v, want the documented prior", got.Servers)
	}
}

// TestCalibrationSurvivesTheFile writes the built index and loads it
// back: the typed calibration comes back equal, and a section that is not
// finite, or is written by a newer build, is refused at load.
func TestCalibrationSurvivesTheFile(t *testing.T) {
	idx := build(t, testindex.FitCatalog, Options{})
	path := filepath.Join(t.TempDir(), "x.idx")
	if err := idx.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := index.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Calibration == nil || back.Calibration.Tools.A != idx.Calibration.Tools.A || back.Calibration.Tools.Method != idx.Calibration.Tools.Method {
		t.Fatalf("loaded tools map %+v, wrote %+v", back.Calibration.Tools, idx.Calibration.Tools)
	}

	newer := *idx.Calibration
	newer.Version = calibrate.Version1 + 1
	idx.Calibration = &newer
	if err := idx.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := index.Load(path); err == nil || !strings.Contains(err.Error(), "newer classifierd") {
		t.Errorf("calibration version %d: got %v, want a refusal naming the newer version", newer.Version, err)
	}
}

// TestModelFusion: every committed fit (models/fusion) decodes and names
// its model, differs from DefaultCalibration's weights somewhere, and
// Build starts from it for a model of that name; an unknown model gets
// the defaults.
func TestModelFusion(t *testing.T) {
	def := calibrate.DefaultCalibration().Fusion
	if f, ok, err := ModelFusion("bow"); err != nil || ok || f != def {
		t.Errorf("unknown model: %+v, %v, %v; want the defaults, false, nil", f, ok, err)
	}
	for _, name := range []string{"multilingual-e5-small-int8", "multilingual-e5-small"} {
		f, ok, err := ModelFusion(name)
		if err != nil || !ok {
			t.Fatalf("%s: %v, %v; want its committed fit", name, ok, err)
		}
		if f == def {
			t.Errorf("%s: fit equals the defaults; the test below would prove nothing", name)
		}
		m := model
		m.Name = name
		opts := Options{Reference: testindex.Parse(t, testindex.FitCatalog)}
		idx, err := Build(context.Background(), testindex.Parse(t, descriptionsOnly), testindex.Embedder{Dims: dims}, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := idx.Calibration.Fusion; got.Keyword != f.Keyword || got.Pattern != f.Pattern || got.ToolDescription != f.ToolDescription || got.BM25 != f.BM25 {
			t.Errorf("%s: index fusion %+v, want the committed fit %+v", name, got, f)
		}
	}
}
