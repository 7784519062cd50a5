// Tests of rules that hold across the module's packages.
package classifierd_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/internal/testenv"
)

const onnxRuntime = "github.com/yalue/onnxruntime_go"

// assemblesModel are the packages cmd/classifierd's start moved to that
// hold the engine the program opened: the reload policy (which embeds
// new indexes with it) and classifierd proxy's assembly (which opens it).
var assemblesModel = map[string]bool{"internal/reload": true, "internal/proxyrun": true}

// mayLinkONNXRuntime reports whether the package at path rel (relative to
// the module root) may depend on ONNX Runtime: embed (and packages beneath
// it, such as its test helpers), the programs that open a model, and the
// parts of their start that hold it (assemblesModel).
func mayLinkONNXRuntime(rel string) bool {
	return rel == "embed" || strings.HasPrefix(rel, "embed/") ||
		strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "tools/") ||
		assemblesModel[rel]
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

// mainMaxLines bounds cmd/classifierd's non-test code: flags, config and
// start (docs/architecture.md). Each concern it wires lives in a package
// named for it.
const mainMaxLines = 1200

// concernImports are libraries whose use is a concern of its own package,
// which cmd/classifierd wires but does not hold.
var concernImports = map[string]string{
	"crypto/x509": "internal/security",
	"github.com/modelcontextprotocol/go-sdk/auth":                                 "internal/security",
	"github.com/modelcontextprotocol/go-sdk/jsonrpc":                              "internal/httpguard",
	"connectrpc.com/vanguard":                                                     "internal/listeners",
	"connectrpc.com/vanguard/vanguardgrpc":                                        "internal/listeners",
	"github.com/prometheus/client_golang/prometheus/promhttp":                     "internal/listeners",
	"github.com/redis/go-redis/v9":                                                "internal/state",
	"go.opentelemetry.io/otel":                                                    "internal/telemetry",
	"go.opentelemetry.io/otel/sdk/trace":                                          "internal/telemetry",
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc": "internal/telemetry",
	"github.com/classifierd/classifierd/indexbuild":                               "internal/reload",
	"github.com/classifierd/classifierd/mcpproxy":                                 "internal/proxyrun",
}

// TestMainIsThin checks that cmd/classifierd stays flags, config and
// start: at most mainMaxLines lines of non-test Go, methods only on the
// daemon's Config (its validation), no package-level variables, and none
// of the libraries of a concern that has its own package.
func TestMainIsThin(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "cmd", "classifierd")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lines, parsed := 0, 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(src, []byte("\n"))
		f, err := parser.ParseFile(fset, path, src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if owner, ok := concernImports[p]; ok {
				t.Errorf("%s imports %s: that concern lives in %s; wire it from there", filepath.Base(path), p, owner)
			}
		}
		full, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed++
		for _, d := range full.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					continue
				}
				recv := d.Recv.List[0].Type
				if st, ok := recv.(*ast.StarExpr); ok {
					recv = st.X
				}
				if id, ok := recv.(*ast.Ident); !ok || id.Name != "Config" {
					t.Errorf("%s: method %s on %s: main holds no types with behaviour; move it to the package of its concern",
						fset.Position(d.Pos()), d.Name.Name, types.ExprString(recv))
				}
			case *ast.GenDecl:
				if d.Tok == token.VAR {
					t.Errorf("%s: package-level variable in main: state belongs to the package of its concern", fset.Position(d.Pos()))
				}
			}
		}
	}
	if parsed == 0 {
		t.Fatalf("no Go files in %s: the check found nothing to check", dir)
	}
	t.Logf("cmd/classifierd: %d non-test lines in %d files (limit %d)", lines, parsed, mainMaxLines)
	if lines > mainMaxLines {
		t.Errorf("cmd/classifierd has %d non-test lines, over %d: move a concern to a package named for it (docs/architecture.md)", lines, mainMaxLines)
	}
}
