// Package testenv says where tests find what `make deps` and `make model`
// put outside the source tree: the ONNX Runtime library and the real
// models. Each path comes from its environment variable (the Makefile
// exports all three) or else from its default place relative to the module
// root, so a test finds it from any package directory.
//
// testenv imports nothing of this module, so every package's tests can use
// it, embed's own included.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Hint tells the reader of a failed test how to get what it needs.
const Hint = "run `make deps` (ONNX Runtime, model check) and `make model`; " +
	"ORT_LIB, MODEL_DIR, MULTILINGUAL_MODEL_DIR and USE_LITE_DIR override the default paths"

// ORTLib is the ONNX Runtime shared library: $ORT_LIB, else the copy
// `make deps` puts in <root>/.cache.
func ORTLib() string {
	return fromEnv("ORT_LIB", ".cache", "onnxruntime-1.24.3", "libonnxruntime.so.1")
}

// ModelDir is the project's default model as `make model` builds it:
// $MODEL_DIR, else <root>/.cache/models/all-MiniLM-L6-v2-int8.
func ModelDir() string {
	return fromEnv("MODEL_DIR", ".cache", "models", "all-MiniLM-L6-v2-int8")
}

// MultilingualDir is multilingual-e5-small-int8 as `make model
// MODEL=multilingual-e5-small-int8` builds it (`make test` does):
// $MULTILINGUAL_MODEL_DIR, else <root>/.cache/models/multilingual-e5-small-int8.
func MultilingualDir() string {
	return fromEnv("MULTILINGUAL_MODEL_DIR", ".cache", "models", "multilingual-e5-small-int8")
}

// UseLiteDir is the use-lite-en model, whose numbers embed's golden,
// word-split and speed tests pin: $USE_LITE_DIR, else the shared copy
// beside the repository, <root>/../shared/models/use-lite-en.
func UseLiteDir() string {
	return fromEnv("USE_LITE_DIR", "..", "shared", "models", "use-lite-en")
}

// RepoRoot is the module root: the nearest directory at or above the
// working directory (a test's package directory) that holds go.mod.
func RepoRoot() string {
	r := repoRoot()
	if r.err != nil {
		panic(r.err) // only outside the module, where no test of ours runs
	}
	return r.dir
}

func fromEnv(name string, rel ...string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return filepath.Join(append([]string{RepoRoot()}, rel...)...)
}

type root struct {
	dir string
	err error
}

var repoRoot = sync.OnceValue(func() root {
	wd, err := os.Getwd()
	if err != nil {
		return root{err: fmt.Errorf("testenv: %w", err)}
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return root{dir: dir}
		}
		if filepath.Dir(dir) == dir {
			return root{err: fmt.Errorf("testenv: no go.mod at or above %s", wd)}
		}
	}
})
