package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/classifierd/classifierd/models"
)

// spdxDoc is the part of an SPDX 2.3 JSON document the image's SBOM uses.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string         `json:"SPDXID"`
	Name             string         `json:"name"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	Supplier         string         `json:"supplier,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	LicenseConcluded string         `json:"licenseConcluded"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	CopyrightText    string         `json:"copyrightText"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	Comment          string         `json:"comment,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// noAssertion is SPDX's "not stated" for the fields it requires.
const noAssertion = "NOASSERTION"

// sbomFiles are the inputs of one SBOM.
type sbomFiles struct {
	binary    string // the daemon (Go modules from its build info)
	statusDir string // Debian control paragraphs, one file per package (distroless's var/lib/dpkg/status.d)
	ortLib    string // libonnxruntime.so.1 as shipped
	ortPURL   string // where it came from
	modelDir  string // manifest.json and model.onnx
	name      string // the image's name
	created   time.Time
}

func runSBOM(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	var f sbomFiles
	fs.StringVar(&f.binary, "binary", "", "the classifierd binary in the image")
	fs.StringVar(&f.statusDir, "status-dir", "", "the image's var/lib/dpkg/status.d (one control paragraph per Debian package)")
	fs.StringVar(&f.ortLib, "ort-lib", "", "the image's libonnxruntime.so.1")
	fs.StringVar(&f.ortPURL, "ort-purl", "pkg:npm/onnxruntime-node@1.24.3", "package URL of the ONNX Runtime library")
	fs.StringVar(&f.modelDir, "model", "", "the image's model directory (manifest.json, model.onnx)")
	fs.StringVar(&f.name, "name", "classifierd", "the image's name")
	out := fs.String("out", "", "write the SBOM here (default stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.binary == "" || f.statusDir == "" || f.ortLib == "" || f.modelDir == "" {
		return errors.New("sbom: --binary, --status-dir, --ort-lib and --model are required")
	}
	created, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	f.created = created
	doc, err := buildSBOM(f)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *out == "" {
		_, err = stdout.Write(data)
		return err
	}
	return os.WriteFile(*out, data, 0o644)
}

// sourceDate is SOURCE_DATE_EPOCH as a time; the image's SBOM must not
// carry the time it was made, or two builds would differ.
func sourceDate(v string) (time.Time, error) {
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("sbom: SOURCE_DATE_EPOCH=%q: want seconds since 1970 (the build sets it)", v)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// buildSBOM lists the image's parts: the daemon and its Go modules, the
// Debian packages of its root file system, ONNX Runtime and the model.
// The document's namespace is derived from its content, so the same
// inputs give the same bytes.
func buildSBOM(f sbomFiles) (*spdxDoc, error) {
	bi, err := buildinfo.ReadFile(f.binary)
	if err != nil {
		return nil, fmt.Errorf("sbom: %s: %w", f.binary, err)
	}
	binSum, err := fileSHA256(f.binary)
	if err != nil {
		return nil, err
	}
	root := "SPDXRef-Image"
	doc := &spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: f.name,
		CreationInfo: spdxCreation{Created: f.created.Format(time.RFC3339), Creators: []string{"Tool: classifierd tools/image sbom"}},
	}
	add := func(p spdxPackage) {
		doc.Packages = append(doc.Packages, p)
		if p.SPDXID != root {
			doc.Relationships = append(doc.Relationships, spdxRelationship{root, "CONTAINS", p.SPDXID})
		}
	}
	add(pkg(root, f.name, "", "", nil, "the OCI image"))
	daemon := pkg("SPDXRef-Go-"+spdxSafe(bi.Main.Path), bi.Main.Path, vcsVersion(bi), "pkg:golang/"+bi.Main.Path,
		[]spdxChecksum{{"SHA256", binSum}}, "/usr/local/bin/classifierd, built with "+bi.GoVersion)
	add(daemon)
	add(pkg("SPDXRef-Go-stdlib", "stdlib", strings.TrimPrefix(bi.GoVersion, "go"), "pkg:golang/stdlib@"+strings.TrimPrefix(bi.GoVersion, "go"), nil, "the Go standard library and runtime"))
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		p := pkg("SPDXRef-Go-"+spdxSafe(m.Path), m.Path, m.Version, "pkg:golang/"+m.Path+"@"+m.Version, nil, "Go module linked into classifierd")
		if m.Sum != "" {
			p.Comment += " (go.sum " + m.Sum + ")"
		}
		add(p)
	}
	debs, err := readStatusDir(f.statusDir)
	if err != nil {
		return nil, err
	}
	for _, d := range debs {
		purl := "pkg:deb/debian/" + d["Package"] + "@" + url.PathEscape(d["Version"]) + "?arch=" + d["Architecture"] + "&distro=debian-12"
		p := pkg("SPDXRef-Deb-"+spdxSafe(d["Package"]), d["Package"], d["Version"], purl, nil, "Debian package of the root file system")
		if d["Maintainer"] != "" {
			p.Supplier = "Organization: " + d["Maintainer"]
		}
		add(p)
	}
	ortSum, err := fileSHA256(f.ortLib)
	if err != nil {
		return nil, err
	}
	add(pkg("SPDXRef-OnnxRuntime", "onnxruntime", purlVersion(f.ortPURL), f.ortPURL, []spdxChecksum{{"SHA256", ortSum}},
		"libonnxruntime.so.1 from the npm package (linux x64)"))
	model, err := modelPackage(f.modelDir)
	if err != nil {
		return nil, err
	}
	add(model)
	doc.Relationships = append([]spdxRelationship{{"SPDXRef-DOCUMENT", "DESCRIBES", root}}, doc.Relationships...)

	// The namespace names this document uniquely; a hash of everything
	// else keeps it reproducible.
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc.DocumentNamespace = "https://classifierd.invalid/spdx/" + f.name + "-" + hex.EncodeToString(sum[:])
	return doc, nil
}

