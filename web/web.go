// Package web is classifierd's explain page: plain HTML, CSS and JS
// embedded in the binary and served at / on --http-listen. The page calls
// the daemon's Connect JSON endpoints (Route, GetIndexInfo)
// from the browser; it needs no build step and loads nothing from elsewhere.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Handler serves the page's files: / is index.html; anything else that is
// not one of the embedded files is 404, and methods other than GET and
// HEAD are 405.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path != "/" {
			st, err := fs.Stat(sub, strings.TrimPrefix(r.URL.Path, "/"))
			if err != nil || st.IsDir() {
				http.NotFound(w, r)
				return
			}
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		// One range at most: net/http answers a request of many ranges
		// with a multipart body of each, and a 39 KB head of 4,000
		// one-byte ranges of explain.js got a 612 KB answer and cost the
		// daemon 60 ms of CPU, with no token (the thirteenth hostile
		// pass: 4 connections, 17 s of CPU in 20 s). The page's files
		// are small: a request of several ranges gets the whole file.
		if strings.Contains(r.Header.Get("Range"), ",") || len(r.Header.Values("Range")) > 1 {
			r.Header.Del("Range")
		}
		files.ServeHTTP(w, r)
	})
}
