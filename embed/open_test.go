package embed

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/classifierd/classifierd/embed/internal/onnxgen"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

// TestOpenRejectsMismatch: a manifest that does not describe the model in
// the directory fails at Open with ErrModel, never on the first request.
func TestOpenRejectsMismatch(t *testing.T) {
	rt := testRuntime(t)
	dir, base, _ := writeBert(t, 16)
	for _, tc := range []struct {
		name string
		edit func(*models.Manifest)
	}{
		{"model input not fed", func(m *models.Manifest) { m.Inputs.TokenTypeIDs = "" }},
		{"input the model lacks", func(m *models.Manifest) { m.Inputs.AttentionMask = "mask" }},
		{"token types the model lacks", func(m *models.Manifest) { m.Inputs.TokenTypeIDs = "segment_ids" }},
		{"output the model lacks", func(m *models.Manifest) { m.Output = "pooler_output" }},
		{"wrong dims", func(m *models.Manifest) { m.Dims = 32 }},
		{"pooled output expected", func(m *models.Manifest) { m.Pooling = models.PoolNone }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *base
			tc.edit(&m)
			wantOpenError(t, rt, Config{ModelDir: dir, Manifest: &m}, ErrModel)
		})
	}
	t.Run("use-lite-en manifest on its model with token types", func(t *testing.T) {
		m, err := readUseLiteManifest()
		if err != nil {
			t.Fatal(err)
		}
		m.Inputs.TokenTypeIDs = "token_type_ids"
		wantOpenError(t, rt, Config{ModelDir: testenv.UseLiteDir(), Manifest: m}, ErrModel)
	})
	t.Run("use-lite-en with wrong dims", func(t *testing.T) {
		m, err := readUseLiteManifest()
		if err != nil {
			t.Fatal(err)
		}
		m.Dims = 384
		wantOpenError(t, rt, Config{ModelDir: testenv.UseLiteDir(), Manifest: m}, ErrModel)
	})
	t.Run("other manifest pooling works", func(t *testing.T) {
		m := *base
		m.Pooling = models.PoolCLS
		e, err := Open(rt, Config{ModelDir: dir, Manifest: &m})
		if err != nil {
			t.Fatalf("cls pooling: got %v, want an engine", err)
		}
		_ = e.Close()
	})
}

func TestOpenBadFiles(t *testing.T) {
	rt := testRuntime(t)
	corrupt := func(name string, data []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		wantErr error
	}{
		{"no model.onnx", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, models.ModelFile)) }, ErrModel},
		{"no tokenizer.json", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, models.TokenizerFile)) }, ErrModel},
		{"model.onnx not ONNX", corrupt(models.ModelFile, []byte("not a model")), ErrModel},
		{"model.onnx truncated", func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(dir, models.ModelFile))
			if err != nil {
				t.Fatal(err)
			}
			corrupt(models.ModelFile, data[:len(data)/2])(t, dir)
		}, ErrModel},
		{"tokenizer.json not JSON", corrupt(models.TokenizerFile, []byte("{")), ErrModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, man, _ := writeBert(t, 16)
			tc.damage(t, dir)
			wantOpenError(t, rt, Config{ModelDir: dir, Manifest: man}, tc.wantErr)
		})
	}
	t.Run("no manifest", func(t *testing.T) {
		dir, _, _ := writeBert(t, 16)
		if _, err := Open(rt, Config{ModelDir: dir}); !errors.Is(err, models.ErrBadManifest) {
			t.Fatalf("got %v, want models.ErrBadManifest", err)
		}
	})
	t.Run("invalid manifest", func(t *testing.T) {
		dir, man, _ := writeBert(t, 16)
		m := *man
		m.MaxTokens = 0
		if _, err := Open(rt, Config{ModelDir: dir, Manifest: &m}); !errors.Is(err, models.ErrBadManifest) {
			t.Fatalf("got %v, want models.ErrBadManifest", err)
		}
	})
}

func TestFingerprint(t *testing.T) {
	dir, man, _ := writeBert(t, 16)
	path := filepath.Join(dir, models.ModelFile)
	fp := func(t *testing.T, m *models.Manifest) string {
		t.Helper()
		s, err := Fingerprint(path, m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := fp(t, man)
	if len(base) != 64 {
		t.Fatalf("got %q, want 64 hex digits", base)
	}
	if again := fp(t, man); again != base {
		t.Fatalf("same inputs: got %s then %s", base, again)
	}
	for _, tc := range []struct {
		name string
		edit func(*models.Manifest)
		same bool
	}{
		{"max tokens", func(m *models.Manifest) { m.MaxTokens = 15 }, false},
		{"pooling", func(m *models.Manifest) { m.Pooling = models.PoolCLS }, false},
		{"prefix", func(m *models.Manifest) { m.Prefix = "query: " }, false},
		{"normalize", func(m *models.Manifest) { m.Normalize = false }, false},
		{"lowercase", func(m *models.Manifest) { m.Lowercase = false }, false},
		{"name", func(m *models.Manifest) { m.Name = "other" }, false},
		{"model_sha256 is descriptive only", func(m *models.Manifest) { m.ModelSHA256 = "abc" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *man
			tc.edit(&m)
			if got := fp(t, &m); (got == base) != tc.same {
				t.Fatalf("got %s, base %s; want same=%v", got, base, tc.same)
			}
		})
	}
	t.Run("model bytes", func(t *testing.T) {
		if err := onnxgen.Generate(bertDims, bertSeed+1).Write(dir, 16); err != nil {
			t.Fatal(err)
		}
		if got := fp(t, man); got == base {
			t.Fatalf("other weights: got the same fingerprint %s", got)
		}
	})
	t.Run("engine reports it", func(t *testing.T) {
		e := realEngine(t)
		m := e.Manifest()
		want, err := Fingerprint(filepath.Join(testenv.UseLiteDir(), models.ModelFile), &m)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Fingerprint(); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("missing model", func(t *testing.T) {
		if _, err := Fingerprint(filepath.Join(t.TempDir(), models.ModelFile), man); !errors.Is(err, ErrModel) {
			t.Fatalf("got %v, want ErrModel", err)
		}
	})
}

func TestFileSHA256(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := []byte("classifierd")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got, err := models.FileSHA256(path); err != nil || got != hex.EncodeToString(sum[:]) {
		t.Fatalf("got %s, %v; want %x", got, err, sum)
	}
	if _, err := models.FileSHA256(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: got %v, want os.ErrNotExist", err)
	}
	// The committed manifest names the shared model's bytes.
	m, err := readUseLiteManifest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := models.FileSHA256(filepath.Join(testenv.UseLiteDir(), models.ModelFile))
	if err != nil {
		t.Fatalf("%v\n%s", err, testenv.Hint)
	}
	if got != m.ModelSHA256 {
		t.Fatalf("use-lite-en model.onnx: got sha256 %s, manifest says %s", got, m.ModelSHA256)
	}
}

// wantOpenError opens cfg, closes the engine if one came back anyway, and
// fails unless the error is want.
func wantOpenError(t *testing.T, rt *Runtime, cfg Config, want error) {
	t.Helper()
	e, err := Open(rt, cfg)
	if e != nil {
		_ = e.Close()
	}
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}
