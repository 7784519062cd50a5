// h2ctl20: hostile HTTP/2 client of the twentieth pass (branch h2data). Over TLS (ALPN h2) each of
// -conns connections runs -mode until -secs, reconnecting when closed.
// Modes:
//
//	refused : stream = HEADERS (POST -path, no END_STREAM, token if any) + -per DATA frames of -frame bytes, last one END_STREAM
//	malformed: stream = HEADERS with a block missing :path (server RSTs, no handler) + -per DATA frames
//	pre     : -per malformed HEADERS (no :path: RST by net/http, no handler, yet counted as opened streams by H2Scan), wait for their RSTs, then 256+16*streams-margin 1-byte DATA frames on those closed streams, again and again
//	closed  : stream = HEADERS GET with END_STREAM, then -per DATA frames on the (half-)closed stream
//	ctrl    : -ctrl kind flood: wu (WINDOW_UPDATE conn), wus (WINDOW_UPDATE on closed stream), prio, rst (RST on closed stream), ping, settings, empty (empty DATA on closed stream);
//	          with -pace N, N such frames a second per connection in one write (each connection
//	          kept inside its own budget), the connections' seconds staggered
//
// -bodyfile (the twenty-fifth pass) sends a file's bytes as each refused stream's body, as -body does
// with a string: a gRPC-Web or gRPC envelope (`-ctype application/grpc-web+json`), whose refusals are
// answered 200 with grpc-status 3.
// -method sets the refused streams' method (POST; GET: a body on a GET). With -slowtoken (the twenty-third
// pass, against 9abfdd1's allowance of unread DATA while a handler read a body of the connection), each
// connection first opens a POST -slowpath with that token and no END_STREAM, sends `{"query":"` and then
// one byte every -trickle, so that a handler is reading one of its bodies the whole time; with -slowend
// the slow body is ended (`"}` with END_STREAM) after -slowend and a new one opened on the connection.
// (The twenty-third and twenty-fourth passes ran these as h2allow23, a copy of this probe, since folded in.)
//
// Pipelines streams with at most -inflight outstanding. Prints stats, client CPU and daemon CPU (-pid).
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
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
	addr     = flag.String("addr", "127.0.0.1:47301", "")
	path     = flag.String("path", "/classifier.v1.ClassifierService/Route", "")
	ctype    = flag.String("ctype", "application/json", "")
	token    = flag.String("token", "", "")
	conns    = flag.Int("conns", 4, "")
	frame    = flag.Int("frame", 1, "bytes per DATA frame")
	per      = flag.Int("per", 15, "DATA frames per stream")
	secs     = flag.Float64("secs", 10, "")
	pid      = flag.String("pid", "", "")
	mode     = flag.String("mode", "refused", "")
	ctrl     = flag.String("ctrl", "wu", "")
	inflight = flag.Int("inflight", 64, "")
	bodyStr  = flag.String("body", "", "body content (repeated/cut to per*frame)")
	bodyFile = flag.String("bodyfile", "", "body content read from this file (binary: a gRPC-Web envelope), in place of -body")
	margin   = flag.Int("margin", 8, "frames kept under the bound in pre mode")
	h1pre    = flag.Bool("h1alpn", false, "negotiate http/1.1 then send preface")
	pace     = flag.Int("pace", 0, "ctrl mode: send this many frames a second per connection, in one TLS record (0: 256 at a time, unpaced)")
	slowTok  = flag.String("slowtoken", "", "token of the slowly read body on each connection (none: no slow body)")
	slowPath = flag.String("slowpath", "/classifier.v1.ClassifierService/Route", "")
	trickle  = flag.Duration("trickle", 200*time.Millisecond, "one byte of the slow body every trickle")
	slowEnd  = flag.Duration("slowend", 0, "end the slow body after this long and open another (0: never)")
	method   = flag.String("method", "POST", "method of the refused streams")
)

type stats struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *stats) add(k string, n int64) { s.mu.Lock(); s.m[k] += n; s.mu.Unlock() }

var st = &stats{m: map[string]int64{}}
var framesSent, bytesSent atomic.Int64

