package listeners

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/classifierd/classifierd/internal/answerhold"
)

// TestHoldAnswers: behind holdAnswers, a release held with
// answerhold.Until runs when the answer's first byte is written (by
// Write, WriteHeader or Flush), not when it is held, and at the end of a
// request that writes nothing; held after that, it runs at once. Without
// a hold (the gRPC listener) it runs at once. Over a real HTTP server.
func TestHoldAnswers(t *testing.T) {
	writes := map[string]func(http.ResponseWriter){
		"Write":       func(w http.ResponseWriter) { _, _ = io.WriteString(w, "{}") },
		"WriteHeader": func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) },
		"Flush":       func(w http.ResponseWriter) { w.(http.Flusher).Flush() },
		"nothing":     func(http.ResponseWriter) {},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			var released, heldAfterWrite atomic.Bool
			var problems atomic.Value
			fail := func(s string) { problems.Store(s) }
			srv := httptest.NewServer(holdAnswers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				answerhold.Until(r.Context(), func() { released.Store(true) })
				if released.Load() {
					fail("the release ran when it was held, before any answer")
				}
				write(w)
				if name != "nothing" && !released.Load() {
					fail("the release had not run once the answer's first byte was written")
				}
				answerhold.Until(r.Context(), func() { heldAfterWrite.Store(true) })
				if name != "nothing" && !heldAfterWrite.Load() {
					fail("a release held after the answer was written did not run at once")
				}
			})))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if p, _ := problems.Load().(string); p != "" {
				t.Error(p)
			}
			if !released.Load() || !heldAfterWrite.Load() {
				t.Errorf("after the request: released %v, %v; want both", released.Load(), heldAfterWrite.Load())
			}
		})
	}
	t.Run("no hold", func(t *testing.T) {
		ran := false
		answerhold.Until(t.Context(), func() { ran = true })
		if !ran {
			t.Error("without a hold, the release did not run at once")
		}
	})
}
