// Package index owns the classifierd index file: a versioned binary file
// holding the labels of a catalog (categories, servers, tools), one or more
// unit vectors per label, the fingerprint of the model that made them and the
// calibration fitted at build time. Loading validates everything; scoring is
// a SIMD dot product (github.com/viterin/vek) over the stored vectors.
//
// Layout (little-endian):
//
//	magic     [8]byte  "CLSFIDX\x00"
//	version   uint32   FormatVersion
//	hdrLen    uint32   length of the JSON header
//	header    []byte   JSON Header: model, fingerprint, labels, calibration
//	dims      uint32
//	count     uint32   number of vectors
//	vectors   []float32 count*dims
//	crc       uint32   CRC-32C of every byte above
package index

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/classifierd/classifierd/calibrate"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/viterin/vek/vek32"
)

// Magic starts every index file.
const Magic = "CLSFIDX\x00"

// FormatVersion is the version this package writes and reads.
const FormatVersion uint32 = 1

// Errors returned when an index cannot be used.
var (
	ErrBadMagic    = errors.New("index: not an index file (bad magic)")
	ErrVersion     = errors.New("index: unsupported format version")
	ErrTruncated   = errors.New("index: truncated file")
	ErrCorrupt     = errors.New("index: corrupted file")
	ErrDimMismatch = errors.New("index: dimension mismatch")
	ErrModel       = errors.New("index: built with a different model")
)

