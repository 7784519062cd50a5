package httpguard

import "testing"

// TestBudgetCharge: bytes already read are always counted; the holder is
// told to give them back only past its per-client share, or when the
// budget is over its total and it holds more than the total divided among
// the holders, so a small holder is never told to while a hog is.
func TestBudgetCharge(t *testing.T) {
	b := NewBudget(100, 80)
	steps := []struct {
		who  string
		n    int64
		want bool
		used int64
	}{
		{"hog", 60, false, 60},    // under both bounds
		{"small", 10, false, 70},  // under both bounds
		{"hog", 25, true, 95},     // past its per-client share (85 > 80)
		{"small", 10, false, 105}, // past the reserve, but under its fair share of the rest (20 <= 37)
		{"hog", 1, true, 106},     // past the reserve and over its fair share
	}
	for i, s := range steps {
		if got := b.Charge(s.who, s.n); got != s.want {
			t.Errorf("step %d: Charge(%s, %d) = %v, want %v", i, s.who, s.n, got, s.want)
		}
		if b.Used() != s.used {
			t.Errorf("step %d: Used() = %d, want %d", i, b.Used(), s.used)
		}
	}
	b.Release("hog", 86)
	b.Release("small", 20)
	if b.Used() != 0 || len(b.by) != 0 {
		t.Errorf("after every byte was given back: used %d, holders %v", b.Used(), b.by)
	}
}

// TestBudgetChargeKeepsTheReserve: gRPC holders are told to give back
// once they reach the reserve kept for small callers (the last quarter),
// not only past the total: two connections of 40 each, under their
// fair share of the total, filled the budget and a small HTTP body got
// 429.
func TestBudgetChargeKeepsTheReserve(t *testing.T) {
	b := NewBudget(100, 80)
	if b.Charge("a", 40) || b.Charge("b", 30) {
		t.Fatal("70 of 100 held: a holder told to give back")
	}
	if !b.Charge("b", 10) {
		t.Fatal("80 of 100 held, 40 each: not told to give back, the reserve filled")
	}
	b.Release("a", 40)
	b.Release("b", 40)
	if !b.take("small", 10) {
		t.Fatal("a small body refused with nothing held")
	}
}
