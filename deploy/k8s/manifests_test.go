// Package k8s_test validates the Kubernetes manifests in this directory
// offline: each document is decoded strictly (unknown or misspelt fields
// fail, values must have the API's types) into the k8s.io/api type of its
// apiVersion and kind, and the objects are checked against each other and
// against the daemon: selectors match the pods, probes are gRPC health
// checks of a service the daemon serves, the pod runs as the Dockerfile's
// non-root user on a read-only root, and every daemon flag exists.
// `make k8s-check` runs it; no cluster and no schema download are needed.
package k8s_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// objects are the manifests' documents, decoded.
type objects struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	pdbs        []*policyv1.PodDisruptionBudget
}

// decodeDoc decodes one YAML document strictly into the type its
// apiVersion and kind name, as the API server reads a request: duplicate
// keys, unknown fields and fields in the wrong case are errors (Go's own
// encoding/json would accept "clusterIp" for clusterIP).
func decodeDoc(doc []byte, into *objects) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return err
	}
	strict := func(v any) error {
		strictErrs, err := sigsjson.UnmarshalStrict(js, v)
		if err != nil {
			return err
		}
		return errors.Join(strictErrs...)
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		into.deployments = append(into.deployments, d)
		return strict(d)
	case "v1 Service":
		s := &corev1.Service{}
		into.services = append(into.services, s)
		return strict(s)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		into.hpas = append(into.hpas, h)
		return strict(h)
	case "policy/v1 PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		into.pdbs = append(into.pdbs, p)
		return strict(p)
	}
	return fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
}

func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func load(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var o objects
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(data) {
			if err := decodeDoc(doc, &o); err != nil {
				t.Errorf("%s document %d: %v", f, i+1, err)
			}
		}
	}
	if len(o.deployments) != 1 || len(o.services) == 0 || len(o.hpas) != 1 || len(o.pdbs) != 1 {
		t.Fatalf("want one Deployment, Services, one HPA and one PDB; got %d, %d, %d, %d",
			len(o.deployments), len(o.services), len(o.hpas), len(o.pdbs))
	}
	return o
}

// The strict decoder is what catches mistakes: check it does.
func TestDecoderRejectsMistakes(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":  "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n",
		"wrong type":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: two}\n",
		"port as text":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 50051, targetPort: grpc, protocol: TCP, name: grpc, nodePort: x}]}\n",
		"bad quantity":   "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {containers: [{name: c, resources: {limits: {cpu: two}}}]}}}\n",
		"duplicate key":  "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {type: ClusterIP, type: NodePort}\n",
		"unknown kind":   "apiVersion: v1\nkind: Servce\nmetadata: {name: x}\n",
		"misspelt probe": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {containers: [{name: c, livenessProbe: {grcp: {port: 1}}}]}}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if err := decodeDoc([]byte(doc), &objects{}); err == nil {
				t.Fatalf("decoded without error:\n%s", doc)
			}
		})
	}
}

