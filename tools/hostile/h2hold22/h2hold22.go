// h2hold22: hostile HTTP/2 client of the twenty-second pass (branch pass22), against the rule that
// only a connection with a request under way takes its peer's spare of cheap frames
// (rapidreset.Conn.Begin, ce7ac0d). Each of -conns TLS connections announces a stream window of
// -win bytes (default 0), so the answer to its request cannot be written and the handler stays
// under way; it opens one request (-hold get: GET -path with END_STREAM, no token unless -token;
// -hold body: POST -path with -token, a 1-byte DATA and no END_STREAM; -hold none: no request),
// every -renew seconds lets that answer through (a stream WINDOW_UPDATE) and opens the next one,
// and meanwhile sends -pace cheap frames (-ctrl wu: WINDOW_UPDATE on the connection; ping) a second
// in one write (0: batches of 256 back to back). Reconnects when closed, until -secs.
// Prints statuses, GOAWAYs, RSTs, client CPU and daemon CPU (-pid).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
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
	addr  = flag.String("addr", "127.0.0.1:46801", "")
	path  = flag.String("path", "/", "")
	token = flag.String("token", "", "")
	hold  = flag.String("hold", "get", "get|body|none")
	conns = flag.Int("conns", 100, "")
	secs  = flag.Float64("secs", 30, "")
	pid   = flag.String("pid", "", "")
	ctrl  = flag.String("ctrl", "wu", "wu|ping")
	pace  = flag.Int("pace", 200, "cheap frames a second per connection (0: unpaced)")
	renew = flag.Float64("renew", 25, "seconds between held requests")
	win   = flag.Uint("win", 0, "SETTINGS_INITIAL_WINDOW_SIZE announced")
)

var (
	tally       probe.Tally
	framesSent  atomic.Int64
	opened      atomic.Int64
	holdsOpened atomic.Int64
)

func main() {
	flag.Parse()
	m := probe.Measure(*pid)
	end := m.End(*secs)
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			for time.Now().Before(end) {
				run(end)
			}
		}()
	}
	wg.Wait()
	el, cc, dc, ratio := m.Figures()
	fmt.Printf("h2hold22 hold %s path %s ctrl %s pace %d conns %d: opened %d holds %d frames %d in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*hold, *path, *ctrl, *pace, *conns, opened.Load(), holdsOpened.Load(), framesSent.Load(), el, cc, dc, ratio, probe.LoadAvg())
	tally.Print(os.Stdout, 12)
}

func run(end time.Time) {
	c, err := probe.DialTLS(&net.Dialer{Timeout: 5 * time.Second}, *addr)
	if err != nil {
		tally.Count("dialerr")
		time.Sleep(100 * time.Millisecond)
		return
	}
	opened.Add(1)
	bw := bufio.NewWriterSize(c, 64<<10)
	var wmu sync.Mutex
	_, _ = bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(c, 64<<10))
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(*win)})
	_ = fr.WriteWindowUpdate(0, 1<<30)
	_ = bw.Flush()
	var closed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				if time.Now().Before(end) {
					tally.Count("closed by server")
				}
				closed.Store(true)
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == ":status" {
						tally.Count(h.Value)
					}
				}
			case *http2.RSTStreamFrame:
				tally.Count("rst:" + f.ErrCode.String())
			case *http2.GoAwayFrame:
				tally.Count("goaway:" + f.ErrCode.String())
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					_ = bw.Flush()
					wmu.Unlock()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WritePing(true, f.Data)
					_ = bw.Flush()
					wmu.Unlock()
				}
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	sid := uint32(1)
	open := func() {
		if *hold == "none" {
			return
		}
		hb.Reset()
		method := "GET"
		if *hold == "body" {
			method = "POST"
		}
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: method}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: *addr}, {Name: ":path", Value: *path}, {Name: "content-type", Value: "application/json"}} {
			_ = enc.WriteField(f)
		}
		if *token != "" {
			_ = enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer " + *token})
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: *hold == "get"})
		if *hold == "body" {
			_ = fr.WriteData(sid, false, []byte("{"))
		}
		holdsOpened.Add(1)
	}
	wmu.Lock()
	open()
	_ = bw.Flush()
	wmu.Unlock()
	next := time.Now().Add(time.Duration(*renew * float64(time.Second)))
	tick := time.Now()
	batch := *pace
	if batch == 0 {
		batch = 256
	}
	for time.Now().Before(end) && !closed.Load() {
		wmu.Lock()
		if time.Now().After(next) {
			if *hold == "get" {
				_ = fr.WriteWindowUpdate(sid, 1<<20)
			} else if *hold == "body" {
				_ = fr.WriteData(sid, true, []byte("}"))
			}
			sid += 2
			open()
			next = next.Add(time.Duration(*renew * float64(time.Second)))
		}
		for k := 0; k < batch; k++ {
			if *ctrl == "ping" {
				_ = fr.WritePing(false, [8]byte{byte(k), byte(k >> 8)})
			} else {
				_ = fr.WriteWindowUpdate(0, 1)
			}
		}
		err := bw.Flush()
		wmu.Unlock()
		framesSent.Add(int64(batch))
		if err != nil {
			tally.Count("werr")
			break
		}
		if *pace > 0 {
			tick = tick.Add(time.Second)
			time.Sleep(time.Until(tick))
		}
	}
	_ = c.Close()
	<-done
}
