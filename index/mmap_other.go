//go:build !unix

package index

import (
	"errors"
	"os"
)

// mapOpen fails: this platform maps no files, so LoadWith reads them.
func mapOpen(*os.File, int64) ([]byte, func() error, error) {
	return nil, nil, errors.New("index: no mmap on this platform")
}
