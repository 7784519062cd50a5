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
