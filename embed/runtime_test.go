package embed

import (
	"context"
	"errors"
	"testing"

	"github.com/classifierd/classifierd/internal/testenv"
)

func refs() int {
	rtMu.Lock()
	defer rtMu.Unlock()
	return rtRefs
}

func TestInitRuntime(t *testing.T) {
	// TestMain tried these before anything loaded the library.
	if !errors.Is(missingLibErr, ErrRuntime) {
		t.Errorf("missing library before load: got %v, want ErrRuntime", missingLibErr)
	}
	if !errors.Is(emptyLibErr, ErrRuntime) {
		t.Errorf("empty path before load: got %v, want ErrRuntime", emptyLibErr)
	}

	e := realEngine(t)
	before := refs()
	if before < 1 {
		t.Fatalf("got %d references with the shared runtime open, want >= 1", before)
	}
	rt, err := InitRuntime(testenv.ORTLib())
	if err != nil {
		t.Fatalf("second InitRuntime with the same path: got %v, want a handle", err)
	}
	if got := refs(); got != before+1 {
		t.Fatalf("after a second InitRuntime: got %d references, want %d", got, before+1)
	}
	if v := rt.Version(); v == "" {
		t.Error("Version: got empty, want the ONNX Runtime version")
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("second Close: got %v, want nil", err)
	}
	if got := refs(); got != before {
		t.Fatalf("after closing one handle twice: got %d references, want %d", got, before)
	}
	if _, err := e.Embed(context.Background(), []string{"still loaded"}); err != nil {
		t.Fatalf("engine after another handle closed: got %v, want a vector", err)
	}

	for _, path := range []string{"/nonexistent/libonnxruntime.so.1", ""} {
		if _, err := InitRuntime(path); !errors.Is(err, ErrRuntime) {
			t.Errorf("InitRuntime(%q) while loaded from another path: got %v, want ErrRuntime", path, err)
		}
	}
	if got := refs(); got != before {
		t.Fatalf("after failed InitRuntime calls: got %d references, want %d", got, before)
	}
	if _, err := Open(nil, Config{}); !errors.Is(err, ErrRuntime) {
		t.Errorf("Open(nil runtime): got %v, want ErrRuntime", err)
	}
}
