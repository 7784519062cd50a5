package index

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func unitVecs(r *rand.Rand, n, dims int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dims)
		var s float64
		for k := range v {
			v[k] = float32(r.NormFloat64())
			s += float64(v[k] * v[k])
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(s))
		}
		out[i] = v
	}
	return out
}

// sample builds a small valid index: 2 categories, 1 server with 2 tools.
func sample(t testing.TB, dims int) (Header, [][]float32) {
	t.Helper()
	r := rand.New(rand.NewSource(1))
	h := Header{Model: "m", Fingerprint: "fp", Dims: dims, BuiltAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	add := func(l Label, n int) {
		first := 0
		if k := len(h.Labels); k > 0 {
			first = h.Labels[k-1].First + h.Labels[k-1].Count
		}
		l.First, l.Count = first, n
		for i := 0; i < n; i++ {
			l.Texts = append(l.Texts, fmt.Sprint(l.ID, i))
			l.Sources = append(l.Sources, SourceExample)
		}
		h.Labels = append(h.Labels, l)
	}
	add(Label{Kind: KindCategory, ID: "github"}, 3)
	add(Label{Kind: KindCategory, ID: "files"}, 2)
	add(Label{Kind: KindServer, ID: "gh"}, 1)
	add(Label{Kind: KindTool, ID: "gh/a", Name: "a", Server: "gh"}, 2)
	add(Label{Kind: KindTool, ID: "gh/b", Name: "b", Server: "gh"}, 1)
	return h, unitVecs(r, 9, dims)
}

func encode(t testing.TB, h Header, v [][]float32) []byte {
	t.Helper()
	x, err := New(h, v)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := x.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	h, v := sample(t, 16)
	data := encode(t, h, v)
	x, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if x.Model != "m" || x.Fingerprint != "fp" || !x.BuiltAt.Equal(h.BuiltAt) || len(x.Labels) != 5 || x.NumVectors() != 9 {
		t.Fatalf("header %+v", x.Header)
	}
	for i := range v {
		for k := range v[i] {
			if x.Vector(i)[k] != v[i][k] {
				t.Fatalf("vector %d differs", i)
			}
		}
	}
	if li, ok := x.Lookup(KindTool, "gh/b"); !ok || x.Labels[li].Name != "b" {
		t.Fatal("lookup")
	}
	if got := len(x.LabelsOf(KindCategory)); got != 2 {
		t.Fatalf("%d categories", got)
	}
}

// encodeV1 writes the index in format version 1 (no padding before the
// matrix), as gen-index did before version 2.
func encodeV1(t testing.TB, x *Index) []byte {
	t.Helper()
	hdr, err := json.Marshal(x.Header)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	b := append([]byte(Magic), le.AppendUint32(nil, 1)...)
	b = le.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	b = le.AppendUint32(le.AppendUint32(b, uint32(x.Dims)), uint32(x.NumVectors()))
	for i := 0; i < x.NumVectors(); i++ {
		for _, f := range x.Vector(i) {
			b = le.AppendUint32(b, math.Float32bits(f))
		}
	}
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestLoadMapsAlignedMatrixAndReadsVersion1(t *testing.T) {
	h, v := sample(t, 16)
	x, err := New(h, v)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := encode(t, h, v)
	if p := len(data) - 4 - len(v)*16*4; p%vecAlign != 0 {
		t.Fatalf("matrix starts at byte %d, want a multiple of %d", p, vecAlign)
	}
	for _, tc := range []struct {
		name       string
		data       []byte
		wantMapped bool
	}{{"version 2", data, runtime.GOOS != "windows" && littleEndian}, {"version 1", encodeV1(t, x), false}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", ""))
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadWith(path, LoadOptions{Mmap: true})
			if err != nil {
				t.Fatal(err)
			}
			if got.Mapped() != tc.wantMapped {
				t.Errorf("mapped %v, want %v", got.Mapped(), tc.wantMapped)
			}
			read, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if read.Mapped() {
				t.Error("Load mapped the file; only LoadOptions.Mmap does")
			}
			for i := range v {
				if !slices.Equal(got.Vector(i), v[i]) || !slices.Equal(read.Vector(i), v[i]) {
					t.Fatalf("vector %d differs", i)
				}
			}
			// The file is replaced by rename; the mapping keeps its bytes.
			if err := x.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Vector(3), v[3]) {
				t.Fatal("vector changed after the file was replaced")
			}
			// Rewritten in place (cp over it): a loaded (not mapped)
			// index keeps what it read.
			if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(read.Vector(3), v[3]) {
				t.Fatal("a loaded index changed when its file was rewritten in place")
			}
		})
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(empty); !errors.Is(err, ErrTruncated) {
		t.Fatalf("empty file: %v, want ErrTruncated", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	h, v := sample(t, 8)
	x, _ := New(h, v)
	dir := t.TempDir()
	p := filepath.Join(dir, "x.idx")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := x.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("leftover temp files: %v", ents)
	}
	if err := x.WriteFile(filepath.Join(dir, "missing", "x.idx")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if b, _ := os.ReadFile(p); len(b) < 10 {
		t.Fatal("existing index damaged by a failed write")
	}
}

func TestDamage(t *testing.T) {
	h, v := sample(t, 16)
	data := encode(t, h, v)
	for cut := 0; cut < len(data); cut++ {
		_, err := Decode(data[:cut])
		if err == nil {
			t.Fatalf("truncated at %d accepted", cut)
		}
		if cut >= len(Magic) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: %v", cut, err)
		}
	}
	for pos := len(Magic); pos < len(data); pos += 7 {
		d := bytes.Clone(data)
		d[pos] ^= 0x5a
		if _, err := Decode(d); err == nil {
			t.Fatalf("flipped byte %d accepted", pos)
		}
	}
	if _, err := Decode([]byte("NOTANIDX and some more bytes")); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("bad magic: %v", err)
	}
	d := bytes.Clone(data)
	binary.LittleEndian.PutUint32(d[len(Magic):], FormatVersion+1)
	if _, err := Decode(d); !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "rebuild") {
		t.Fatalf("version %d: %v", FormatVersion+1, err)
	}
	if _, err := Decode(append(bytes.Clone(data), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func TestValidation(t *testing.T) {
	cases := map[string]struct {
		mut  func(h *Header, v [][]float32) [][]float32
		want string
	}{
		"non-unit vector": {func(h *Header, v [][]float32) [][]float32 { v[0][0] += 1; return v }, "norm"},
		"nan":             {func(h *Header, v [][]float32) [][]float32 { v[3][2] = float32(math.NaN()); return v }, "not finite"},
		"overlap":         {func(h *Header, v [][]float32) [][]float32 { h.Labels[1].First = 2; return v }, "do not follow"},
		"out of bounds": {func(h *Header, v [][]float32) [][]float32 {
			h.Labels[4].Count = 5
			h.Labels[4].Texts = make([]string, 5)
			h.Labels[4].Sources = make([]Source, 5)
			return v
		}, "outside"},
		"duplicate id":      {func(h *Header, v [][]float32) [][]float32 { h.Labels[1].ID = "github"; return v }, "duplicate"},
		"unknown server":    {func(h *Header, v [][]float32) [][]float32 { h.Labels[3].Server = "nope"; return v }, "unknown server"},
		"bad kind":          {func(h *Header, v [][]float32) [][]float32 { h.Labels[0].Kind = "widget"; return v }, "kind"},
		"texts mismatch":    {func(h *Header, v [][]float32) [][]float32 { h.Labels[0].Texts = nil; return v }, "texts"},
		"no fingerprint":    {func(h *Header, v [][]float32) [][]float32 { h.Fingerprint = ""; return v }, "fingerprint"},
		"uncovered vectors": {func(h *Header, v [][]float32) [][]float32 { return append(v, v[0]) }, "labels cover"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h, v := sample(t, 16)
			v = tc.mut(&h, v)
			_, err := New(h, v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	h, v := sample(t, 16)
	v[0] = v[0][:8]
	if _, err := New(h, v); !errors.Is(err, ErrDimMismatch) {
		t.Fatalf("short vector: %v", err)
	}
}

func TestCheckModel(t *testing.T) {
	h, v := sample(t, 16)
	x, _ := New(h, v)
	if err := x.CheckModel("fp", 16); err != nil {
		t.Fatal(err)
	}
	if err := x.CheckModel("other", 16); !errors.Is(err, ErrModel) {
		t.Fatalf("fingerprint: %v", err)
	}
	if err := x.CheckModel("fp", 512); !errors.Is(err, ErrDimMismatch) {
		t.Fatalf("dims: %v", err)
	}
}

// TestDotMatchesPlainLoop checks the SIMD scores against a float64 loop.
func TestDotMatchesPlainLoop(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, dims := range []int{1, 7, 16, 384, 512, 768} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			n := 2000
			vecs := unitVecs(r, n, dims)
			h := Header{Model: "m", Fingerprint: "fp", Dims: dims,
				Labels: []Label{{Kind: KindCategory, ID: "all", First: 0, Count: n, Texts: make([]string, n), Sources: make([]Source, n)}}}
			x, err := New(h, vecs)
			if err != nil {
				t.Fatal(err)
			}
			q := unitVecs(r, 1, dims)[0]
			got := make([]float32, n)
			if err := x.Dot(q, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range vecs {
				var want float64
				for k := range v {
					want += float64(q[k]) * float64(v[k])
				}
				if math.Abs(float64(got[i])-want) > 1e-5 {
					t.Fatalf("vector %d: %v vs %v", i, got[i], want)
				}
			}
			if err := x.Dot(q[:dims-1], got); !errors.Is(err, ErrDimMismatch) {
				t.Fatalf("short query: %v", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	h, v := sample(f, 8)
	good := encode(f, h, v)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := Decode(data)
		if err == nil && x.NumVectors()*x.Dims*4 > len(data) {
			t.Fatal("decoded more vector data than the input holds")
		}
	})
}

func ExampleIndex_Dot() {
	h := Header{Model: "demo", Fingerprint: "fp", Dims: 2, Labels: []Label{
		{Kind: KindCategory, ID: "north", First: 0, Count: 1, Texts: []string{"up"}, Sources: []Source{SourceDescription}},
		{Kind: KindCategory, ID: "east", First: 1, Count: 1, Texts: []string{"right"}, Sources: []Source{SourceDescription}},
	}}
	x, _ := New(h, [][]float32{{0, 1}, {1, 0}})
	scores := make([]float32, x.NumVectors())
	_ = x.Dot([]float32{0.6, 0.8}, scores)
	for i, s := range scores {
		fmt.Printf("%s %.1f\n", x.Labels[i].ID, s)
	}
	// Output:
	// north 0.8
	// east 0.6
}

func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewSource(5))
	for _, n := range []int{100, 1000, 10000} {
		vecs := unitVecs(r, n, 512)
		h := Header{Model: "m", Fingerprint: "fp", Dims: 512,
			Labels: []Label{{Kind: KindCategory, ID: "all", First: 0, Count: n, Texts: make([]string, n), Sources: make([]Source, n)}}}
		x, _ := New(h, vecs)
		q := unitVecs(r, 1, 512)[0]
		dst := make([]float32, n)
		b.Run(fmt.Sprintf("simd/vectors=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = x.Dot(q, dst)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "vectors/s")
		})
		b.Run(fmt.Sprintf("plain-go/vectors=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for j := 0; j < n; j++ {
					var s float32
					v := x.Vector(j)
					for k := range v {
						s += q[k] * v[k]
					}
					dst[j] = s
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "vectors/s")
		})
	}
}

func TestDotManyMatchesDot(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	vecs := unitVecs(r, 50, 24)
	h := Header{Model: "m", Fingerprint: "fp", Dims: 24,
		Labels: []Label{{Kind: KindCategory, ID: "all", First: 0, Count: 50, Texts: make([]string, 50), Sources: make([]Source, 50)}}}
	x, err := New(h, vecs)
	if err != nil {
		t.Fatal(err)
	}
	qs := unitVecs(r, 3, 24)
	dst := [][]float32{make([]float32, 50), make([]float32, 50), make([]float32, 50)}
	if err := x.DotMany(qs, dst); err != nil {
		t.Fatal(err)
	}
	for k, q := range qs {
		want := make([]float32, 50)
		if err := x.Dot(q, want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dst[k], want) {
			t.Errorf("query %d: DotMany differs from Dot", k)
		}
	}
	if err := x.DotMany(qs[:1], dst); err == nil {
		t.Error("3 destinations for 1 query accepted")
	}
	if err := x.DotMany([][]float32{make([]float32, 5)}, dst[:1]); !errors.Is(err, ErrDimMismatch) {
		t.Errorf("short query: %v, want ErrDimMismatch", err)
	}
}
