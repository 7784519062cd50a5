package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/internal/testdaemon"
	"github.com/classifierd/classifierd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

func testSources(t *testing.T) *sources {
	t.Helper()
	root := testenv.RepoRoot()
	src, err := loadSources(filepath.Join(root, "data/catalogs/default.json"), filepath.Join(root, "../shared/datasets/metatool.json"))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestSynthCatalogIsDeterministicAndValid(t *testing.T) {
	src := testSources(t)
	a, b := synthCatalog(src, 95, 7), synthCatalog(src, 95, 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two catalogs of the same seed differ")
	}
	if reflect.DeepEqual(a, synthCatalog(src, 95, 8)) {
		t.Fatal("another seed gave the same catalog")
	}
	for name, c := range map[string]*catalog.Catalog{"distinct": a, "replicated": replicate(a, 250)} {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := writeCatalog(path, c); err != nil {
			t.Fatal(err)
		}
		parsed, err := catalog.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		for _, s := range parsed.Servers {
			n += len(s.Tools)
		}
		if want := map[string]int{"distinct": 95, "replicated": 250}[name]; n != want {
			t.Errorf("%s: %d tools, want %d", name, n, want)
		}
	}
}

// TestRunSmall runs the make bench-scale code path on small catalogs
// with the real model and gen-index: a distinct one and a replicated one.
func TestRunSmall(t *testing.T) {
	genIndex := testdaemon.Binary(t, "./tools/gen-index")
	root := testenv.RepoRoot()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"run", "--sizes", "40,120", "--distinct", "40", "--queries", "10", "--shortlist-from", "100",
		"--gen-index", genIndex, "--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(),
		"--default-catalog", filepath.Join(root, "data/catalogs/default.json"),
		"--metatool", filepath.Join(root, "../shared/datasets/metatool.json"), "--dir", t.TempDir()}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "| 40 | 40 |") || !strings.HasPrefix(lines[3], "| 120 | 40 |") {
		t.Fatalf("table:\n%s", stdout.String())
	}
	// 44 vectors are scored exactly, 132 against a shortlist (--shortlist-from 100), whose
	// agreement with the exact answers is measured.
	if !strings.Contains(lines[2], "| exact |") || !strings.Contains(lines[3], "| shortlist, ") || !strings.Contains(lines[3], "/10 |") {
		t.Fatalf("table:\n%s", stdout.String())
	}
	if _, err := os.Stat(genIndex); err != nil {
		t.Fatal(err)
	}
}
