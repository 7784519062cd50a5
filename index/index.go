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
//	pad       []byte   zeros up to a multiple of 64 bytes (version 2)
//	vectors   []float32 count*dims, row after row: one contiguous matrix
//	crc       uint32   CRC-32C of every byte above
//
// Version 2 aligns the matrix so that Load can memory-map the file and
// score straight from the page cache: no copy of the vectors on the heap,
// and a daemon that swaps indexes maps the new file beside the old one.
// Version 1 files (no padding) still load, by copying.
package index

import (
	"bufio"
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
	"runtime"
	"time"
	"unsafe"

	"github.com/viterin/vek/vek32"
)

// Magic starts every index file.
const Magic = "CLSFIDX\x00"

// FormatVersion is the version this package writes; it reads it and
// version 1.
const FormatVersion uint32 = 2

// vecAlign is the offset alignment of the matrix in a version 2 file.
const vecAlign = 64

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
	// mapped is set when vecs is a memory-mapped file (LoadWith, Mmap).
	mapped bool
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

// NewFlat validates a header and count vectors laid out row after row in
// flat (count*h.Dims values), and returns an Index that keeps flat as its
// matrix: the caller must not modify flat afterwards.
func NewFlat(h Header, flat []float32, count int) (*Index, error) {
	if h.Dims <= 0 || len(flat) != count*h.Dims {
		return nil, fmt.Errorf("%w: %d values for %d vectors of %d dims", ErrDimMismatch, len(flat), count, h.Dims)
	}
	return build(h, flat, count)
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
		// A NaN or infinite value makes the squared norm NaN or infinite.
		s := float64(vek32.Dot(v, v))
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("%w: vector %d is not finite", ErrCorrupt, i)
		}
		if math.Abs(math.Sqrt(s)-1) > normTolerance {
			return nil, fmt.Errorf("%w: vector %d has norm %.4f, want 1", ErrCorrupt, i, math.Sqrt(s))
		}
	}
	return x, nil
}

// Write encodes the index to w, streaming: the vectors go out in chunks,
// never as a second copy of the matrix.
func (x *Index) Write(w io.Writer) error {
	hdr, err := json.Marshal(x.Header)
	if err != nil {
		return fmt.Errorf("index: encode header: %w", err)
	}
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	le := binary.LittleEndian
	head := make([]byte, 0, 16)
	head = append(head, Magic...)
	head = le.AppendUint32(head, FormatVersion)
	head = le.AppendUint32(head, uint32(len(hdr)))
	_, _ = bw.Write(head)
	_, _ = bw.Write(hdr)
	dc := le.AppendUint32(le.AppendUint32(nil, uint32(x.Dims)), uint32(x.count))
	_, _ = bw.Write(dc)
	_, _ = bw.Write(make([]byte, padding(len(head)+len(hdr)+len(dc))))
	b := make([]byte, 0, 4096)
	for _, f := range x.vecs {
		b = le.AppendUint32(b, math.Float32bits(f))
		if len(b) == cap(b) {
			_, _ = bw.Write(b)
			b = b[:0]
		}
	}
	_, _ = bw.Write(b)
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(le.AppendUint32(nil, crc.Sum32()))
	return err
}

// padding is the number of zero bytes after off bytes that start the
// matrix on a multiple of vecAlign.
func padding(off int) int { return (vecAlign - off%vecAlign) % vecAlign }

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

// LoadOptions says how LoadWith reads an index file.
type LoadOptions struct {
	// MaxBytes is the largest file accepted (0: DefaultMaxFileBytes).
	MaxBytes int64
	// Mmap scores from a read-only mapping of the file instead of a copy
	// in memory: less resident memory for large indexes, shared between
	// processes. Only for files replaced by rename, as gen-index writes
	// them: a mapped file truncated or rewritten in place (cp over it)
	// changes under the daemon or kills it with SIGBUS, so it is off by
	// default.
	Mmap bool
}

// Load reads and validates the index file at path, at most
// DefaultMaxFileBytes of it, into memory.
func Load(path string) (*Index, error) { return LoadWith(path, LoadOptions{}) }

// LoadLimit is Load for files of at most maxBytes.
func LoadLimit(path string, maxBytes int64) (*Index, error) {
	return LoadWith(path, LoadOptions{MaxBytes: maxBytes})
}

