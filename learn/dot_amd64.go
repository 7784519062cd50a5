package learn

import "golang.org/x/sys/cpu"

// hasDotI8 says the CPU runs dotI8AVX2 (AVX2 and FMA).
var hasDotI8 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotI8AVX2(q *float32, x *int8, n int) float32

// dotI8 is Σ q[i]·x[i] over the shorter of q and x: with AVX2 and FMA
// eight at a time (a quarter of the memory a float32 vector takes, which
// is what a scan over thousands of reports is bound by), the rest in Go.
func dotI8(q []float32, x []int8) float32 {
	n := min(len(q), len(x))
	if n == 0 {
		return 0
	}
	var s float32
	head := 0
	if hasDotI8 {
		head = n &^ 7
		if head > 0 {
			s = dotI8AVX2(&q[0], &x[0], head)
		}
	}
	return s + dotI8Go(q[head:n], x[head:n])
}
