package embed

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/classifierd/classifierd/embed/internal/onnxgen"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

const useLiteManifestPath = "../models/use-lite-en.json"

// shared is the runtime and real model, loaded once per test binary and
// released by TestMain.
var shared struct {
	once sync.Once
	rt   *Runtime
	use  *Engine
	err  error
}

// Results of InitRuntime calls made by TestMain before anything loaded the
// library (the only moment its missing-file branch can run); checked in
// TestInitRuntime.
var (
	missingLibErr error
	emptyLibErr   error
)

func TestMain(m *testing.M) {
	_, missingLibErr = InitRuntime(filepath.Join(os.TempDir(), "no-such-dir", "libonnxruntime.so.1"))
	_, emptyLibErr = InitRuntime("")
	code := m.Run()
	var errs []error
	if sharedB.e != nil {
		errs = append(errs, sharedB.e.Close())
	}
	if sharedB.dir != "" {
		errs = append(errs, os.RemoveAll(sharedB.dir))
	}
	if shared.use != nil {
		errs = append(errs, shared.use.Close(), shared.rt.Close())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "closing the shared engines:", err)
		code = 1
	}
	os.Exit(code)
}

func readUseLiteManifest() (*models.Manifest, error) {
	data, err := os.ReadFile(useLiteManifestPath)
	if err != nil {
		return nil, err
	}
	return models.ParseManifest(data)
}

func loadShared() {
	shared.once.Do(func() {
		if _, err := os.Stat(testenv.ORTLib()); err != nil {
			shared.err = fmt.Errorf("ONNX Runtime library: %w", err)
			return
		}
		for _, f := range []string{models.ModelFile, models.TokenizerFile} {
			if _, err := os.Stat(filepath.Join(testenv.UseLiteDir(), f)); err != nil {
				shared.err = fmt.Errorf("use-lite-en model: %w", err)
				return
			}
		}
		man, err := readUseLiteManifest()
		if err != nil {
			shared.err = err
			return
		}
		rt, err := InitRuntime(testenv.ORTLib())
		if err != nil {
			shared.err = err
			return
		}
		// A small ChunkSize makes modest test batches span several model runs.
		e, err := Open(rt, Config{ModelDir: testenv.UseLiteDir(), Manifest: man, ChunkSize: 4, MaxBatch: 256})
		if err != nil {
			_ = rt.Close()
			shared.err = err
			return
		}
		shared.rt, shared.use = rt, e
	})
}

// realEngine returns the shared use-lite-en engine. A missing library or
// model fails the test: the real model is what ships.
func realEngine(t testing.TB) *Engine {
	t.Helper()
	loadShared()
	if shared.err != nil {
		t.Fatalf("load use-lite-en: %v\n%s", shared.err, testenv.Hint)
	}
	return shared.use
}

// testRuntime returns the shared ONNX Runtime handle.
func testRuntime(t testing.TB) *Runtime {
	t.Helper()
	realEngine(t)
	return shared.rt
}

const (
	bertDims = 16
	bertSeed = 7
)

// writeBert writes the generated BERT-shaped model into a fresh temp dir and
// returns the dir, its manifest and the generated weights.
func writeBert(t testing.TB, maxTokens int) (string, *models.Manifest, *onnxgen.Model) {
	t.Helper()
	dir := t.TempDir()
	gen := onnxgen.Generate(bertDims, bertSeed)
	if err := gen.Write(dir, maxTokens); err != nil {
		t.Fatal(err)
	}
	man, err := models.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, man, gen
}

// bertEngine opens the generated BERT-shaped model with a small ChunkSize;
// it is closed when the test ends.
func bertEngine(t testing.TB, maxTokens int) (*Engine, *onnxgen.Model) {
	t.Helper()
	dir, man, gen := writeBert(t, maxTokens)
	e, err := Open(testRuntime(t), Config{ModelDir: dir, Manifest: man, ChunkSize: 3})
	if err != nil {
		t.Fatalf("open generated BERT model: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, gen
}

// sharedB is one generated BERT engine for the whole binary, for fuzz
// targets that run many inputs (opening a model per input would dominate).
var sharedB struct {
	once sync.Once
	dir  string
	e    *Engine
	err  error
}

func sharedBert(t testing.TB) *Engine {
	t.Helper()
	rt := testRuntime(t)
	sharedB.once.Do(func() {
		if sharedB.dir, sharedB.err = os.MkdirTemp("", "embed-bert-"); sharedB.err != nil {
			return
		}
		if sharedB.err = onnxgen.Generate(bertDims, bertSeed).Write(sharedB.dir, 16); sharedB.err != nil {
			return
		}
		man, err := models.ReadManifest(sharedB.dir)
		if err != nil {
			sharedB.err = err
			return
		}
		sharedB.e, sharedB.err = Open(rt, Config{ModelDir: sharedB.dir, Manifest: man})
	})
	if sharedB.err != nil {
		t.Fatalf("open generated BERT model: %v", sharedB.err)
	}
	return sharedB.e
}

// useLiteEngine opens a private use-lite-en engine (for tests that change
// the config or close it).
func useLiteEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	realEngine(t)
	man, err := readUseLiteManifest()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ModelDir, cfg.Manifest = testenv.UseLiteDir(), man
	e, err := Open(shared.rt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// sentences have mixed lengths so a batch of them is padded.
var sentences = []string{
	"Check my GitHub notifications",
	"hello",
	"list the open pull requests on my repository please, then post a message to the team channel",
	"what is the weather today?",
	"read config json",
	"remember that my favourite editor is vim and that I prefer tabs over spaces in every file",
	"Delete the old docker containers",
	"search jira for my tickets in the current sprint",
	"send an email",
	"show me the last five commits on the main branch of the repo",
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func l2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// checkUnit fails unless v has dims finite components and unit length.
func checkUnit(t testing.TB, what string, v []float32, dims int) {
	t.Helper()
	if len(v) != dims {
		t.Fatalf("%s: got %d dims, want %d", what, len(v), dims)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s: component %d is %v, want finite", what, i, x)
		}
	}
	if n := l2(v); math.Abs(n-1) > 1e-5 {
		t.Fatalf("%s: got norm %v, want 1", what, n)
	}
}
