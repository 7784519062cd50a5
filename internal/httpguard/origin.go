package httpguard

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// crossSite is the refusal (PERMISSION_DENIED, 403) of a request that may
// change state (any method but GET, HEAD and OPTIONS) sent by a web page
// of another origin, or nil. A browser says where a request comes from:
// Origin on every POST, Sec-Fetch-Site on every request of a current
// browser. Both are checked: Origin must name the listener's own origin
// (the Host the request was sent to, as the explain page's own calls do),
// and Sec-Fetch-Site must not be cross-site or same-site (another port of
// 127.0.0.1 is the same site). Clients that are not browsers (curl, the
// SDKs, hubs) send neither and pass.
//
// Without it, a page the user opened could POST to a daemon run without a
// token file with fetch(url, {method: 'POST', mode: 'no-cors', body}):
// such a "simple" request goes without a CORS preflight, and the Host
// check (loopback names only) passes since the page sends it to
// 127.0.0.1. The seventh hostile pass did ReportUse (poisoning learning),
// ResetLearning, CreateSession by the thousand and POST
// /tools/metrics/reset that way.
func crossSite(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if vs := r.Header.Values("Origin"); len(vs) > 0 {
		if len(vs) > 1 || !sameOrigin(vs[0], r.Host) {
			return status.Errorf(codes.PermissionDenied,
				"request from the web page of origin %q refused: only pages of this listener's own origin may call it", clipHeader(vs[0]))
		}
	}
	switch site := strings.ToLower(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site"))); site {
	case "cross-site", "same-site":
		return status.Errorf(codes.PermissionDenied,
			"request from a web page of another origin refused (Sec-Fetch-Site: %s): only pages of this listener's own origin may call it", site)
	}
	return nil
}

// sameOrigin reports whether the origin o ("http://127.0.0.1:8080") names
// host (a request's Host header): the same host name and port, a missing
// port being its scheme's default. The scheme is not compared: behind a
// proxy that ends TLS, the page is https while the daemon serves http.
func sameOrigin(o, host string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false // "null" (a sandboxed page, file://) too
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	return hostPort(u.Host, def) == hostPort(host, def)
}

// hostPort is addr's host in lower case and port, def when it has none.
func hostPort(addr, def string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		h, p = strings.Trim(addr, "[]"), def
	}
	return net.JoinHostPort(strings.ToLower(h), p)
}

// apiContentType reports whether a POST's Content-Type names a body our
// HTTP APIs read: JSON (REST, Connect unary, MCP), protobuf (Connect
// unary), Connect streaming, gRPC and gRPC-Web. None of them is one a web
// page may send across origins without a CORS preflight (which no
// listener answers): no Content-Type, text/plain, a form. A POST without
// a body must name one too: without a body, a page's POST is a bodiless
// call all the same (ResetLearning).
func apiContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", mt == "application/proto", mt == "application/protobuf", mt == "application/x-protobuf",
		strings.HasPrefix(mt, "application/grpc"), strings.HasPrefix(mt, "application/connect+"):
		return true
	}
	return false
}

// jsonContentType reports whether ct is application/json (any
// parameters).
func jsonContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// errContentType is the refusal (415) of a POST whose Content-Type is not
// apiContentType's.
func errContentType(ct string) error {
	if ct == "" {
		ct = "none"
	}
	return status.Error(codes.InvalidArgument, fmt.Sprintf(
		"a POST needs Content-Type application/json (or a Connect, gRPC or gRPC-Web type), even without a body; got %q", clipHeader(ct)))
}