const (
	maxHeaderBytes = 512 << 20
	maxDims        = 8192
	maxVectors     = 10_000_000
	normTolerance  = 1e-3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Kind is what a label names.
type Kind string

// Label kinds.
const (
	KindCategory Kind = "category"
	KindServer   Kind = "server"
	KindTool     Kind = "tool"
)

// Source says what text a vector was embedded from.
type Source string

// Vector sources.
const (
	SourceDescription Source = "description"
	SourceExample     Source = "example"
	SourceName        Source = "name"
	// SourceRequest is a tool's description phrased as a user's request.
	SourceRequest Source = "request"
)

// Label is one category, server or tool with its metadata and the range of
// its vectors.
type Label struct {
	Kind Kind `json:"kind"`
	// ID is the category or server id, or "server/tool" for tools.
	ID          string          `json:"id"`
	Name        string          `json:"name,omitempty"`
	Server      string          `json:"server,omitempty"`
	Category    string          `json:"category,omitempty"`
	Categories  []string        `json:"categories,omitempty"`
	Description string          `json:"description,omitempty"`
	Keywords    []string        `json:"keywords,omitempty"`
	Patterns    []string        `json:"patterns,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// First and Count locate the label's vectors.
	First int `json:"first"`
	Count int `json:"count"`
	// Texts and Sources describe each vector, for deterministic reasoning.
	Texts   []string `json:"texts"`
	Sources []Source `json:"sources"`
}

// Header is everything in an index except the vectors.
type Header struct {
	Model         string    `json:"model"`
	Fingerprint   string    `json:"fingerprint"`
	Dims          int       `json:"dims"`
	BuiltAt       time.Time `json:"built_at"`
	CatalogSHA256 string    `json:"catalog_sha256"`
	Generator     string    `json:"generator,omitempty"`
	Labels        []Label   `json:"labels"`
	// Calibration holds the score-to-probability maps and fusion weights
	// fitted by gen-index (nil: built without; calibrate.OrDefault). It is
	// typed and versioned, and validated when the index loads.
	Calibration *calibrate.Calibration `json:"calibration,omitempty"`
}

// Index is a loaded, validated index. It is immutable and safe for
// concurrent use.
type Index struct {
	Header
	vecs   []float32
	count  int
	byKind map[Kind][]int
	byID   map[Kind]map[string]int
}

// New validates a header and its vectors and returns an Index.
func New(h Header, vectors [][]float32) (*Index, error) {
	flat := make([]float32, 0, len(vectors)*h.Dims)
	for i, v := range vectors {
		if len(v) != h.Dims {
			return nil, fmt.Errorf("%w: vector %d has %d dims, header says %d", ErrDimMismatch, i, len(v), h.Dims)
		}
		flat = append(flat, v...)
	}
	return build(h, flat, len(vectors))
}

func build(h Header, flat []float32, count int) (*Index, error) {
	if h.Dims <= 0 || h.Dims > maxDims {
		return nil, fmt.Errorf("%w: dims %d out of range", ErrCorrupt, h.Dims)
	}
	if h.Fingerprint == "" {
		return nil, fmt.Errorf("%w: no model fingerprint", ErrCorrupt)
	}
	x := &Index{Header: h, vecs: flat, count: count,
		byKind: map[Kind][]int{}, byID: map[Kind]map[string]int{}}
	covered := 0
	for i, l := range h.Labels {
		switch l.Kind {
		case KindCategory, KindServer, KindTool:
		default:
			return nil, fmt.Errorf("%w: label %d has kind %q", ErrCorrupt, i, l.Kind)
		}
		if l.ID == "" {
			return nil, fmt.Errorf("%w: label %d has no id", ErrCorrupt, i)
		}
		if l.Count <= 0 || l.First < 0 || l.First+l.Count > count {
			return nil, fmt.Errorf("%w: label %q vectors [%d,+%d) outside %d vectors", ErrCorrupt, l.ID, l.First, l.Count, count)
		}
		if l.First != covered {
			return nil, fmt.Errorf("%w: label %q vectors do not follow the previous label's", ErrCorrupt, l.ID)
		}
		covered += l.Count
		if len(l.Texts) != l.Count || len(l.Sources) != l.Count {
			return nil, fmt.Errorf("%w: label %q has %d vectors but %d texts", ErrCorrupt, l.ID, l.Count, len(l.Texts))
		}
		ids := x.byID[l.Kind]
		if ids == nil {
			ids = map[string]int{}
			x.byID[l.Kind] = ids
		}
		if _, dup := ids[l.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate %s %q", ErrCorrupt, l.Kind, l.ID)
		}
		ids[l.ID] = i
		x.byKind[l.Kind] = append(x.byKind[l.Kind], i)
	}
	if covered != count {
		return nil, fmt.Errorf("%w: %d vectors but labels cover %d", ErrCorrupt, count, covered)
	}
	for _, i := range x.byKind[KindTool] {
		l := h.Labels[i]
		if _, ok := x.byID[KindServer][l.Server]; !ok {
			return nil, fmt.Errorf("%w: tool %q names unknown server %q", ErrCorrupt, l.ID, l.Server)
		}
	}
	for i := 0; i < count; i++ {
		v := flat[i*h.Dims : (i+1)*h.Dims]
		var s float64
		for _, f := range v {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("%w: vector %d is not finite", ErrCorrupt, i)
			}
			s += float64(f) * float64(f)
		}
		if math.Abs(math.Sqrt(s)-1) > normTolerance {
			return nil, fmt.Errorf("%w: vector %d has norm %.4f, want 1", ErrCorrupt, i, math.Sqrt(s))
		}
	}
	return x, nil
}

// Write encodes the index to w.
func (x *Index) Write(w io.Writer) error {
	hdr, err := json.Marshal(x.Header)
	if err != nil {
		return fmt.Errorf("index: encode header: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(hdr) + len(x.vecs)*4 + 32)
	buf.WriteString(Magic)
	le := binary.LittleEndian
	buf.Write(le.AppendUint32(nil, FormatVersion))
	buf.Write(le.AppendUint32(nil, uint32(len(hdr))))
	buf.Write(hdr)
	buf.Write(le.AppendUint32(nil, uint32(x.Dims)))
	buf.Write(le.AppendUint32(nil, uint32(x.count)))
	b := make([]byte, 4)
	for _, f := range x.vecs {
		le.PutUint32(b, math.Float32bits(f))
		buf.Write(b)
	}
	buf.Write(le.AppendUint32(nil, crc32.Checksum(buf.Bytes(), castagnoli)))
	_, err = w.Write(buf.Bytes())
	return err
}

// WriteFile writes the index atomically: to a temporary file beside path,
// then renamed, so a crash never leaves a half-written index.
func (x *Index) WriteFile(path string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".index-*")
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = x.Write(f); err != nil {
		return fmt.Errorf("index: write: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("index: sync: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("index: close: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("index: rename: %w", err)
	}
	return nil
}

// DefaultMaxFileBytes is the largest index file Load accepts.
const DefaultMaxFileBytes = 1 << 30

// ErrFile reports an index path that is not a regular file or is too large.
var ErrFile = errors.New("index: unusable file")

// Load reads and validates the index file at path, at most
// DefaultMaxFileBytes of it.
func Load(path string) (*Index, error) { return LoadLimit(path, DefaultMaxFileBytes) }

// LoadLimit is Load for files of at most maxBytes. It checks the opened
// file is regular and small enough before reading, and reads no more than
// maxBytes even if the file grows meanwhile, so a device (/dev/zero) or a
// huge file is refused instead of read until memory runs out.
func LoadLimit(path string, maxBytes int64) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrFile, path)
	}
	if st.Size() > maxBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrFile, path, st.Size(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%w: %s grew past %d bytes while read", ErrFile, path, maxBytes)
	}
	return Decode(data)
}

// Decode validates and decodes an index from its bytes.
func Decode(data []byte) (*Index, error) {
	le := binary.LittleEndian
	if len(data) < len(Magic) {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(data))
	}
	if string(data[:len(Magic)]) != Magic {
		return nil, ErrBadMagic
	}
	if len(data) < len(Magic)+8 {
		return nil, fmt.Errorf("%w: no header", ErrTruncated)
	}
	p := len(Magic)
	if v := le.Uint32(data[p:]); v != FormatVersion {
		return nil, fmt.Errorf("%w: file has version %d, this build reads %d", ErrVersion, v, FormatVersion)
	}
	hdrLen := int(le.Uint32(data[p+4:]))
	p += 8
	if hdrLen > maxHeaderBytes {
		return nil, fmt.Errorf("%w: header length %d", ErrCorrupt, hdrLen)
	}
	if len(data) < p+hdrLen+8 {
		return nil, fmt.Errorf("%w: header needs %d bytes, file has %d", ErrTruncated, hdrLen, len(data)-p)
	}
	hdrBytes := data[p : p+hdrLen]
	p += hdrLen
	dims := int(le.Uint32(data[p:]))
	count := int(le.Uint32(data[p+4:]))
	p += 8
	if dims <= 0 || dims > maxDims || count < 0 || count > maxVectors {
		return nil, fmt.Errorf("%w: %d vectors of %d dims", ErrCorrupt, count, dims)
	}
	need := p + count*dims*4 + 4
	if len(data) < need {
		return nil, fmt.Errorf("%w: want %d bytes, file has %d", ErrTruncated, need, len(data))
	}
	if len(data) > need {
		return nil, fmt.Errorf("%w: %d bytes of trailing data", ErrCorrupt, len(data)-need)
	}
	if got, want := crc32.Checksum(data[:need-4], castagnoli), le.Uint32(data[need-4:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	var h Header
	if err := json.Unmarshal(hdrBytes, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if h.Dims != dims {
		return nil, fmt.Errorf("%w: header says %d dims, vectors have %d", ErrDimMismatch, h.Dims, dims)
	}
	flat := make([]float32, count*dims)
	for i := range flat {
		flat[i] = math.Float32frombits(le.Uint32(data[p+i*4:]))
	}
	return build(h, flat, count)
}

// CheckModel fails with ErrModel or ErrDimMismatch unless the index was
// built by the model with this fingerprint and width.
func (x *Index) CheckModel(fingerprint string, dims int) error {
	if dims != x.Dims {
		return fmt.Errorf("%w: index has %d dims, model has %d", ErrDimMismatch, x.Dims, dims)
	}
	if fingerprint != x.Fingerprint {
		return fmt.Errorf("%w: index fingerprint %.12s, model fingerprint %.12s (rebuild with gen-index)", ErrModel, x.Fingerprint, fingerprint)
	}
	return nil
}

// NumVectors is the number of stored vectors.
func (x *Index) NumVectors() int { return x.count }

// Vector returns stored vector i; callers must not modify it.
func (x *Index) Vector(i int) []float32 { return x.vecs[i*x.Dims : (i+1)*x.Dims] }

// Labels of a kind, as indices into Header.Labels, in catalog order.
func (x *Index) LabelsOf(k Kind) []int { return x.byKind[k] }

// Lookup finds a label by kind and id.
func (x *Index) Lookup(k Kind, id string) (int, bool) {
	i, ok := x.byID[k][id]
	return i, ok
}

// ServerName returns the catalog name of server id when it differs from
// the id (the id was derived from it), else "".
func (x *Index) ServerName(id string) string {
	if i, ok := x.byID[KindServer][id]; ok && x.Labels[i].Name != id {
		return x.Labels[i].Name
	}
	return ""
}

// Dot writes q·v for every stored vector v into dst, which must have
// NumVectors elements, using SIMD where the CPU has it.
func (x *Index) Dot(q []float32, dst []float32) error {
	if len(q) != x.Dims {
		return fmt.Errorf("%w: query has %d dims, index has %d", ErrDimMismatch, len(q), x.Dims)
	}
	if len(dst) != x.count {
		return fmt.Errorf("index: dst has %d slots for %d vectors", len(dst), x.count)
	}
	d := x.Dims
	for i := 0; i < x.count; i++ {
		dst[i] = vek32.Dot(q, x.vecs[i*d:(i+1)*d])
	}
	return nil
}
