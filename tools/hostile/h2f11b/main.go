// Command h2f11b sends HTTP/2 frame-level abuse to the gRPC listener (the eleventh pass, B): -mode tiny|cont|settings|winupd|winover|rst|rstmsg|flood|ping|empty|priority|badorder.
package main

import (
	"flag"

	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/h2abuse"
	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	c := h2abuse.Flags("127.0.0.1:50051", "gRPC listener", "/grpc.health.v1.Health/Check", "method path")
	flag.Parse()
	c.Fields = func() []hpack.HeaderField {
		return append(probe.Head("POST", "http", c.Path, c.Addr, "application/grpc"), probe.Bearer(c.Token)...)
	}
	h2abuse.Run(*c)
}