func pkg(id, name, version, purl string, sums []spdxChecksum, comment string) spdxPackage {
	p := spdxPackage{SPDXID: id, Name: name, VersionInfo: version, DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
		Checksums: sums, Comment: comment}
	if purl != "" {
		p.ExternalRefs = []spdxRef{{"PACKAGE-MANAGER", "purl", purl}}
	}
	return p
}

// vcsVersion is the commit the daemon was built from (and "-dirty" for
// a modified tree), or its module version.
func vcsVersion(bi *buildinfo.BuildInfo) string {
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return bi.Main.Version
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}

func purlVersion(purl string) string {
	if i := strings.LastIndexByte(purl, '@'); i >= 0 {
		return purl[i+1:]
	}
	return ""
}

// modelPackage describes the model directory from its manifest.
func modelPackage(dir string) (spdxPackage, error) {
	m, err := models.ReadManifest(dir)
	if err != nil {
		return spdxPackage{}, fmt.Errorf("sbom: %w", err)
	}
	sum, err := fileSHA256(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return spdxPackage{}, err
	}
	if m.ModelSHA256 != "" && m.ModelSHA256 != sum {
		return spdxPackage{}, fmt.Errorf("sbom: model.onnx sha256 %s, its manifest says %s", sum, m.ModelSHA256)
	}
	var src []string
	if s := m.Source; s != nil {
		for _, kv := range [][2]string{{"package", s.Package}, {"version", s.Version}, {"wheel sha256", s.WheelSHA256},
			{"derived from", s.DerivedFrom}, {"from model sha256", s.FromModelSHA256}, {"method", s.Method}} {
			if kv[1] != "" {
				src = append(src, kv[0]+" "+kv[1])
			}
		}
	}
	return pkg("SPDXRef-Model", m.Name, "", "", []spdxChecksum{{"SHA256", sum}},
		"sentence-embedding model (ONNX); source: "+strings.Join(src, ", ")+"; license: "+m.License), nil
}

// readStatusDir reads one Debian control paragraph per file, sorted by
// package name.
func readStatusDir(dir string) ([]map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	var out []map[string]string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("sbom: %w", err)
		}
		fields, err := parseControl(data)
		if err != nil {
			return nil, fmt.Errorf("sbom: %s: %w", e.Name(), err)
		}
		out = append(out, fields)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sbom: no Debian packages under %s", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["Package"] < out[j]["Package"] })
	return out, nil
}

// parseControl parses one Debian control paragraph ("Key: value" lines,
// continuation lines starting with a space or tab) and checks that it
// names a package, its version and architecture.
func parseControl(data []byte) (map[string]string, error) {
	fields := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // one paragraph per file
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				return nil, errors.New("continuation line before any field")
			}
			fields[last] += "\n" + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %q: want Key: value", line)
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, k := range []string{"Package", "Version", "Architecture"} {
		if fields[k] == "" {
			return nil, fmt.Errorf("no %s field", k)
		}
	}
	return fields, nil
}

// spdxSafe makes an SPDX identifier from a name: letters, digits, '.'
// and '-' only.
func spdxSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

func fileSHA256(path string) (string, error) {
	sum, err := models.FileSHA256(path)
	if err != nil {
		return "", fmt.Errorf("sbom: %w", err)
	}
	return sum, nil
}
