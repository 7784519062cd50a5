// Command h2tls13a is h2f11b (HTTP/2 frame-level abuse) over TLS with ALPN h2, for the HTTP
// listeners that speak HTTP/2 only over TLS: --http-listen, --mcp-listen and the proxy's
// --mcp-listen (the thirteenth pass, A). -mode tiny|cont|contlit|settings|winupd|winover|rst|rstmsg|
// flood|ping|empty|priority|badorder; -path and -ctype name the request (default a Connect JSON
// Route); answers are counted by :status as well as grpc-status. contlit: one HEADERS without
// END_HEADERS, then CONTINUATION frames each carrying a new literal header field, forever.
package main

import (
	"flag"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/h2abuse"
	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr   = flag.String("addr", "127.0.0.1:42111", "HTTP listener (TLS)")
	mode   = flag.String("mode", "tiny", "tiny, cont, settings, winupd, winover, rst, ping, empty, priority, badorder")
	path   = flag.String("path", "/classifier.v1.ClassifierService/Route", "request path")
	ctype  = flag.String("ctype", "application/json", "content-type")
	useTLS = flag.Bool("tls", true, "TLS with ALPN h2 (false: h2c prior knowledge)")
	token  = flag.String("token", "", "bearer token")
	conns  = flag.Int("conns", 4, "connections")
	nstr   = flag.Int("streams", 1, "tiny: streams per connection")
	length = flag.Int("len", 4<<20-16, "tiny: declared message length")
	chunk  = flag.Int("chunk", 1, "tiny: bytes per DATA frame")
	hold   = flag.Duration("hold", 10*time.Second, "how long")
	read   = flag.Bool("read", true, "read (and drain) the server's frames")
	again  = flag.Bool("reconnect", false, "connect again whenever the server closes a connection, until -hold")
	per    = flag.Int("per", 0, "rst: close the connection after this many resets (0: never), and with -reconnect open another")
)

func main() {
	flag.Parse()
	h2abuse.Run(h2abuse.Config{Addr: *addr, Mode: *mode, TLS: *useTLS, Conns: *conns, Streams: *nstr, Len: *length, Chunk: *chunk,
		Hold: *hold, Read: *read, Reconnect: *again, Per: *per, Status: true, ContLit: true,
		Fields: func() []hpack.HeaderField {
			return append(probe.Head("POST", h2abuse.Scheme(*useTLS), *path, *addr, *ctype), probe.Bearer(*token)...)
		}})
}
