//go:build unix

package index

import (
	"os"
	"syscall"
)

// mapOpen maps size bytes of the opened file f read-only; unmap releases
// the mapping.
func mapOpen(f *os.File, size int64) (data []byte, unmap func() error, err error) {
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
