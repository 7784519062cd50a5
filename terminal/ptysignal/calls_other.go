//go:build linux && !amd64

package ptysignal

func isPoll(int) bool   { return false }
func isSelect(int) bool { return false }
