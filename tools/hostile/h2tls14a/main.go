// Command h2tls14a is h2tls13a (HTTP/2 frame-level abuse over TLS with ALPN h2, for the HTTP
// listeners; see its -mode list) with -authority, -origin and -method (the fourteenth pass, A: a
// request answered at once with a status other than 401, e.g. 403 for a :authority that names
// no loopback address, is not an early reset).
package main

import (
	"flag"

	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/h2abuse"
	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	c := h2abuse.Flags("127.0.0.1:42111", "HTTP listener (TLS)", "/classifier.v1.ClassifierService/Route", "request path")
	ctype := c.TLSFlags()
	authority := flag.String("authority", "", ":authority (empty: -addr)")
	origin := flag.String("origin", "", "an Origin header field (empty: none)")
	method := flag.String("method", "POST", ":method")
	flag.Parse()
	auth := c.Addr
	if *authority != "" {
		auth = *authority
	}
	c.Fields = func() []hpack.HeaderField {
		f := probe.Head(*method, h2abuse.Scheme(c.TLS), c.Path, auth, *ctype)
		if *origin != "" {
			f = append(f, hpack.HeaderField{Name: "origin", Value: *origin})
		}
		return append(f, probe.Bearer(c.Token)...)
	}
	h2abuse.Run(*c)
}
