//go:build unix

package index

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the file at path read-only; unmap releases the mapping.
// Files are replaced by rename (WriteFile), never rewritten in place, so a
// mapping keeps the bytes it was validated with.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 || !st.Mode().IsRegular() {
		data, err := os.ReadFile(path) // empty, or not a file (a pipe)
		return data, nil, err
	}
	if size > int64(maxHeaderBytes)+int64(maxVectors)*maxDims*4 {
		return nil, nil, fmt.Errorf("%s: %d bytes is larger than any index", path, size)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		data, err := os.ReadFile(path) // a file system without mmap
		return data, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
