//go:build !unix

package index

import "os"

// mapFile reads the file at path: this platform maps no files.
func mapFile(path string) ([]byte, func() error, error) {
	data, err := os.ReadFile(path)
	return data, nil, err
}
