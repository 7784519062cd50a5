// Package vecfile is the evaluation tools' file of embedded vectors
// (tools/route-eval, tools/replay): records of a 32-byte key,
// sha256(model fingerprint, 0, text), and the text's vector as
// little-endian float32s, appended as they are computed, so a second run
// with the same model embeds nothing it embedded before.
package vecfile

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
)

// Key is the record key of text embedded by the model of fingerprint.
func Key(fingerprint, text string) [32]byte {
	h := sha256.New()
	h.Write([]byte(fingerprint))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Load reads the vectors of dims dimensions in path; a missing file is an
// empty map, and a torn last record is dropped.
func Load(path string, dims int) (map[[32]byte][]float32, error) {
	vecs := map[[32]byte][]float32{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return vecs, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	rec := make([]byte, 32+4*dims)
	for {
		if _, err := io.ReadFull(r, rec); err != nil {
			return vecs, nil
		}
		var k [32]byte
		copy(k[:], rec)
		v := make([]float32, dims)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(rec[32+4*i:]))
		}
		vecs[k] = v
	}
}

// Append adds a record to path for each of keys, with its vector in vecs.
func Append(path string, dims int, keys [][32]byte, vecs map[[32]byte][]float32) error {
	if len(keys) == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	rec := make([]byte, 32+4*dims)
	for _, k := range keys {
		copy(rec, k[:])
		for i, x := range vecs[k] {
			binary.LittleEndian.PutUint32(rec[32+4*i:], math.Float32bits(x))
		}
		if _, err := w.Write(rec); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}
