//go:build !linux

package ptysignal

import "os"

// Read is not supported off Linux.
func Read(ptmx *os.File) (Signals, error) { return Signals{}, ErrUnsupported }
