package web

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/", 200, "<title>classifierd"},
		{"HEAD", "/", 200, ""},
		{"GET", "/explain.js", 200, "/classifier.v1.ClassifierService/"},
		{"GET", "/explain.css", 200, "table.ranked"},
		{"GET", "/missing.js", 404, ""},
		{"GET", "/../web.go", 404, ""},
		{"POST", "/", 405, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("got %d %.80q, want %d containing %q", rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if tc.code == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
				t.Fatalf("CSP = %q, want default-src 'self'", rec.Header().Get("Content-Security-Policy"))
			}
		})
	}
}

// The page must load nothing from elsewhere: no URL to another host in it.
func TestNoExternalResources(t *testing.T) {
	for _, name := range []string{"static/index.html", "static/explain.js", "static/explain.css"} {
		b, err := static.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"http://", "https://", "//cdn"} {
			s := strings.ReplaceAll(string(b), "'http://www.w3.org/2000/svg'", "")
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
}

// TestOneRangeAtMost: a request of several ranges gets the whole file
// (200), not a multipart answer of each (the thirteenth hostile pass:
// 4,000 one-byte ranges, a 612 KB answer, 60 ms of CPU, no token); one
// range is still served (206).
func TestOneRangeAtMost(t *testing.T) {
	h := Handler()
	whole := httptest.NewRecorder()
	h.ServeHTTP(whole, httptest.NewRequest("GET", "/explain.js", nil))
	many := "bytes=" + strings.TrimSuffix(strings.Repeat("0-0,", 4000), ",")
	for _, tc := range []struct {
		name   string
		ranges []string
		code   int
		size   int
	}{
		{"one", []string{"bytes=0-9"}, 206, 10},
		{"4,000 in one header", []string{many}, 200, whole.Body.Len()},
		{"two headers", []string{"bytes=0-0", "bytes=1-1"}, 200, whole.Body.Len()},
	} {
		req := httptest.NewRequest("GET", "/explain.js", nil)
		for _, r := range tc.ranges {
			req.Header.Add("Range", r)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code || rec.Body.Len() != tc.size || strings.Contains(rec.Header().Get("Content-Type"), "multipart") {
			t.Errorf("%s: %d, %d bytes, %q; want %d, %d bytes", tc.name, rec.Code, rec.Body.Len(), rec.Header().Get("Content-Type"), tc.code, tc.size)
		}
	}
}
