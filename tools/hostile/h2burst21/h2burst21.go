// h2burst21: hostile HTTP/2 client of the twenty-first pass (branch pass21),
// against the peer's share of the connections' own frame rates (b44cfaa).
// Each of -conns workers runs -mode until -secs:
//
//	churn  : dial (TLS, or plaintext h2 prior knowledge with -plain), preface,
//	         SETTINGS, -n cheap frames of -ctrl in one write, then close (each
//	         connection's fresh FrameBurst); -wait reads the server's SETTINGS
//	         first.
//	credit : one connection, requests (HEADERS GET -path with END_STREAM,
//	         -token if any; with -body a POST of it in one DATA frame, -accept
//	         an Accept header) each followed by -n cheap frames of -ctrl
//	         (FramesPerRequest credited per request), at most -inflight
//	         outstanding, reconnecting when closed.
//
// -ctrl: wu (WINDOW_UPDATE on the connection), ping, settings, prio.
// Prints answers, frames sent, client CPU and daemon CPU (-pid).
package main

import (
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
	addr     = flag.String("addr", "127.0.0.1:46501", "")
	mode     = flag.String("mode", "churn", "churn|credit")
	ctrl     = flag.String("ctrl", "wu", "wu|ping|settings|prio")
	n        = flag.Int("n", 250, "cheap frames per connection (churn) or per request (credit)")
	conns    = flag.Int("conns", 4, "")
	secs     = flag.Float64("secs", 10, "")
	pid      = flag.String("pid", "", "")
	plain    = flag.Bool("plain", false, "plaintext h2 (prior knowledge), for the gRPC listener without TLS")
	wait     = flag.Bool("wait", false, "churn: read the server's SETTINGS before the frames")
	path     = flag.String("path", "/v1/route", "")
	token    = flag.String("token", "", "")
	inflight = flag.Int("inflight", 32, "")
	ctype    = flag.String("ctype", "application/json", "")
	body     = flag.String("body", "", "credit: POST this body (one DATA frame) instead of a GET")
	accept   = flag.String("accept", "", "credit: an Accept header (MCP: \"application/json, text/event-stream\")")
)

var (
	tally               probe.Tally
	framesSent, opened  atomic.Int64
	requests, responses atomic.Int64
)

func dial() (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if *plain {
		return d.Dial("tcp", *addr)
	}
	return tls.DialWithDialer(d, "tcp", *addr, probe.TLSConfig())
}

func cheap(fr *http2.Framer, k int) {
	switch *ctrl {
	case "wu":
		_ = fr.WriteWindowUpdate(0, 1)
	case "ping":
		_ = fr.WritePing(false, [8]byte{byte(k), byte(k >> 8)})
	case "settings":
		_ = fr.WriteSettings()
	case "prio":
		_ = fr.WritePriority(uint32(2*k+100001), http2.PriorityParam{StreamDep: 0, Weight: 10})
	}
}

func churn(end time.Time) {
	for time.Now().Before(end) {
		c, err := dial()
		if err != nil {
			tally.Count("dialerr")
			time.Sleep(20 * time.Millisecond)
			continue
		}
		opened.Add(1)
		var buf bytes.Buffer
		buf.WriteString(http2.ClientPreface)
		fr := http2.NewFramer(&buf, nil)
		_ = fr.WriteSettings(probe.BigWindow)
		if *wait {
			_, _ = c.Write(buf.Bytes())
			buf.Reset()
			rf := http2.NewFramer(nil, c)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := rf.ReadFrame(); err != nil {
				tally.Count("readerr")
			}
		}
		for k := 0; k < *n; k++ {
			cheap(fr, k)
		}
		framesSent.Add(int64(*n))
		if _, err := c.Write(buf.Bytes()); err != nil {
			tally.Count("werr")
		}
		_ = c.Close()
	}
}

func credit(end time.Time) {
	for time.Now().Before(end) {
		c, err := dial()
		if err != nil {
			tally.Count("dialerr")
			time.Sleep(20 * time.Millisecond)
			continue
		}
		opened.Add(1)
		var wmu sync.Mutex
		fr, err := probe.Start(c, 65536, probe.BigWindow)
		if err != nil {
			tally.Count("werr")
			c.Close()
			continue
		}
		_ = fr.WriteWindowUpdate(0, 1<<30)
		var out atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			err := probe.ReadLoop(fr, &wmu, true, func(f http2.Frame) {
				switch f := f.(type) {
				case *http2.MetaHeadersFrame:
					for _, h := range f.Fields {
						if h.Name == ":status" {
							tally.Count(h.Value)
						}
					}
					if f.StreamEnded() {
						out.Add(-1)
						responses.Add(1)
					}
				case *http2.DataFrame:
					if f.StreamEnded() {
						out.Add(-1)
						responses.Add(1)
					}
				case *http2.RSTStreamFrame:
					out.Add(-1)
					tally.Count("rst:" + f.ErrCode.String())
				case *http2.GoAwayFrame:
					tally.Count("goaway:" + f.ErrCode.String() + " " + string(f.DebugData()))
				}
			})
			if time.Now().Before(end) {
				tally.Count("rerr: " + err.Error())
			}
		}()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		method := "GET"
		if *body != "" {
			method = "POST"
		}
		fields := append([]hpack.HeaderField{{Name: ":method", Value: method}, {Name: ":scheme", Value: "https"},
			{Name: ":path", Value: *path}, {Name: ":authority", Value: *addr}, {Name: "content-type", Value: *ctype}}, probe.Bearer(*token)...)
		if *accept != "" {
			fields = append(fields, hpack.HeaderField{Name: "accept", Value: *accept})
		}
		sid := uint32(1)
	loop:
		for time.Now().Before(end) {
			for out.Load() >= int64(*inflight) {
				select {
				case <-done:
					break loop
				case <-time.After(time.Millisecond):
				}
				if !time.Now().Before(end) {
					break loop
				}
			}
			wmu.Lock()
			blk := probe.Block(enc, &hb, fields)
			err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: blk, EndHeaders: true, EndStream: *body == ""})
			if err == nil && *body != "" {
				err = fr.WriteData(sid, true, []byte(*body))
			}
			for k := 0; k < *n && err == nil; k++ {
				cheap(fr, k)
			}
			wmu.Unlock()
			if err != nil {
				break
			}
			sid += 2
			out.Add(1)
			requests.Add(1)
			framesSent.Add(int64(*n))
			if sid > 1<<30 {
				break
			}
		}
		_ = c.Close()
		<-done
	}
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
			if *mode == "credit" {
				credit(end)
			} else {
				churn(end)
			}
		}()
	}
	wg.Wait()
	el, cc, dc, ratio := m.Figures()
	fmt.Printf("h2burst21 mode %s ctrl %s n %d conns %d plain %v: opened %d requests %d responses %d frames %d in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*mode, *ctrl, *n, *conns, *plain, opened.Load(), requests.Load(), responses.Load(), framesSent.Load(), el, cc, dc, ratio, probe.LoadAvg())
	tally.Print(os.Stdout, 8)
}
