// h2late23: hostile gRPC client of the twenty-third pass (branch pass23), against ea9defe (a call
// cancelled in the last quarter of a deadline of 20 ms or more is not an early reset). Each of -conns
// connections (TLS, or h2c with -plain) opens -inflight streams at once: HEADERS (POST -path,
// application/grpc, grpc-timeout -timeout, the token if any; with -msg also the call's message in a
// DATA frame with END_STREAM; without it no DATA, so the call waits for its message), waits -after,
// resets them all (RST_STREAM CANCEL) and opens the next -inflight in the same write, again and again
// until -secs, reconnecting when closed. Prints the answers (grpc-status), RST_STREAMs and GOAWAYs
// read, streams opened, connections, client CPU and daemon CPU (-pid).
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr     = flag.String("addr", "127.0.0.1:47000", "")
	plain    = flag.Bool("plain", false, "h2c with prior knowledge instead of TLS")
	path     = flag.String("path", "/grpc.health.v1.Health/Check", "")
	token    = flag.String("token", "", "")
	conns    = flag.Int("conns", 4, "")
	inflight = flag.Int("inflight", 64, "streams opened at once per connection")
	timeout  = flag.String("timeout", "20m", "grpc-timeout (empty: none)")
	after    = flag.Duration("after", 17*time.Millisecond, "reset each stream this long after its HEADERS")
	msg      = flag.Bool("msg", false, "send the call's message (a Route query, or an empty message for other paths)")
	query    = flag.String("query", "open a pull request on github", "")
	secs     = flag.Float64("secs", 10, "")
	pid      = flag.String("pid", "", "")
)

var (
	tally           probe.Tally
	opened, resets  atomic.Int64
	connsN, goaways atomic.Int64
)

func message() []byte {
	var pb []byte
	if *path == "/classifier.v1.ClassifierService/Route" {
		pb = append([]byte{0x0a, byte(len(*query))}, *query...)
	}
	out := []byte{0, byte(len(pb) >> 24), byte(len(pb) >> 16), byte(len(pb) >> 8), byte(len(pb))}
	return append(out, pb...)
}

func main() {
	flag.Parse()
	m := probe.Measure(*pid)
	end := m.End(*secs)
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				runConn(end)
			}
		}()
	}
	wg.Wait()
	el, cc, dc, ratio := m.Figures()
	tally.Print(os.Stdout, 9)
	fmt.Printf("h2late23 path %s timeout %s after %v msg %v: %d streams opened, %d reset, %d conns, %d GOAWAYs in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*path, *timeout, *after, *msg, opened.Load(), resets.Load(), connsN.Load(), goaways.Load(), el, cc, dc, ratio, probe.LoadAvg())
}

func runConn(end time.Time) {
	var nc net.Conn
	var err error
	scheme := "https"
	if *plain {
		scheme = "http"
		nc, err = net.DialTimeout("tcp", *addr, 5*time.Second)
	} else {
		var c *tls.Conn
		c, err = probe.DialTLS(&net.Dialer{Timeout: 5 * time.Second}, *addr)
		nc = c
	}
	if err != nil {
		tally.Count("dialerr")
		time.Sleep(50 * time.Millisecond)
		return
	}
	defer nc.Close()
	connsN.Add(1)
	bw := bufio.NewWriterSize(nc, 64<<10)
	bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(nc, 64<<10))
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	fr.WriteSettings(probe.BigWindow)
	fr.WriteWindowUpdate(0, 1<<30)
	bw.Flush()
	var wmu sync.Mutex
	var closed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = probe.ReadLoop(fr, &wmu, true, func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == "grpc-status" {
						tally.Count("grpc-status " + h.Value)
					}
				}
			case *http2.RSTStreamFrame:
				tally.Count("rst " + f.ErrCode.String())
			case *http2.GoAwayFrame:
				goaways.Add(1)
				tally.Count("goaway " + f.ErrCode.String())
			}
		})
		closed.Store(true)
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := probe.Head("POST", scheme, *path, *addr, "application/grpc")
	if *timeout != "" {
		fields = append(fields, hpack.HeaderField{Name: "grpc-timeout", Value: *timeout})
	}
	fields = append(fields, probe.Bearer(*token)...)
	m := message()
	sid := uint32(1)
	var prev []uint32
	for time.Now().Before(end) && !closed.Load() && sid < 1<<30 {
		wmu.Lock()
		for _, id := range prev {
			fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		resets.Add(int64(len(prev)))
		prev = prev[:0]
		for k := 0; k < *inflight; k++ {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: probe.Block(enc, &hb, fields), EndHeaders: true})
			if *msg {
				fr.WriteData(sid, true, m)
			}
			prev = append(prev, sid)
			sid += 2
		}
		opened.Add(int64(*inflight))
		err := bw.Flush()
		wmu.Unlock()
		if err != nil {
			tally.Count("werr")
			break
		}
		time.Sleep(*after)
	}
	nc.Close()
	<-done
}
