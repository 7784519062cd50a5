package route

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/internal/testindex"
	"github.com/classifierd/classifierd/internal/testrank"
)

// shapeCatalog has two servers with the same description (twins) and two
// with descriptions of their own.
const shapeCatalog = `{"categories": [{"id": "general", "description": "anything"}],
 "servers": [
  {"id": "hf-a", "description": "load a pretrained image classification model", "tools": [{"name": "load", "description": "load the model"}]},
  {"id": "hf-b", "description": "load a pretrained image classification model", "tools": [{"name": "load", "description": "load the model"}]},
  {"id": "weather", "description": "weather forecast for a city", "tools": [{"name": "forecast", "description": "forecast the weather"}]},
  {"id": "mail", "description": "send and read email messages", "tools": [{"name": "send", "description": "send an email"}]}
 ]}`

func TestCatalogShape(t *testing.T) {
	rk := testrank.Ranker(t, testindex.Parse(t, shapeCatalog), 256, nil)
	id := map[string]int{}
	for _, li := range rk.Servers() {
		id[rk.Index().Labels[li].ID] = li
	}
	full := catalogShape(rk, shapeBudget)
	t.Run("twins", func(t *testing.T) {
		if got := full.twin[id["hf-a"]]; math.Abs(got-1) > 1e-5 {
			t.Errorf("twin of hf-a = %v, want 1 (hf-b has the same description)", got)
		}
		if got := full.twin[id["hf-b"]]; math.Abs(got-1) > 1e-5 {
			t.Errorf("twin of hf-b = %v, want 1", got)
		}
		for _, s := range []string{"weather", "mail"} {
			if got := full.twin[id[s]]; got > 0.9 {
				t.Errorf("twin of %s = %v, want well below 1 (no server like it)", s, got)
			}
		}
	})
	t.Run("catalog figures", func(t *testing.T) {
		var sum float64
		for _, v := range full.twin {
			sum += v
		}
		if got, want := full.catTwin, sum/4; math.Abs(got-want) > 1e-9 {
			t.Errorf("catTwin = %v, want the mean twin %v", got, want)
		}
		if full.twinSD <= 0 {
			t.Errorf("twinSD = %v, want > 0 (the twins stand apart)", full.twinSD)
		}
		if !(full.catCos < full.catTwin) {
			t.Errorf("catCos %v not below catTwin %v: the mean pair is nearer than the nearest", full.catCos, full.catTwin)
		}
		if full.words <= 0 {
			t.Errorf("words = %v, want log(1+mean description words) > 0", full.words)
		}
	})
	t.Run("budget", func(t *testing.T) {
		// A budget of 4 dot products over 4 servers compares each with one
		// other: every twin is a cosine to a real server, never above the
		// exact nearest.
		small := catalogShape(rk, 4)
		for li, v := range small.twin {
			if v > full.twin[li]+1e-9 || math.IsInf(v, 0) {
				t.Errorf("label %d: sampled twin %v, exact %v", li, v, full.twin[li])
			}
		}
		if len(small.twin) != 4 {
			t.Errorf("%d twins, want 4", len(small.twin))
		}
	})
}

func TestRouteShapeEvidence(t *testing.T) {
	at := map[string]int{}
	for i, f := range calibrate.EvidenceFeatures {
		at[f] = i
	}
	tests := []struct {
		name   string
		ev     calibrate.Evidence
		shaped bool
	}{
		{"map weighs the shape", calibrate.Evidence{Terms: []calibrate.EvidenceTerm{{Feature: "score", Scale: 1, Coef: 5}},
			Temperature: []calibrate.EvidenceTerm{{Feature: "cat_twin", Scale: 1, Coef: -1}}}, true},
		{"map without it", calibrate.Evidence{Terms: []calibrate.EvidenceTerm{{Feature: "score", Scale: 1, Coef: 5}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cal := calibrate.DefaultCalibration()
			cal.ServerEvidence = &tc.ev
			c := New(testrank.Ranker(t, testindex.Parse(t, shapeCatalog), 256, nil), cal, Config{})
			res, err := c.Route(context.Background(), RouteQuery{Query: "load a pretrained image classification model", MinConfidence: f32(0), Evidence: true})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]float64{}
			for _, cd := range res.Considered {
				got[cd.ID] = cd.X
				// The make-up terms are the products route's own
				// features give (calibrate.DeriveEvidence).
				want := slices.Clone(cd.X)
				calibrate.DeriveEvidence(want)
				if !slices.Equal(want, cd.X) {
					t.Errorf("%s: derived evidence %v, want %v", cd.ID, cd.X, want)
				}
				if p := tc.ev.Prob(cd.X); math.Abs(p-cd.P) > 1e-12 {
					t.Errorf("%s: P %v, the map gives %v", cd.ID, cd.P, p)
				}
			}
			if got["hf-a"] == nil || got["weather"] == nil {
				t.Fatalf("considered %v, want hf-a and weather", res.Considered)
			}
			twinA, twinW := got["hf-a"][at["twin"]], got["weather"][at["twin"]]
			if !tc.shaped {
				if twinA != 0 || twinW != 0 {
					t.Errorf("twins %v %v computed for a map that does not weigh them", twinA, twinW)
				}
				return
			}
			if math.Abs(twinA-1) > 1e-5 || twinW > 0.9 {
				t.Errorf("twin of hf-a %v (want 1), of weather %v (want < 0.9)", twinA, twinW)
			}
			if ct := got["hf-a"][at["cat_twin"]]; ct != got["weather"][at["cat_twin"]] || ct <= 0 {
				t.Errorf("cat_twin %v differs between candidates of one catalog", ct)
			}
		})
	}
}
