package terminal

import (
	"context"
	"errors"
	"math"
	"testing"
)

func TestDetect(t *testing.T) {
	d := fakeDetector(t)
	cases := []struct {
		name, out string
		detected  bool
		typ       string
		dangerous bool
	}{
		{"password", "Connecting...\nPassword: ", true, TypePassword, false},
		{"sudo", "[sudo] password for alice: ", true, TypePassword, false},
		{"yes/no", "Need to get 2 MB.\nDo you want to continue? [Y/n] ", true, TypeYesNo, false},
		{"dangerous prompt", "Delete 3 tables? (yes/no): ", true, TypeYesNo, true},
		{"after a warning", "WARNING: data on /dev/sdb will be lost\nProceed anyway? (y,N) ", true, TypeYesNo, true},
		{"shell", "build ok\n$ ", true, TypeCommand, false},
		{"python", ">>> ", true, TypeCommand, false},
		{"finished line", "Password:\n", false, TypePassword, false},
		{"plain output", "Build succeeded.\n", false, "", false},
		{"nothing", "\n\n", false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Detect(context.Background(), []byte(tc.out), 0.7)
			if err != nil {
				t.Fatal(err)
			}
			if got.Detected != tc.detected {
				t.Fatalf("detected %v (%.3f, %s), want %v", got.Detected, got.Confidence, got.MatchedPattern, tc.detected)
			}
			if tc.typ != "" && got.Type != tc.typ {
				t.Errorf("type %s (%s), want %s", got.Type, got.MatchedPattern, tc.typ)
			}
			if got.Dangerous != tc.dangerous {
				t.Errorf("dangerous %v (%s), want %v", got.Dangerous, got.DangerReason, tc.dangerous)
			}
		})
	}
}

func TestDetectPosition(t *testing.T) {
	got, err := fakeDetector(t).Detect(context.Background(), []byte("one\ntwo\nPassword: "), 0.7)
	if err != nil {
		t.Fatal(err)
	}
	if got.Position != 8 || got.PromptText != "Password:" {
		t.Fatalf("position %d prompt %q, want 8 %q", got.Position, got.PromptText, "Password:")
	}
}

func TestDetectErrors(t *testing.T) {
	d := fakeDetector(t)
	for _, c := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := d.Detect(context.Background(), []byte("Password: "), c); !errors.Is(err, ErrBadConfidence) {
			t.Errorf("min confidence %v: got %v, want ErrBadConfidence", c, err)
		}
	}

	boom := errors.New("boom")
	d.emb = &fakeEmbedder{dims: 64, err: boom}
	if _, err := d.Detect(context.Background(), []byte("Password: "), 0.7); !errors.Is(err, boom) {
		t.Errorf("embedder failure: got %v, want it wrapped", err)
	}
	if _, err := NewDetector(context.Background(), &fakeEmbedder{dims: 64, err: boom}); !errors.Is(err, boom) {
		t.Errorf("NewDetector with a failing embedder: got %v, want it wrapped", err)
	}
}

// TestDetectShape checks that vectors of the wrong number or length are
// ErrEmbedding, never a vek panic.
func TestDetectShape(t *testing.T) {
	ragged := func(v [][]float32) [][]float32 { v[len(v)-1] = v[len(v)-1][:10]; return v }
	short := func(v [][]float32) [][]float32 { return v[:len(v)-1] }
	empty := func(v [][]float32) [][]float32 {
		for i := range v {
			v[i] = nil
		}
		return v
	}
	for name, reshape := range map[string]func([][]float32) [][]float32{"ragged": ragged, "short": short, "empty": empty} {
		t.Run("NewDetector/"+name, func(t *testing.T) {
			if _, err := NewDetector(context.Background(), &fakeEmbedder{dims: 64, reshape: reshape}); !errors.Is(err, ErrEmbedding) {
				t.Fatalf("got %v, want ErrEmbedding", err)
			}
		})
	}
	d := fakeDetector(t)
	for name, emb := range map[string]*fakeEmbedder{
		"other length": {dims: 32},
		"no vector":    {dims: 64, reshape: func([][]float32) [][]float32 { return nil }},
	} {
		t.Run("Detect/"+name, func(t *testing.T) {
			d.emb = emb
			if _, err := d.Detect(context.Background(), []byte("Password: "), 0.7); !errors.Is(err, ErrEmbedding) {
				t.Fatalf("got %v, want ErrEmbedding", err)
			}
		})
	}
}
