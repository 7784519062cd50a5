// rst25: hostile HTTP/2 client of the twenty-fifth pass (branch pass25), against bb23d40 (the transcoded
// body read whole before gRPC sees it) and vanguard's refusals: each of -conns TLS connections opens
// -inflight streams at once, each HEADERS (-method -path, -ctype, the token if any) plus, if -bodyfile,
// its bytes in one DATA frame (END_STREAM on the last frame sent; GET without a body: END_STREAM on
// HEADERS), then after a random wait in [0, -after) resets them all (RST_STREAM CANCEL) and opens the
// next -inflight, so that a client reset meets the transcoder's refusal (a JSON body that does not parse, a
// query parameter of the wrong type) at every moment. Run it against a -race build and look for
// 'DATA RACE' or 'fatal error' in the daemon's log. Prints statuses read, resets, connections, CPU.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"math/rand/v2"
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
	addr     = flag.String("addr", "127.0.0.1:48101", "")
	paths    = flag.String("path", "/tools?limit=abc", "comma-separated paths, used in turn")
	method   = flag.String("method", "GET", "")
	ctype    = flag.String("ctype", "application/json", "")
	token    = flag.String("token", "", "")
	bodyFile = flag.String("bodyfile", "", "each stream's body (none: no DATA)")
	conns    = flag.Int("conns", 16, "")
	inflight = flag.Int("inflight", 32, "")
	after    = flag.Duration("after", 2*time.Millisecond, "reset after a random wait below this (0: in the same write)")
	secs     = flag.Float64("secs", 10, "")
	pid      = flag.String("pid", "", "")
)

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
	ps := strings.Split(*paths, ",")
	meter := probe.Measure(*pid)
	end := time.Now().Add(time.Duration(*secs * float64(time.Second)))
	var mu sync.Mutex
	stats := map[string]int{}
	add := func(k string) { mu.Lock(); stats[k]++; mu.Unlock() }
	var opened atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				c, err := tls.Dial("tcp", *addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
				if err != nil {
					add("dialerr")
					time.Sleep(50 * time.Millisecond)
					continue
				}
				add("conns")
				bw := bufio.NewWriterSize(c, 1<<16)
				fr := http2.NewFramer(bw, c)
				fr.MaxHeaderListSize = 1 << 20
				_, _ = bw.WriteString(http2.ClientPreface)
				_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
				_ = fr.WriteWindowUpdate(0, 1<<30)
				_ = bw.Flush()
				var wmu sync.Mutex
				done := make(chan struct{})
				dec := hpack.NewDecoder(1<<16, nil) // the connection's own table
				go func() {
					defer close(done)
					for {
						f, err := fr.ReadFrame()
						if err != nil {
							return
						}
						switch f := f.(type) {
						case *http2.HeadersFrame:
							fs, _ := dec.DecodeFull(f.HeaderBlockFragment())
							for _, hf := range fs {
								if hf.Name == ":status" {
									add(hf.Value)
								}
							}
						case *http2.RSTStreamFrame:
							add("rst:" + f.ErrCode.String())
						case *http2.GoAwayFrame:
							add("goaway")
						case *http2.SettingsFrame:
							if !f.IsAck() {
								wmu.Lock()
								_ = fr.WriteSettingsAck()
								_ = bw.Flush()
								wmu.Unlock()
							}
						}
					}
				}()
				var hb bytes.Buffer
				enc := hpack.NewEncoder(&hb)
				sid := uint32(1)
			loop:
				for n := 0; time.Now().Before(end); n++ {
					wmu.Lock()
					first := sid
					for k := 0; k < *inflight; k++ {
						hb.Reset()
						p := ps[(n**inflight+k)%len(ps)]
						for _, kv := range [][2]string{{":method", *method}, {":scheme", "https"}, {":authority", *addr}, {":path", p}, {"content-type", *ctype}} {
							_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
						}
						if *token != "" {
							_ = enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer " + *token})
						}
						_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: body == nil})
						for lo := 0; lo < len(body); lo += 16384 {
							hi := min(lo+16384, len(body))
							_ = fr.WriteData(sid, hi == len(body), body[lo:hi])
						}
						sid += 2
						opened.Add(1)
					}
					if *after > 0 {
						_ = bw.Flush()
						wmu.Unlock()
						time.Sleep(time.Duration(rand.Int64N(int64(*after))))
						wmu.Lock()
					}
					for s := first; s < sid; s += 2 {
						_ = fr.WriteRSTStream(s, http2.ErrCodeCancel)
					}
					err := bw.Flush()
					wmu.Unlock()
					if err != nil {
						break loop
					}
					select {
					case <-done:
						break loop
					default:
					}
				}
				_ = c.Close()
				<-done
			}
		}()
	}
	wg.Wait()
	el, cc, dc, ratio := meter.Figures()
	fmt.Printf("rst25 %s %s: %v opened %d in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*method, *paths, stats, opened.Load(), el, cc, dc, ratio, probe.LoadAvg())
}
