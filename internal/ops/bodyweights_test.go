package ops

import "testing"

// TestBodyWeights: --admission-weights, by caller name, weigh the shares
// of the shared rate of bodies, whose callers are keyed "id:NAME" or, with
// no identity, "peer:HOST" (the anonymous caller's weight).
func TestBodyWeights(t *testing.T) {
	if bodyWeights(nil) != nil {
		t.Fatal("no weights: want no weighing")
	}
	w := bodyWeights(map[string]float64{"hub": 4, "anonymous": 0.5})
	for who, want := range map[string]float64{"id:hub": 4, "id:alice": 1, "peer:127.0.0.1": 0.5, "id:anonymous": 0.5} {
		if got := w(who); got != want {
			t.Errorf("%s: weight %v, want %v", who, got, want)
		}
	}
}
