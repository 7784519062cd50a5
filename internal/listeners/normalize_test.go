package listeners

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNormalizeTimeouts: a malformed Grpc-Timeout on a REST call is
// refused 400 invalid_argument here (the transcoder handed it to gRPC,
// which answered 500 INTERNAL), a valid one and those of gRPC-Web and
// Connect calls pass; an over-long Connect-Timeout-Ms is cut to what the
// transcoder's refusal may quote.
func TestNormalizeTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		header   map[string]string
		wantCode int    // 0: passed on
		wantSeen string // Connect-Timeout-Ms passed on
	}{
		{"REST, valid", map[string]string{"Grpc-Timeout": "5S"}, 0, ""},
		{"REST, junk", map[string]string{"Grpc-Timeout": "abc"}, http.StatusBadRequest, ""},
		{"REST, negative", map[string]string{"Grpc-Timeout": "-5S"}, http.StatusBadRequest, ""},
		{"REST, nine digits", map[string]string{"Grpc-Timeout": "123456789S"}, http.StatusBadRequest, ""},
		{"gRPC-Web, junk", map[string]string{"Grpc-Timeout": "abc", "Content-Type": "application/grpc-web+proto"}, 0, ""},
		{"Connect, junk", map[string]string{"Grpc-Timeout": "abc", "Connect-Protocol-Version": "1"}, 0, ""},
		{"Connect-Timeout-Ms, valid", map[string]string{"Connect-Timeout-Ms": "1500"}, 0, "1500"},
		{"Connect-Timeout-Ms, 60 KB", map[string]string{"Connect-Timeout-Ms": strings.Repeat(`"\`, 30_000)}, 0, strings.Repeat(`"\`, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var passed bool
			var seen string
			h := normalizeRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				passed, seen = true, r.Header.Get("Connect-Timeout-Ms")
			}))
			req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/Route", strings.NewReader(`{"query":"x"}`))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tc.wantCode == 0 {
				if !passed || seen != tc.wantSeen {
					t.Fatalf("passed %v with Connect-Timeout-Ms %q; want passed with %q (answer %d %s)", passed, seen, tc.wantSeen, rec.Code, rec.Body)
				}
				return
			}
			if passed || rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), `"code":3`) {
				t.Fatalf("passed %v, answer %d %s; want %d invalid_argument", passed, rec.Code, rec.Body, tc.wantCode)
			}
		})
	}
}
