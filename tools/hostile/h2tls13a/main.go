// Command h2tls13a is h2f11b (HTTP/2 frame-level abuse) over TLS with ALPN h2, for the HTTP
// listeners that speak HTTP/2 only over TLS: --http-listen, --mcp-listen and the proxy's
// --mcp-listen (the thirteenth pass, A). -mode tiny|cont|contlit|settings|winupd|winover|rst|rstmsg|
// flood|ping|empty|priority|badorder; -path and -ctype name the request (default a Connect JSON
// Route); answers are counted by :status as well as grpc-status. contlit: one HEADERS without
// END_HEADERS, then CONTINUATION frames each carrying a new literal header field, forever.
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
	flag.Parse()
	c.Fields = func() []hpack.HeaderField {
		return append(probe.Head("POST", h2abuse.Scheme(c.TLS), c.Path, c.Addr, *ctype), probe.Bearer(c.Token)...)
	}
	h2abuse.Run(*c)
}
