package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestScrapeValues(t *testing.T) {
	body := "# HELP x\n" +
		`classifierd_admission_rejected_total{method="/classifier.v1.ClassifierService/Route"} 12` + "\n" +
		`classifierd_admission_rejected_total{method="/classifier.v1.ClassifierService/Classify"} 3` + "\n" +
		"classifierd_admission_queue_depth 4\n"
	for _, tc := range []struct {
		name, body string
		want       map[string]float64
		fails      bool
	}{
		{"the named series only", body, map[string]float64{routeRefused: 12, "classifierd_admission_queue_depth": 4}, false},
		{"absent", "other 1\n", map[string]float64{}, false},
		{"not a number", routeRefused + " x\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tc.body)) }))
			defer srv.Close()
			got, err := scrapeValues(context.Background(), strings.TrimPrefix(srv.URL, "http://"), routeRefused, "classifierd_admission_queue_depth")
			if (err != nil) != tc.fails {
				t.Fatalf("error %v, want failure %v", err, tc.fails)
			}
			if tc.fails {
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// connsFor gives each connection at most streamsPerConn clients, and
// never fewer connections than the curve's 8.
func TestConnsFor(t *testing.T) {
	for _, tc := range []struct{ clients, want int }{{8, 8}, {400, 9}, {1000, 21}, {2000, 42}} {
		if got := connsFor(tc.clients); got != tc.want || (tc.clients+got-1)/got > streamsPerConn {
			t.Errorf("connsFor(%d) = %d, want %d (at most %d clients a connection)", tc.clients, got, tc.want, streamsPerConn)
		}
	}
}
