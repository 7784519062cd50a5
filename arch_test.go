// Tests of rules that hold across the module's packages.
package classifierd_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/testenv"
)

const onnxRuntime = "github.com/yalue/onnxruntime_go"

// mayLinkONNXRuntime reports whether the package at path rel (relative to
// the module root) may depend on ONNX Runtime: embed (and packages beneath
// it, such as its test helpers), and the programs that open a model.
func mayLinkONNXRuntime(rel string) bool {
	return rel == "embed" || strings.HasPrefix(rel, "embed/") ||
		strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "tools/")
}

// TestCgoStaysInEmbed checks the rule of docs/architecture.md: embed is the
// only package importing onnxruntime_go, and no package but embed, the
// commands and the tools depends on it, in its build or its tests. So
// models, index, classify, server, session, terminal and the rest build
// and test without ONNX Runtime, against fakes.
func TestCgoStaysInEmbed(t *testing.T) {
	root := testenv.RepoRoot()
	mod := goList(t, root, "-m")
	out := goList(t, root, "-test", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}\t{{len .CgoFiles}}", "./...")
	var embedLinks bool
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q: want 4 tab-separated fields", sc.Text())
		}
		path, imports, deps, cgoFiles := f[0], strings.Fields(f[1]), strings.Fields(f[2]), f[3]
		// "p", "p [p.test]", "p_test [p.test]" and "p.test" all belong to p.
		owner, _, _ := strings.Cut(path, " ")
		owner = strings.TrimSuffix(strings.TrimSuffix(owner, ".test"), "_test")
		rel := strings.TrimPrefix(strings.TrimPrefix(owner, mod), "/")
		if rel == "" {
			rel = "."
		}
		if cgoFiles != "0" {
			t.Errorf("%s has cgo files; cgo belongs behind embed", path)
		}
		if slices.Contains(imports, onnxRuntime) && rel != "embed" {
			t.Errorf("%s imports %s; only embed may", path, onnxRuntime)
		}
		if slices.Contains(deps, onnxRuntime) {
			if rel == "embed" {
				embedLinks = true
			} else if !mayLinkONNXRuntime(rel) {
				t.Errorf("%s depends on %s (module packages among its deps: %v); consume a small interface instead and let cmd/ wire the engine in",
					path, onnxRuntime, moduleDepsOn(deps, mod))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !embedLinks {
		t.Fatalf("embed does not depend on %s: the check found nothing to check", onnxRuntime)
	}
}

// moduleDepsOn lists the module's own packages among deps: the suspects
// for pulling a dependency in.
func moduleDepsOn(deps []string, mod string) []string {
	var out []string
	for _, d := range deps {
		if strings.HasPrefix(d, mod+"/") {
			out = append(out, strings.TrimPrefix(d, mod+"/"))
		}
	}
	return out
}

func goList(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
