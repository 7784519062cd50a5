package embed

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/classifierd/classifierd/embed/internal/onnxgen"
)

// The real model and runtime are loaded once per test binary.
var (
	loadOnce sync.Once
	testRT   *Runtime
	useLite  *Engine
	loadErr  error
)

func useLiteManifest(t testing.TB) *Manifest {
	t.Helper()
	data, err := os.ReadFile("../models/use-lite-en.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func realEngine(t testing.TB) *Engine {
	t.Helper()
	loadOnce.Do(func() {
		testRT, loadErr = InitRuntime(wsORTLib())
		if loadErr != nil {
			return
		}
		useLite, loadErr = Open(testRT, Config{ModelDir: wsModelDir(), Manifest: useLiteManifest(t), ChunkSize: 4, MaxBatch: 256})
	})
	if loadErr != nil {
		t.Fatalf("load use-lite-en: %v (run `make deps`; MODEL_DIR and ORT_LIB override the paths)", loadErr)
	}
	return useLite
}

// bertEngine writes a generated BERT-shaped model into a temp dir and opens it.
func bertEngine(t testing.TB, maxTokens int) (*Engine, *onnxgen.Model) {
	t.Helper()
	realEngine(t) // initialises the runtime
	dir := t.TempDir()
	gen := onnxgen.Generate(16, 7)
	if err := gen.Write(dir, maxTokens); err != nil {
		t.Fatal(err)
	}
	man, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(testRT, Config{ModelDir: dir, Manifest: man, ChunkSize: 3})
	if err != nil {
		t.Fatalf("open generated BERT model: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, gen
}

var sentences = []string{
	"Check my GitHub notifications",
	"hello",
	"list the open pull requests on my repository please, then post a message to the team channel",
	"what is the weather today?",
	"read config json",
	"remember that my favourite editor is vim and that I prefer tabs over spaces in every file",
}

func maxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestBothModelShapes(t *testing.T) {
	ctx := context.Background()
	bert, gen := bertEngine(t, 32)
	for _, tc := range []struct {
		name string
		e    *Engine
		dims int
	}{
		{"use-lite-en", realEngine(t), 512},
		{"bert-shaped", bert, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := tc.e.Embed(ctx, sentences)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vs {
				if len(v) != tc.dims {
					t.Fatalf("vector %d has %d dims, want %d", i, len(v), tc.dims)
				}
				if n := norm(v); math.Abs(n-1) > 1e-5 {
					t.Fatalf("vector %d has norm %v", i, n)
				}
			}
		})
	}
	t.Run("bert mean pooling matches a plain Go computation", func(t *testing.T) {
		for _, s := range sentences {
			ids, err := bert.Tokens(s)
			if err != nil {
				t.Fatal(err)
			}
			if ids[0] != 2 || ids[len(ids)-1] != 3 {
				t.Fatalf("%q: ids %v do not start with [CLS] and end with [SEP]", s, ids)
			}
			got, err := bert.Embed(ctx, []string{s})
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got[0], gen.Expected(ids)); d > 1e-5 {
				t.Fatalf("%q: max diff %g from the reference", s, d)
			}
		}
	})
	t.Run("bert lower-cases", func(t *testing.T) {
		a, _ := bert.Tokens("Check My GITHUB")
		b, _ := bert.Tokens("check my github")
		if !equalIDs(a, b) || a[1] == 1 {
			t.Fatalf("%v vs %v", a, b)
		}
	})
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBatchingDoesNotChangeEmbeddings: alone, in a padded batch, and in
// another order, every text gets the same vector.
func TestBatchingDoesNotChangeEmbeddings(t *testing.T) {
	ctx := context.Background()
	bert, _ := bertEngine(t, 32)
	for _, tc := range []struct {
		name string
		e    *Engine
	}{{"use-lite-en", realEngine(t)}, {"bert-shaped", bert}} {
		t.Run(tc.name, func(t *testing.T) {
			batch, err := tc.e.Embed(ctx, sentences)
			if err != nil {
				t.Fatal(err)
			}
			rev := make([]string, len(sentences))
			for i, s := range sentences {
				rev[len(sentences)-1-i] = s
			}
			reversed, err := tc.e.Embed(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range sentences {
				alone, err := tc.e.Embed(ctx, []string{s})
				if err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(alone[0], batch[i]); d > 1e-5 {
					t.Fatalf("%q: batch differs from alone by %g", s, d)
				}
				if d := maxDiff(alone[0], reversed[len(sentences)-1-i]); d > 1e-5 {
					t.Fatalf("%q: reordered batch differs by %g", s, d)
				}
			}
		})
	}
}

func TestEmptyTextRejected(t *testing.T) {
	e := realEngine(t)
	ctx := context.Background()
	for _, s := range []string{"", " ", "\t\n  \r\n", "\u00a0\u2003"} {
		if _, err := e.Embed(ctx, []string{s}); !errors.Is(err, ErrEmptyText) {
			t.Fatalf("%q: got %v, want ErrEmptyText", s, err)
		}
	}
	_, err := e.Embed(ctx, []string{"fine", "  ", "also fine"})
	if !errors.Is(err, ErrEmptyText) || !strings.Contains(err.Error(), "text 1") {
		t.Fatalf("mixed batch: %v", err)
	}
	if _, err := e.Embed(ctx, []string{"still works"}); err != nil {
		t.Fatalf("engine broken after rejecting blanks: %v", err)
	}
}

func TestTokenCap(t *testing.T) {
	long := strings.Repeat("please check the notifications of my repository ", 100)
	e := realEngine(t)
	ids, err := e.Tokens(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != e.Manifest().MaxTokens {
		t.Fatalf("got %d tokens, want the cap %d", len(ids), e.Manifest().MaxTokens)
	}
	if _, err := e.Embed(context.Background(), []string{long}); err != nil {
		t.Fatal(err)
	}
	bert, _ := bertEngine(t, 8)
	ids, err = bert.Tokens(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 8 || ids[0] != 2 || ids[7] != 3 {
		t.Fatalf("bert truncation: %v, want 8 ids from [CLS] to [SEP]", ids)
	}
}

func TestWhitespaceCollapsing(t *testing.T) {
	e := realEngine(t)
	v, err := e.Embed(context.Background(), []string{"a  b\t\nc", "a b c", "  a b c  "})
	if err != nil {
		t.Fatal(err)
	}
	if maxDiff(v[0], v[1]) > 1e-6 || maxDiff(v[1], v[2]) > 1e-6 {
		t.Fatal("whitespace variants embed differently")
	}
}

func TestConcurrentUse(t *testing.T) {
	e := realEngine(t)
	ctx := context.Background()
	want, err := e.Embed(ctx, sentences)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				k := (g + i) % len(sentences)
				got, err := e.Embed(ctx, []string{sentences[k]})
				if err != nil {
					errs <- err
					return
				}
				if maxDiff(got[0], want[k]) > 1e-5 {
					errs <- errors.New("concurrent result differs")
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCancellation(t *testing.T) {
	e := realEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, sentences); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	big := make([]string, 200)
	for i := range big {
		big[i] = strings.Repeat(sentences[i%len(sentences)]+" ", 8)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := e.Embed(ctx, big); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("deadline mid-run: %v", err)
	}
	if _, err := e.Embed(context.Background(), sentences[:2]); err != nil {
		t.Fatalf("engine broken after cancellation: %v", err)
	}
}

func TestLimitsAndClose(t *testing.T) {
	bert, _ := bertEngine(t, 16)
	if _, err := bert.Embed(context.Background(), make([]string, bert.MaxBatch()+1)); !errors.Is(err, ErrTooMany) {
		t.Fatalf("over MaxBatch: %v", err)
	}
	if err := bert.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bert.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := bert.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestParseManifest(t *testing.T) {
	good := `{"name":"m","inputs":{"input_ids":"a","attention_mask":"b"},"output":"o","pooling":"mean","dims":8,"max_tokens":16}`
	if _, err := ParseManifest([]byte(good)); err != nil {
		t.Fatalf("good manifest: %v", err)
	}
	cases := map[string]string{
		"bad json":     `{`,
		"no name":      strings.Replace(good, `"name":"m"`, `"name":""`, 1),
		"bad pooling":  strings.Replace(good, `"mean"`, `"max"`, 1),
		"zero dims":    strings.Replace(good, `"dims":8`, `"dims":0`, 1),
		"no output":    strings.Replace(good, `"output":"o"`, `"output":""`, 1),
		"no input ids": strings.Replace(good, `"input_ids":"a"`, `"input_ids":""`, 1),
		"huge max":     strings.Replace(good, `"max_tokens":16`, `"max_tokens":100000`, 1),
		"negative pad": strings.Replace(good, `"max_tokens":16}`, `"max_tokens":16,"pad_id":-1}`, 1),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseManifest([]byte(data)); !errors.Is(err, ErrBadManifest) {
				t.Fatalf("got %v, want ErrBadManifest", err)
			}
		})
	}
}

func TestModelManifestMismatch(t *testing.T) {
	realEngine(t)
	dir := t.TempDir()
	if err := onnxgen.Generate(16, 1).Write(dir, 16); err != nil {
		t.Fatal(err)
	}
	base, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Manifest){
		"missing input": func(m *Manifest) { m.Inputs.TokenTypeIDs = "" },
		"unknown input": func(m *Manifest) { m.Inputs.AttentionMask = "mask" },
		"wrong output":  func(m *Manifest) { m.Output = "pooler_output" },
		"wrong dims":    func(m *Manifest) { m.Dims = 32 },
		"wrong pooling": func(m *Manifest) { m.Pooling = PoolNone },
	} {
		t.Run(name, func(t *testing.T) {
			m := *base
			mut(&m)
			if e, err := Open(testRT, Config{ModelDir: dir, Manifest: &m}); !errors.Is(err, ErrModel) {
				if e != nil {
					e.Close()
				}
				t.Fatalf("got %v, want ErrModel", err)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	if err := onnxgen.Generate(16, 1).Write(dir, 16); err != nil {
		t.Fatal(err)
	}
	m, _ := ReadManifest(dir)
	path := filepath.Join(dir, ModelFile)
	a, err := Fingerprint(path, m)
	if err != nil {
		t.Fatal(err)
	}
	m2 := *m
	m2.MaxTokens = 15
	b, _ := Fingerprint(path, &m2)
	if err := onnxgen.Generate(16, 2).Write(dir, 16); err != nil {
		t.Fatal(err)
	}
	c, _ := Fingerprint(path, m)
	if a == b || a == c || len(a) != 64 {
		t.Fatalf("fingerprints %s %s %s", a, b, c)
	}
}

func TestInitRuntime(t *testing.T) {
	realEngine(t)
	if _, err := InitRuntime(wsORTLib()); err != nil {
		t.Fatalf("second init with the same path: %v", err)
	}
	if _, err := InitRuntime("/nonexistent/libonnxruntime.so"); !errors.Is(err, ErrRuntime) {
		t.Fatalf("other path while loaded: %v", err)
	}
}

func FuzzNormalizeText(f *testing.F) {
	m := &Manifest{CollapseWhitespace: true}
	for _, s := range []string{"", " a  b ", "\t\n", "héllo\u00a0wörld", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := m.NormalizeText(s)
		if out != strings.TrimSpace(out) && strings.TrimSpace(out) != "" {
			t.Fatalf("%q -> %q has outer space", s, out)
		}
		if strings.Contains(out, "  ") {
			t.Fatalf("%q -> %q has a double space", s, out)
		}
		if m.NormalizeText(out) != out {
			t.Fatalf("not idempotent: %q -> %q", s, out)
		}
	})
}
