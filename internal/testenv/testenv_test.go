package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root := RepoRoot()
	if got, want := root, filepath.Clean(filepath.Join(mustGetwd(t), "..", "..")); got != want {
		t.Fatalf("RepoRoot() = %q, want %q", got, want)
	}
}

func TestPaths(t *testing.T) {
	root := RepoRoot()
	cases := []struct {
		name, env string
		get       func() string
		def       string
	}{
		{"ORTLib", "ORT_LIB", ORTLib, filepath.Join(root, ".cache", "onnxruntime-1.24.3", "libonnxruntime.so.1")},
		{"ModelDir", "MODEL_DIR", ModelDir, filepath.Join(root, ".cache", "models", "all-MiniLM-L6-v2-int8")},
		{"UseLiteDir", "USE_LITE_DIR", UseLiteDir, filepath.Join(root, "..", "shared", "models", "use-lite-en")},
		{"MultilingualDir", "MULTILINGUAL_MODEL_DIR", MultilingualDir, filepath.Join(root, ".cache", "models", "multilingual-e5-small-int8")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, "")
			if got := tc.get(); got != tc.def {
				t.Errorf("without $%s: got %q, want %q", tc.env, got, tc.def)
			}
			t.Setenv(tc.env, "/elsewhere")
			if got := tc.get(); got != "/elsewhere" {
				t.Errorf("with $%s=/elsewhere: got %q", tc.env, got)
			}
		})
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
