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
		{"Connect, Grpc-Timeout junk: dropped", map[string]string{"Grpc-Timeout": "abc", "Connect-Protocol-Version": "1"}, 0, ""},
		{"Connect, valid", map[string]string{"Connect-Timeout-Ms": "1500", "Connect-Protocol-Version": "1"}, 0, "1500"},
		{"Connect, junk", map[string]string{"Connect-Timeout-Ms": "abc", "Connect-Protocol-Version": "1"}, http.StatusBadRequest, ""},
		{"Connect streaming, eleven digits", map[string]string{"Connect-Timeout-Ms": "12345678901", "Content-Type": "application/connect+json"}, http.StatusBadRequest, ""},
		{"REST, Connect-Timeout-Ms of 60 KB", map[string]string{"Connect-Timeout-Ms": strings.Repeat(`"\`, 30_000)}, 0, strings.Repeat(`"\`, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var passed bool
			var seen, grpcTimeout string
			h := normalizeRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				passed, seen, grpcTimeout = true, r.Header.Get("Connect-Timeout-Ms"), r.Header.Get("Grpc-Timeout")
			}))
			req := httptest.NewRequest(http.MethodPost, "/classifier.v1.ClassifierService/Route", strings.NewReader(`{"query":"x"}`))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if tc.wantCode == 0 {
				if grpcTimeout != "" && !validGRPCTimeout(grpcTimeout) && !strings.HasPrefix(tc.header["Content-Type"], "application/grpc") {
					t.Errorf("a malformed Grpc-Timeout %q passed on", grpcTimeout)
				}
				if !passed || seen != tc.wantSeen {
					t.Fatalf("passed %v with Connect-Timeout-Ms %q; want passed with %q (answer %d %s)", passed, seen, tc.wantSeen, rec.Code, rec.Body)
				}
				return
			}
			if passed || rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), `"code":3`) && !strings.Contains(rec.Body.String(), `"code":"invalid_argument"`) {
				t.Fatalf("passed %v, answer %d %s; want %d invalid_argument", passed, rec.Code, rec.Body, tc.wantCode)
			}
		})
	}
}
