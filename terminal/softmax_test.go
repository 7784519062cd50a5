package terminal

import (
	"math"
	"testing"
)

func TestSoftmax(t *testing.T) {
	const T = 2 // warm enough for the floor logit to take a visible share
	p := softmax([]float64{0.9, 0.5, 0.1}, T)
	var sum float64
	for _, x := range p {
		sum += x
	}
	floor := math.Exp(floorLogit/T) / (math.Exp(floorLogit/T) + math.Exp(0.9/T) + math.Exp(0.5/T) + math.Exp(0.1/T))
	if !(p[0] > p[1] && p[1] > p[2]) || math.Abs(1-sum-floor) > 1e-12 {
		t.Fatalf("softmax = %v (sum %v), want decreasing, summing to 1 - %v", p, sum, floor)
	}
	if got, want := p[0]/p[1], math.Exp(0.4/T); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("ratio = %v, want %v", got, want)
	}
}

func TestFitTemperature(t *testing.T) {
	// Separable scores want a sharp softmax; noisy ones a flat one.
	sharp := fitTemperature([][]float64{{0.9, 0.1}, {0.2, 0.8}, {0.7, 0.3}}, []int{0, 1, 0})
	flat := fitTemperature([][]float64{{0.9, 0.1}, {0.2, 0.8}, {0.7, 0.3}, {0.8, 0.2}}, []int{0, 1, 1, 1})
	if !(sharp < flat) || sharp < 0.002 || flat > 2 {
		t.Fatalf("T(separable) = %v, T(noisy) = %v, want the first lower, both in [0.002, 2]", sharp, flat)
	}
}
