// small30: hostile HTTP/2 client of the thirtieth pass (branch pass30), against 7f55651's rule that a
// request whose body declares at most 1 KiB (httpguard.SmallBody) is charged to the rates of body bytes
// but never refused for them. Each of -conns TLS connections keeps -inflight requests open at once: each
// is one HEADERS (-method, POST by default, -path, -ctype, the token, and `content-length` of the body unless -noclen) and the
// body (-bodyfile) in one DATA frame with END_STREAM; a new one is sent as each answer ends. Connections
// closed by the daemon are opened again. -rate N paces the requests to N a second in all (0: as fast as
// answers come). Prints the answers by :status and grpc-status, the connections, the probe's CPU and the
// daemon's (-pid), their ratio and the load.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr     = flag.String("addr", "127.0.0.1:49401", "")
	path     = flag.String("path", "/classifier.v1.ClassifierService/GetIndexInfo", "")
	ctype    = flag.String("ctype", "application/grpc", "")
	token    = flag.String("token", "", "")
	bodyFile = flag.String("bodyfile", "", "each request's body")
	noClen   = flag.Bool("noclen", false, "send no content-length")
	conns    = flag.Int("conns", 8, "")
	inflight = flag.Int("inflight", 16, "")
	secs     = flag.Float64("secs", 10, "")
	pid      = flag.String("pid", "", "")
	perSec   = flag.Int("rate", 0, "requests a second in all (0: unpaced)")
	method   = flag.String("method", "POST", "the requests' method (GET: no body, no content-length)")
)

var tally probe.Tally
var sent atomic.Int64

func main() {
	flag.Parse()
	var body []byte
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			panic(err)
		}
		body = b
	}
	var tick <-chan time.Time
	if *perSec > 0 {
		t := time.NewTicker(time.Second / time.Duration(*perSec))
		defer t.Stop()
		tick = t.C
	}
	m := probe.Measure(*pid)
	end := m.End(*secs)
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				run(body, end, tick)
			}
		}()
	}
	wg.Wait()
	el, cc, dc, ratio := m.Figures()
	tally.Print(os.Stdout, 9)
	fmt.Printf("small30 %s body %d bytes: sent %d in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*path, len(body), sent.Load(), el, cc, dc, ratio, probe.LoadAvg())
}

func run(body []byte, end time.Time, tick <-chan time.Time) {
	c, err := probe.DialTLS(nil, *addr)
	if err != nil {
		tally.Count("dialerr")
		time.Sleep(50 * time.Millisecond)
		return
	}
	defer c.Close()
	tally.Count("conns")
	bw := bufio.NewWriterSize(c, 64<<10)
	var wmu sync.Mutex
	_, _ = bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(c, 64<<10))
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	fr.MaxHeaderListSize = 1 << 20
	_ = fr.WriteSettings(probe.BigWindow)
	_ = fr.WriteWindowUpdate(0, 1<<30)
	_ = bw.Flush()
	slots := make(chan struct{}, *inflight)
	for range *inflight {
		slots <- struct{}{}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = probe.ReadLoop(fr, &wmu, true, func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == ":status" || h.Name == "grpc-status" {
						tally.Count(h.Name + " " + h.Value)
					}
				}
				if f.StreamEnded() {
					slots <- struct{}{}
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					slots <- struct{}{}
				}
			case *http2.RSTStreamFrame:
				tally.Count("rst " + f.ErrCode.String())
				slots <- struct{}{}
			case *http2.GoAwayFrame:
				tally.Count("goaway " + f.ErrCode.String())
			}
		})
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := append(probe.Head(*method, "https", *path, *addr, *ctype), probe.Bearer(*token)...)
	if *method == "GET" {
		body = nil
	} else if !*noClen {
		fields = append(fields, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
	}
	sid := uint32(1)
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		select {
		case <-closed:
			tally.Count("closed by daemon")
			return
		case <-timer.C:
			return
		case <-slots:
		}
		if tick != nil {
			select {
			case <-tick:
			case <-closed:
				tally.Count("closed by daemon")
				return
			case <-timer.C:
				return
			}
		}
		wmu.Lock()
		blk := probe.Block(enc, &hb, fields)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: blk, EndHeaders: true, EndStream: len(body) == 0})
		if len(body) > 0 {
			_ = fr.WriteData(sid, true, body)
		}
		err := bw.Flush()
		wmu.Unlock()
		if err != nil {
			return
		}
		sid += 2
		sent.Add(1)
	}
}