func main() {
	flag.Parse()
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			panic(err)
		}
		*bodyStr = string(b)
	}
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
	fmt.Printf("h2p mode %s ctrl %s frame %d per %d: %v frames %d bytes %d in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*mode, *ctrl, *frame, *per, st.m, framesSent.Load(), bytesSent.Load(), el, cc, dc, ratio, probe.LoadAvg())
}

func runConn(end time.Time) {
	alpn := []string{"h2"}
	if *h1pre {
		alpn = []string{"http/1.1"}
	}
	raw, err := net.DialTimeout("tcp", *addr, 5*time.Second)
	if err != nil {
		st.add("dialerr", 1)
		time.Sleep(50 * time.Millisecond)
		return
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: alpn})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		st.add("hserr", 1)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	st.add("conns", 1)
	bw := bufio.NewWriterSize(c, 32<<10)
	var wmu sync.Mutex
	bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	fr.WriteWindowUpdate(0, 1<<30)
	bw.Flush()

	var window atomic.Int64
	window.Store(65535)
	var outstanding atomic.Int64
	done := make(chan struct{})
	var rstProto atomic.Int64
	var closed atomic.Bool
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	// reader
	go func() {
		defer close(done)
		rf := http2.NewFramer(nil, bufio.NewReaderSize(c, 64<<10))
		rf.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
		rf.MaxHeaderListSize = 1 << 20
		for {
			f, err := rf.ReadFrame()
			if err != nil {
				if !closed.Load() {
					st.add("rerr", 1)
				}
				closed.Store(true)
				signal()
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == ":status" {
						st.add(h.Value, 1)
					}
				}
				if f.StreamEnded() {
					outstanding.Add(-1)
					signal()
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					outstanding.Add(-1)
					signal()
				}
			case *http2.RSTStreamFrame:
				if f.ErrCode == http2.ErrCodeProtocol {
					rstProto.Add(1)
				}
				st.add("rst:"+f.ErrCode.String(), 1)
			case *http2.GoAwayFrame:
				st.add("goaway:"+f.ErrCode.String(), 1)
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					window.Add(int64(f.Increment))
					signal()
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					fr.WriteSettingsAck()
					bw.Flush()
					wmu.Unlock()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					fr.WritePing(true, f.Data)
					bw.Flush()
					wmu.Unlock()
				}
			}
		}
	}()

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	payload := bytes.Repeat([]byte(" "), *frame)
	if *bodyStr != "" {
		full := bytes.Repeat([]byte(*bodyStr), (*per**frame)/len(*bodyStr)+1)
		_ = full
	}
	sid := uint32(1)
	headers := func(endStream bool, malformed bool) {
		hb.Reset()
		var kvs [][2]string
		if malformed {
			kvs = [][2]string{{":method", "POST"}, {":scheme", "https"}}
		} else if endStream {
			kvs = [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", *addr}, {":path", *path}}
		} else {
			kvs = [][2]string{{":method", *method}, {":scheme", "https"}, {":authority", *addr}, {":path", *path}, {"content-type", *ctype}, {"te", "trailers"}}
		}
		for _, kv := range kvs {
			enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		if *token != "" && !malformed {
			enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer " + *token})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: endStream})
	}
	var body []byte
	if *bodyStr != "" {
		body = []byte(*bodyStr)
	}
	if *slowTok != "" {
		slowHeaders := func(id uint32) {
			hb.Reset()
			for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", *addr}, {":path", *slowPath}, {"content-type", "application/json"}, {"authorization", "Bearer " + *slowTok}} {
				enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
			fr.WriteData(id, false, []byte(`{"query":"`))
		}
		wmu.Lock()
		slowID := sid
		sid += 2
		slowHeaders(slowID)
		bw.Flush()
		wmu.Unlock()
		st.add("slow:opened", 1)
		go func() {
			started := time.Now()
			for !closed.Load() && time.Now().Before(end) {
				time.Sleep(*trickle)
				wmu.Lock()
				if *slowEnd > 0 && time.Since(started) > *slowEnd {
					fr.WriteData(slowID, true, []byte(`"}`))
					slowID = sid
					sid += 2
					slowHeaders(slowID)
					started = time.Now()
					st.add("slow:opened", 1)
				} else {
					fr.WriteData(slowID, false, []byte("a"))
				}
				bw.Flush()
				wmu.Unlock()
			}
		}()
	}
	writeErr := false
	var totalBlocks, dataSent int64
	batch, tick := 256, time.Now()
	if *pace > 0 {
		batch = *pace
		// Stagger the connections' seconds.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		tick = time.Now()
	}
	for time.Now().Before(end) && !closed.Load() && !writeErr {
		if *mode != "ctrl" {
			for outstanding.Load() >= int64(*inflight) && !closed.Load() && time.Now().Before(end) {
				select {
				case <-wake:
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		need := int64(*per * *frame)
		if *mode == "pre" {
			need = int64(16 * *per * *frame)
		}
		for window.Load() < need && !closed.Load() && time.Now().Before(end) {
			select {
			case <-wake:
			case <-time.After(100 * time.Millisecond):
			}
		}
		wmu.Lock()
		switch *mode {
		case "refused", "malformed":
			headers(false, *mode == "malformed")
			if *mode == "refused" {
				outstanding.Add(1)
			}
			for k := 0; k < *per; k++ {
				p := payload
				if body != nil {
					lo := k * *frame
					hi := min(lo+*frame, len(body))
					if lo >= len(body) {
						p = nil
					} else {
						p = body[lo:hi]
					}
				}
				fr.WriteData(sid, k == *per-1, p)
				framesSent.Add(1)
				bytesSent.Add(int64(len(p)))
			}
			window.Add(-need)
			sid += 2
		case "pre":
			// B malformed HEADERS, wait for their RSTs, then tiny DATA frames on the closed streams
			first := sid
			nb := *per
			for k := 0; k < nb; k++ {
				headers(false, true)
				sid += 2
			}
			totalBlocks += int64(nb)
			bw.Flush()
			wmu.Unlock()
			want := rstProto.Load() + int64(nb)
			t := time.Now().Add(2 * time.Second)
			for rstProto.Load() < want && time.Now().Before(t) && !closed.Load() {
				time.Sleep(time.Millisecond)
			}
			wmu.Lock()
			allow := 256 + 16*totalBlocks - dataSent - int64(*margin)
			for k := int64(0); k < allow; k++ {
				fr.WriteData(first+2*uint32(k%int64(nb)), false, payload)
				framesSent.Add(1)
				bytesSent.Add(int64(len(payload)))
				dataSent++
				if k%1024 == 1023 {
					bw.Flush()
				}
			}
			window.Add(-allow * int64(*frame))
		case "closed":
			headers(true, false)
			outstanding.Add(1)
			for k := 0; k < *per; k++ {
				fr.WriteData(sid, false, payload)
				framesSent.Add(1)
				bytesSent.Add(int64(len(payload)))
			}
			window.Add(-need)
			sid += 2
		case "ctrl":
			if sid == 1 {
				headers(true, false)
				sid += 2
			}
			for k := 0; k < batch; k++ {
				switch *ctrl {
				case "wu":
					fr.WriteWindowUpdate(0, 1)
				case "wus":
					fr.WriteWindowUpdate(1, 1)
				case "prio":
					fr.WritePriority(uint32(2*k+1001), http2.PriorityParam{StreamDep: 1, Weight: 10})
				case "rst":
					fr.WriteRSTStream(1, http2.ErrCodeCancel)
				case "ping":
					fr.WritePing(false, [8]byte{byte(k)})
				case "settings":
					fr.WriteSettings()
				case "empty":
					fr.WriteData(1, false, nil)
				}
				framesSent.Add(1)
			}
		}
		err := bw.Flush()
		wmu.Unlock()
		if err != nil {
			st.add("werr", 1)
			writeErr = true
		}
		if *pace > 0 && *mode == "ctrl" {
			tick = tick.Add(time.Second)
			time.Sleep(time.Until(tick))
		}
	}
	if !closed.Load() && *mode != "ctrl" {
		// wait briefly for answers
		t := time.Now().Add(2 * time.Second)
		for outstanding.Load() > 0 && time.Now().Before(t) && !closed.Load() {
			time.Sleep(20 * time.Millisecond)
		}
	}
	closed.Store(true)
	c.Close()
	<-done
}
