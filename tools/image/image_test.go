package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		wantErr  string
	}{
		{name: "package", in: "Package: libc6\nVersion: 2.36-9+deb12u14\nArchitecture: amd64\nDescription: GNU C Library\n shared libraries\n",
			want: map[string]string{"Package": "libc6", "Version": "2.36-9+deb12u14", "Architecture": "amd64", "Description": "GNU C Library\nshared libraries"}},
		{name: "first paragraph only", in: "Package: a\nVersion: 1\nArchitecture: all\n\nPackage: b\n",
			want: map[string]string{"Package": "a", "Version": "1", "Architecture": "all"}},
		{name: "no version", in: "Package: a\nArchitecture: all\n", wantErr: "no Version"},
		{name: "continuation first", in: " oops\nPackage: a\n", wantErr: "continuation"},
		{name: "not a field", in: "Package a\n", wantErr: "Key: value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseControl([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseControl error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("field %s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %d fields %v, want %d", len(got), got, len(tc.want))
			}
		})
	}
}

// TestSBOMReproducible builds the SBOM of this test binary (Go build info)
// twice and checks it lists the binary's modules, the Debian packages, ONNX
// Runtime and the model, and that the same inputs give the same bytes.
func TestSBOMReproducible(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(dir, "status.d")
	model := filepath.Join(dir, "model")
	for _, d := range []string{status, model} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(status, "libc6"), "Package: libc6\nVersion: 2.36-9+deb12u14\nArchitecture: amd64\nMaintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\n")
	write(filepath.Join(status, "tzdata"), "Package: tzdata\nVersion: 2026b-0+deb12u1\nArchitecture: all\n")
	write(filepath.Join(dir, "libonnxruntime.so.1"), "not really a library")
	write(filepath.Join(model, "model.onnx"), "not really a model")
	write(filepath.Join(model, "manifest.json"), `{"name":"tiny","inputs":{"input_ids":"input_ids","attention_mask":"attention_mask"},"output":"embeddings","pooling":"none","dims":4,"max_tokens":8,"license":"MIT","source":{"package":"tiny-model","version":"1.0"}}`)
	f := sbomFiles{binary: exe, statusDir: status, ortLib: filepath.Join(dir, "libonnxruntime.so.1"), ortPURL: "pkg:npm/onnxruntime-node@1.24.3",
		modelDir: model, name: "classifierd", created: time.Unix(1700000000, 0).UTC()}
	doc, err := buildSBOM(f)
	if err != nil {
		t.Fatal(err)
	}
	again, err := buildSBOM(f)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(doc)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Error("the same inputs gave two different SBOMs")
	}
	if doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("created %q, want SOURCE_DATE_EPOCH's time", doc.CreationInfo.Created)
	}
	purls := map[string]bool{}
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			purls[r.ReferenceLocator] = true
		}
	}
	for _, want := range []string{"pkg:deb/debian/libc6@2.36-9+deb12u14?arch=amd64&distro=debian-12",
		"pkg:deb/debian/tzdata@2026b-0+deb12u1?arch=all&distro=debian-12", "pkg:npm/onnxruntime-node@1.24.3",
		"pkg:golang/google.golang.org/grpc@"} {
		found := false
		for p := range purls {
			if strings.HasPrefix(p, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no package URL %q in the SBOM", want)
		}
	}
	rels := 0
	for _, r := range doc.Relationships {
		if r.RelationshipType == "CONTAINS" {
			rels++
		}
	}
	if rels != len(doc.Packages)-1 {
		t.Errorf("%d CONTAINS relationships for %d packages besides the image", rels, len(doc.Packages)-1)
	}

	write(filepath.Join(model, "manifest.json"), `{"name":"tiny","inputs":{"input_ids":"input_ids","attention_mask":"attention_mask"},"output":"embeddings","pooling":"none","dims":4,"max_tokens":8,"model_sha256":"00"}`)
	if _, err := buildSBOM(f); err == nil || !strings.Contains(err.Error(), "manifest says") {
		t.Errorf("a model that is not its manifest's: error %v, want a sha256 mismatch", err)
	}
}

func TestRuntimeConfig(t *testing.T) {
	in := `{"ociVersion":"1.0.2","process":{"terminal":true,"user":{"uid":65532,"gid":65532},"args":["/usr/local/bin/classifierd","--listen","0.0.0.0:50051"],
"rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}]},"root":{"path":"rootfs"},"mounts":[{"destination":"/proc","type":"proc","source":"proc"}],
"linux":{"namespaces":[{"type":"pid"},{"type":"network"},{"type":"mount"}]},"annotations":{"keep":"me"}}`
	out, err := runtimeConfig([]byte(in), bundleOptions{netns: "/var/run/netns/x", args: []string{"--metrics-listen", "0.0.0.0:9090"}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Process struct {
			Terminal        bool     `json:"terminal"`
			NoNewPrivileges bool     `json:"noNewPrivileges"`
			Args            []string `json:"args"`
			Rlimits         []any    `json:"rlimits"`
		} `json:"process"`
		Root   struct{ Readonly bool } `json:"root"`
		Mounts []struct{ Destination string }
		Linux  struct {
			Namespaces []struct{ Type, Path string }
		} `json:"linux"`
		Annotations map[string]string
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Process.Rlimits != nil || cfg.Process.Terminal || !cfg.Process.NoNewPrivileges || !cfg.Root.Readonly {
		t.Errorf("process %+v root %+v: want no rlimits, no terminal, no new privileges, read-only root", cfg.Process, cfg.Root)
	}
	if got := strings.Join(cfg.Process.Args, " "); got != "/usr/local/bin/classifierd --listen 0.0.0.0:50051 --metrics-listen 0.0.0.0:9090" {
		t.Errorf("args %q", got)
	}
	if n := len(cfg.Mounts); n != 2 || cfg.Mounts[1].Destination != "/tmp" {
		t.Errorf("mounts %+v: want /proc and a /tmp tmpfs", cfg.Mounts)
	}
	var netns string
	for _, n := range cfg.Linux.Namespaces {
		if n.Type == "network" {
			netns = n.Path
		}
	}
	if netns != "/var/run/netns/x" || len(cfg.Linux.Namespaces) != 3 {
		t.Errorf("namespaces %+v: want the network one joined at /var/run/netns/x", cfg.Linux.Namespaces)
	}
	if cfg.Annotations["keep"] != "me" {
		t.Error("fields the rewrite does not know were lost")
	}

	root := strings.Replace(in, `"uid":65532`, `"uid":0`, 1)
	if _, err := runtimeConfig([]byte(root), bundleOptions{netns: "/x"}); err == nil {
		t.Error("an image running as root: no error")
	}
}

func TestRouteCount(t *testing.T) {
	exp := `# HELP classifierd_rpc_requests_total gRPC calls handled
classifierd_rpc_requests_total{code="OK",method="/classifier.v1.ClassifierService/Classify"} 3
classifierd_rpc_requests_total{code="InvalidArgument",method="/classifier.v1.ClassifierService/Route"} 1
`
	if got := routeCount(exp); got != "" {
		t.Errorf("routeCount without an OK Route = %q, want none", got)
	}
	ok := `classifierd_rpc_requests_total{code="OK",method="/classifier.v1.ClassifierService/Route"} 2`
	if got := routeCount(exp + ok + "\n"); got != ok {
		t.Errorf("routeCount = %q, want %q", got, ok)
	}
}
