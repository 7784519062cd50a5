// Command h2f11b sends HTTP/2 frame-level abuse to the gRPC listener (the eleventh pass, B): -mode tiny|cont|settings|winupd|winover|rst|rstmsg|flood|ping|empty|priority|badorder.
package main

import (
	"flag"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/h2abuse"
	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr   = flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	mode   = flag.String("mode", "tiny", "tiny, cont, settings, winupd, winover, rst, ping, empty, priority, badorder")
	path   = flag.String("path", "/grpc.health.v1.Health/Check", "method path")
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
	h2abuse.Run(h2abuse.Config{Addr: *addr, Mode: *mode, Conns: *conns, Streams: *nstr, Len: *length, Chunk: *chunk,
		Hold: *hold, Read: *read, Reconnect: *again, Per: *per,
		Fields: func() []hpack.HeaderField {
			return append(probe.Head("POST", "http", *path, *addr, "application/grpc"), probe.Bearer(*token)...)
		}})
}
