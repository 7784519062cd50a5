package vecfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAppendLoad: what Append writes Load reads back, records appended by
// a second Append included; a torn last record is dropped; a missing
// file is empty.
func TestAppendLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.bin")
	if m, err := Load(path, 3); err != nil || len(m) != 0 {
		t.Fatalf("missing file: %v, %v", m, err)
	}
	a, b := Key("fp", "a"), Key("fp", "b")
	if a == b || a == Key("other", "a") {
		t.Fatal("keys do not separate texts and models")
	}
	vecs := map[[32]byte][]float32{a: {1, 2, 3}, b: {-1, 0.5, 0}}
	if err := Append(path, 3, [][32]byte{a}, vecs); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, 3, [][32]byte{b}, vecs); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("torn"))
	f.Close()
	got, err := Load(path, 3)
	if err != nil || len(got) != 2 || !slices.Equal(got[a], vecs[a]) || !slices.Equal(got[b], vecs[b]) {
		t.Fatalf("Load = %v, %v; want %v", got, err, vecs)
	}
}