func TestManifests(t *testing.T) {
	o := load(t)
	d := o.deployments[0]
	pod := d.Spec.Template
	podLabels := labels.Set(pod.Labels)

	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("Deployment selector %v (%v) does not select its pods %v", d.Spec.Selector, err, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]

	// The image by digest (make image builds it reproducibly; make
	// image-pin writes its digest here), never a tag that can move.
	if !regexp.MustCompile(`^[a-z0-9./-]+@sha256:[0-9a-f]{64}$`).MatchString(c.Image) {
		t.Errorf("container image %q: want NAME@sha256:DIGEST", c.Image)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("imagePullPolicy %q: want IfNotPresent (a digest never changes)", c.ImagePullPolicy)
	}

	// Non-root, as the image's USER, on a read-only root file system.
	uid := dockerfileUser(t)
	if b := imageBuildUser(t); b != uid {
		t.Errorf("deploy/image/build.sh runs as uid %d, the Dockerfile as %d", b, uid)
	}
	psc, csc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != uid {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser %d (the Dockerfile's USER)", psc, uid)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, all capabilities dropped", csc)
	}

	// Resources: requests and limits for CPU and memory.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s: request %v, limit %v: want both, request <= limit", r, req.String(), lim.String())
		}
	}

	// Probes: gRPC health checks on the container's gRPC port; readiness
	// of the service the daemon reports.
	var grpcPort int32
	for _, p := range c.Ports {
		if p.Name == "grpc" {
			grpcPort = p.ContainerPort
		}
	}
	if grpcPort == 0 {
		t.Fatal("container has no port named grpc")
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != grpcPort {
			t.Errorf("%s probe %+v: want a gRPC probe on port %d", name, p, grpcPort)
		}
	}
	if r := c.ReadinessProbe; r != nil && r.GRPC != nil {
		want := pb.ClassifierService_ServiceDesc.ServiceName
		if got := r.GRPC.Service; got == nil || *got != want {
			t.Errorf("readiness probe service %q, want %q (the daemon reports it in grpc.health.v1)", deref(got), want)
		}
	}

	// Graceful stop fits in the grace period.
	shutdown := flagValue(c.Args, "shutdown-wait")
	var preStop int64
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	var wait int64 = 10 // the daemon's default --shutdown-wait
	if shutdown != "" {
		if _, err := fmt.Sscanf(shutdown, "%ds", &wait); err != nil {
			t.Fatalf("--shutdown-wait=%s: write it in whole seconds (e.g. 15s)", shutdown)
		}
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g <= wait+preStop {
		t.Errorf("terminationGracePeriodSeconds %v: want more than preStop %ds + --shutdown-wait %ds", g, preStop, wait)
	}

	// Every argument is a flag the daemon has.
	known := daemonFlags(t)
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || !known[name] {
			t.Errorf("container argument %q is not a classifierd flag (--name=value)", a)
		}
	}

	// Services select the pods and target the gRPC port by name.
	for _, s := range o.services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s selector %v does not select the pods %v", s.Name, s.Spec.Selector, pod.Labels)
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() != "grpc" && p.TargetPort.IntValue() != int(grpcPort) {
				t.Errorf("Service %s port %s targets %s, not the container's grpc port", s.Name, p.Name, p.TargetPort.String())
			}
		}
	}

	// The autoscaler scales this Deployment; the budget covers its pods
	// and leaves room for a voluntary eviction at the minimum size.
	h, pdb := o.hpas[0], o.pdbs[0]
	if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("HPA scales %+v, want the Deployment %s", ref, d.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas || len(h.Spec.Metrics) == 0 {
		t.Errorf("HPA min %v max %d metrics %d: want 2 <= min <= max and a metric", h.Spec.MinReplicas, h.Spec.MaxReplicas, len(h.Spec.Metrics))
	}
	psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || psel.Empty() || !psel.Matches(podLabels) {
		t.Errorf("PDB selector %v (%v) does not select the pods", pdb.Spec.Selector, err)
	}
	if pdb.Spec.MinAvailable == nil || h.Spec.MinReplicas == nil || pdb.Spec.MinAvailable.IntValue() >= int(*h.Spec.MinReplicas) {
		t.Errorf("PDB minAvailable %v with HPA minReplicas %v: a node drain could never evict a pod", pdb.Spec.MinAvailable, h.Spec.MinReplicas)
	}
}

// imageBuildUser is the uid and gid `make image` gives the image
// (deploy/image/build.sh's UID_GID).
func imageBuildUser(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("../image/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^UID_GID=(\d+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("deploy/image/build.sh sets no UID_GID")
	}
	uid, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil || uid == 0 {
		t.Fatalf("deploy/image/build.sh UID_GID %q: want a non-root uid", m[1])
	}
	return uid
}

// dockerfileUser is the numeric uid of the runtime stage's USER.
func dockerfileUser(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindAllSubmatch(data, -1)
	if len(m) == 0 {
		t.Fatal("Dockerfile has no numeric USER")
	}
	var uid int64
	fmt.Sscan(string(m[len(m)-1][1]), &uid)
	if uid == 0 {
		t.Fatal("Dockerfile runs as root")
	}
	return uid
}

// daemonFlags are the flag names classifierd defines (read from its
// source files: the test cannot import package main).
func daemonFlags(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../../cmd/classifierd/*.go")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`fs\.\w+\([^"]*"([a-z][a-z0-9-]*)"`).FindAllSubmatch(data, -1) {
			known[string(m[1])] = true
		}
	}
	if !known["listen"] || !known["index"] {
		t.Fatalf("read %d flag names from config.go, not --listen and --index: the pattern is stale", len(known))
	}
	return known
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := bytes.CutPrefix([]byte(a), []byte("--"+name+"=")); ok {
			return string(v)
		}
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestDockerfileMatchesBuild checks the Dockerfile's pinned versions
// against the Makefile and go.mod, so the image cannot drift from what
// `make deps` puts in .cache/ or from the Go the module needs.
func TestDockerfileMatchesBuild(t *testing.T) {
	read := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	docker, makefile, gomod := read("../../Dockerfile"), read("../../Makefile"), read("../../go.mod")
	value := func(text, pattern string) string {
		m := regexp.MustCompile(pattern).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no match for %s", pattern)
		}
		return m[1]
	}
	for _, tc := range []struct{ what, docker, want string }{
		{"ONNX Runtime version", value(docker, `(?m)^ARG ORT_VERSION=(\S+)`), value(makefile, `(?m)^ORT_VERSION\s*:=\s*(\S+)`)},
		{"default model", value(docker, `(?m)^ARG MODEL=(\S+)`), value(makefile, `(?m)^MODEL\s*\?=\s*(\S+)`)},
		{"Go version", value(docker, `(?m)^ARG GO_VERSION=(\S+)`), value(gomod, `(?m)^go (\d+\.\d+)`)},
	} {
		if tc.docker != tc.want {
			t.Errorf("Dockerfile %s %q, build uses %q", tc.what, tc.docker, tc.want)
		}
	}
	if !strings.Contains(docker, "/usr/local/bin/classifierd") || !strings.Contains(docker, "gcr.io/distroless/") {
		t.Error("Dockerfile: want the daemon on a distroless base")
	}
}
