//go:build linux && amd64

package ptysignal

import "golang.org/x/sys/unix"

// The older multiplexers amd64 still has (arm64 has only the p-forms).
func init() {
	waitCalls[unix.SYS_POLL] = true
	waitCalls[unix.SYS_SELECT] = true
	waitCalls[unix.SYS_EPOLL_WAIT] = true
}

func isPoll(nr int) bool   { return nr == unix.SYS_POLL }
func isSelect(nr int) bool { return nr == unix.SYS_SELECT }