// LoadWith reads and validates the index file at path. It checks the
// opened file is regular and small enough before reading, and reads no
// more than the limit even if the file grows meanwhile, so a device
// (/dev/zero) or a huge file is refused instead of read until memory runs
// out. The vectors are read straight into the index's matrix (format 2),
// or mapped with o.Mmap; either way the whole file is read once, for its
// checksum and the vectors' norms.
func LoadWith(path string, o LoadOptions) (*Index, error) {
	maxBytes := o.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFileBytes
	}
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
	size := st.Size()
	if size > maxBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrFile, path, size, maxBytes)
	}
	if o.Mmap && size > 0 {
		if data, unmap, err := mapOpen(f, size); err == nil {
			x, err := decode(data, true)
			if err != nil {
				_ = unmap()
				return nil, err
			}
			if x.mapped {
				runtime.AddCleanup(x, func(unmap func() error) { _ = unmap() }, unmap)
			} else {
				_ = unmap() // the vectors were copied (a version 1 file)
			}
			return x, nil
		}
		// A file system without mmap: read it.
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("index: read %s: %w", path, err)
	}
	if n, _ := f.Read(make([]byte, 1)); n > 0 {
		return nil, fmt.Errorf("%w: %s grew while it was read", ErrFile, path)
	}
	// The index keeps data as its matrix (no second copy); it is ordinary
	// memory, not a mapping.
	x, err := decode(data, true)
	if err != nil {
		return nil, err
	}
	x.mapped = false
	return x, nil
}

// Mapped reports whether the index scores from a memory-mapped file
// (LoadOptions.Mmap).
func (x *Index) Mapped() bool { return x.mapped }

// Decode validates and decodes an index from its bytes; the Index does
// not keep data.
func Decode(data []byte) (*Index, error) { return decode(data, false) }

// decode validates data; alias lets the index keep data as its matrix
// (a read-only mapping that outlives the Index).
func decode(data []byte, alias bool) (*Index, error) {
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
	version := le.Uint32(data[p:])
	if version != FormatVersion && version != 1 {
		return nil, fmt.Errorf("%w: file has version %d, this build reads 1 and %d (rebuild the index with this gen-index)", ErrVersion, version, FormatVersion)
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
	pad := 0
	if version >= 2 {
		pad = padding(p)
	}
	need := p + pad + count*dims*4 + 4
	if len(data) < need {
		return nil, fmt.Errorf("%w: want %d bytes, file has %d", ErrTruncated, need, len(data))
	}
	if len(data) > need {
		return nil, fmt.Errorf("%w: %d bytes of trailing data", ErrCorrupt, len(data)-need)
	}
	if got, want := crc32.Checksum(data[:need-4], castagnoli), le.Uint32(data[need-4:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	for _, b := range data[p : p+pad] {
		if b != 0 {
			return nil, fmt.Errorf("%w: padding is not zero", ErrCorrupt)
		}
	}
	p += pad
	var h Header
	if err := json.Unmarshal(hdrBytes, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if h.Dims != dims {
		return nil, fmt.Errorf("%w: header says %d dims, vectors have %d", ErrDimMismatch, h.Dims, dims)
	}
	raw := data[p : p+count*dims*4]
	if alias && littleEndian && len(raw) > 0 && uintptr(unsafe.Pointer(&raw[0]))%4 == 0 {
		x, err := build(h, unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), count*dims), count)
		if err == nil {
			x.mapped = true
		}
		return x, err
	}
	flat := make([]float32, count*dims)
	for i := range flat {
		flat[i] = math.Float32frombits(le.Uint32(raw[i*4:]))
	}
	return build(h, flat, count)
}

// littleEndian is whether float32s in memory have the file's byte order.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

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

// DotMany is Dot for several queries in one pass over the matrix: each
// stored vector is read from memory once and scored against every query
// while it is in cache (a request's turns share the scan). dst[k] gets
// the scores of qs[k], exactly as Dot would write them.
func (x *Index) DotMany(qs [][]float32, dst [][]float32) error {
	if len(qs) != len(dst) {
		return fmt.Errorf("index: %d queries, %d destinations", len(qs), len(dst))
	}
	for k, q := range qs {
		if len(q) != x.Dims {
			return fmt.Errorf("%w: query %d has %d dims, index has %d", ErrDimMismatch, k, len(q), x.Dims)
		}
		if len(dst[k]) != x.count {
			return fmt.Errorf("index: dst %d has %d slots for %d vectors", k, len(dst[k]), x.count)
		}
	}
	d := x.Dims
	for i := 0; i < x.count; i++ {
		v := x.vecs[i*d : (i+1)*d]
		for k, q := range qs {
			dst[k][i] = vek32.Dot(q, v)
		}
	}
	return nil
}
