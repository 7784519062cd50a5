package embed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// ErrRuntime reports that the ONNX Runtime shared library could not be loaded.
var ErrRuntime = errors.New("embed: onnx runtime unavailable")

// The ONNX Runtime environment is process-wide state in the C library, so it
// is tracked here rather than per Runtime value: SetSharedLibraryPath and
// InitializeEnvironment must run exactly once per process, whatever number
// of engines (or tests) open it.
var (
	rtMu   sync.Mutex
	rtRefs int
	rtPath string
)

// Runtime is a handle on the process-wide ONNX Runtime environment.
type Runtime struct {
	once sync.Once
}

// InitRuntime loads the ONNX Runtime shared library from libPath and
// initialises the environment, once per process. Later calls must name the
// same library. Each Runtime must be closed; the environment is destroyed
// when the last one closes.
func InitRuntime(libPath string) (*Runtime, error) {
	rtMu.Lock()
	defer rtMu.Unlock()
	if rtRefs > 0 {
		if libPath != rtPath {
			return nil, fmt.Errorf("%w: already initialised from %s, not %s", ErrRuntime, rtPath, libPath)
		}
		rtRefs++
		return &Runtime{}, nil
	}
	if libPath == "" {
		return nil, fmt.Errorf("%w: no library path (set --ort-lib or ORT_LIB)", ErrRuntime)
	}
	if _, err := os.Stat(libPath); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRuntime, err)
	}
	ort.SetSharedLibraryPath(libPath)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRuntime, err)
	}
	rtRefs = 1
	rtPath = libPath
	return &Runtime{}, nil
}

// Version reports the loaded ONNX Runtime version.
func (r *Runtime) Version() string { return ort.GetVersion() }

// Close releases this handle; the last Close destroys the environment.
// Close is idempotent.
func (r *Runtime) Close() error {
	var err error
	r.once.Do(func() {
		rtMu.Lock()
		defer rtMu.Unlock()
		rtRefs--
		if rtRefs == 0 {
			if e := ort.DestroyEnvironment(); e != nil {
				err = fmt.Errorf("embed: destroy environment: %w", e)
			}
			rtPath = ""
		}
	})
	return err
}

// ORTVersion is the ONNX Runtime release the Makefile installs.
const ORTVersion = "1.24.3"

// DefaultLibPath is where the ONNX Runtime library is looked for when no
// path is given: $ORT_LIB, else .cache/onnxruntime-<version>/ beside the
// repository the running binary was built into (bin/..), else the same
// path relative to the working directory.
func DefaultLibPath() string {
	if p := os.Getenv("ORT_LIB"); p != "" {
		return p
	}
	rel := filepath.Join(".cache", "onnxruntime-"+ORTVersion, "libonnxruntime.so.1")
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "..", rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return rel
}
