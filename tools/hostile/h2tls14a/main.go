// Command h2tls14a is h2tls13a with -authority and -method (the fourteenth pass, A: a
// request answered at once with a status other than 401, e.g. 403 for a :authority that names
// no loopback address, is not an early reset). h2tls13a is h2f11b (HTTP/2 frame-level abuse) over TLS with ALPN h2, for the HTTP
// listeners that speak HTTP/2 only over TLS: --http-listen, --mcp-listen and the proxy's
// --mcp-listen (the thirteenth pass, A). -mode tiny|cont|contlit|settings|winupd|winover|rst|rstmsg|
// flood|ping|empty|priority|badorder; -path and -ctype name the request (default a Connect JSON
// Route); answers are counted by :status as well as grpc-status. contlit: one HEADERS without
// END_HEADERS, then CONTINUATION frames each carrying a new literal header field, forever.
package main

import (
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

var (
	addr      = flag.String("addr", "127.0.0.1:42111", "HTTP listener (TLS)")
	mode      = flag.String("mode", "tiny", "tiny, cont, settings, winupd, winover, rst, ping, empty, priority, badorder")
	path      = flag.String("path", "/classifier.v1.ClassifierService/Route", "request path")
	ctype     = flag.String("ctype", "application/json", "content-type")
	useTLS    = flag.Bool("tls", true, "TLS with ALPN h2 (false: h2c prior knowledge)")
	token     = flag.String("token", "", "bearer token")
	conns     = flag.Int("conns", 4, "connections")
	nstr      = flag.Int("streams", 1, "tiny: streams per connection")
	length    = flag.Int("len", 4<<20-16, "tiny: declared message length")
	chunk     = flag.Int("chunk", 1, "tiny: bytes per DATA frame")
	hold      = flag.Duration("hold", 10*time.Second, "how long")
	read      = flag.Bool("read", true, "read (and drain) the server's frames")
	again     = flag.Bool("reconnect", false, "connect again whenever the server closes a connection, until -hold")
	authority = flag.String("authority", "", ":authority (empty: -addr)")
	origin    = flag.String("origin", "", "an Origin header field (empty: none)")
	method    = flag.String("method", "POST", ":method")
	per       = flag.Int("per", 0, "rst: close the connection after this many resets (0: never), and with -reconnect open another")
)

var answers sync.Map

func count(k string) {
	v, _ := answers.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func main() {
	flag.Parse()
	var wg sync.WaitGroup
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
				count("reconnects")
			}
		})
	}
	wg.Wait()
	fmt.Printf("%10d  frames (or streams) sent in all, %.0f/s\n", sentTotal.Load(), float64(sentTotal.Load())/hold.Seconds())
	answers.Range(func(k, v any) bool { fmt.Printf("%10d  %s\n", v.(*atomic.Int64).Load(), k); return true })
}

func clip(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "127.0.0.1") {
		s = s[i+2:] // drop the addresses: one line per kind of end
	}
	if len(s) > 70 {
		return s[:70]
	}
	return s
}

func headers(enc *hpack.Encoder, hb *bytes.Buffer) []byte {
	hb.Reset()
	f := []hpack.HeaderField{{Name: ":method", Value: *method}, {Name: ":scheme", Value: scheme()}, {Name: ":path", Value: *path},
		{Name: ":authority", Value: auth()}, {Name: "content-type", Value: *ctype}, {Name: "te", Value: "trailers"}}
	if *origin != "" {
		f = append(f, hpack.HeaderField{Name: "origin", Value: *origin})
	}
	if *token != "" {
		f = append(f, hpack.HeaderField{Name: "authorization", Value: "Bearer " + *token})
	}
	for _, x := range f {
		_ = enc.WriteField(x)
	}
	return append([]byte(nil), hb.Bytes()...)
}

func auth() string {
	if *authority != "" {
		return *authority
	}
	return *addr
}

func scheme() string {
	if *useTLS {
		return "https"
	}
	return "http"
}

func dial() (net.Conn, error) {
	if !*useTLS {
		return net.Dial("tcp", *addr)
	}
	c, err := tls.Dial("tcp", *addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a probe against a self-signed test daemon
	if err == nil && c.ConnectionState().NegotiatedProtocol != "h2" {
		c.Close()
		return nil, fmt.Errorf("ALPN %q, not h2", c.ConnectionState().NegotiatedProtocol)
	}
	return c, err
}

func run(stop time.Time) error {
	nc, err := dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(stop.Add(3 * time.Second))
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return err
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	var wmu sync.Mutex
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}); err != nil {
		return err
	}
	done := make(chan struct{})
	slots := make(chan struct{}, 60)
	if *read {
		go func() {
			defer close(done)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					count("read end: " + clip(err.Error()))
					return
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if !f.IsAck() {
						wmu.Lock()
						_ = fr.WriteSettingsAck()
						wmu.Unlock()
					}
				case *http2.MetaHeadersFrame:
					for _, h := range f.Fields {
						if h.Name == ":status" {
							select {
							case <-slots:
							default:
							}
							count(":status " + h.Value)
						}
						if h.Name == "grpc-status" {
							select {
							case <-slots:
							default:
							}
							m := ""
							for _, g := range f.Fields {
								if g.Name == "grpc-message" {
									m = clip(g.Value)
								}
							}
							count("grpc-status=" + h.Value + " " + m)
						}
					}
				case *http2.RSTStreamFrame:
					count("rst " + f.ErrCode.String())
				case *http2.GoAwayFrame:
					count("goaway " + f.ErrCode.String() + " " + clip(string(f.DebugData())))
				case *http2.PingFrame:
					if f.IsAck() {
						count("ping ack")
					}
				}
			}
		}()
	} else {
		close(done)
		done = make(chan struct{})
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	w := func(f func() error) error { wmu.Lock(); defer wmu.Unlock(); return f() }
	ended := func() bool {
		select {
		case <-done:
			return true
		default:
			return time.Now().After(stop)
		}
	}
	var sent int64
	defer func() { sentTotal.Add(sent) }()
	switch *mode {
	case "tiny": // messages of -len bytes in DATA frames of -chunk bytes
		ids := []uint32{}
		for i := range *nstr {
			id := uint32(2*i + 1)
			ids = append(ids, id)
			blk := headers(enc, &hb)
			if err := w(func() error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true})
			}); err != nil {
				return err
			}
			hdr := []byte{0, byte(*length >> 24), byte(*length >> 16), byte(*length >> 8), byte(*length)}
			if err := w(func() error { return fr.WriteData(id, false, hdr) }); err != nil {
				return err
			}
		}
		b := bytes.Repeat([]byte{0x0a}, *chunk) // 0x0a: field 1, wire type 2 (junk protobuf is fine: it is never decoded)
		for off := 0; off < *length && !ended(); off += *chunk {
			for _, id := range ids {
				if err := w(func() error { return fr.WriteData(id, false, b) }); err != nil {
					return err
				}
				sent++
			}
		}
		count("tiny: all sent or ended")
		<-time.After(time.Until(stop))
	case "cont": // one HEADERS without END_HEADERS, then CONTINUATION frames forever
		blk := headers(enc, &hb)
		if err := w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: false})
		}); err != nil {
			return err
		}
		pad := []byte{}
		for !ended() {
			if err := w(func() error { return fr.WriteContinuation(1, false, pad) }); err != nil {
				return err
			}
			sent++
		}
	case "contlit": // one HEADERS without END_HEADERS, then CONTINUATION frames of new literal fields
		blk := headers(enc, &hb)
		if err := w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: false})
		}); err != nil {
			return err
		}
		for i := 0; !ended(); i++ {
			hb.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-h%d", i), Value: strings.Repeat("a", 1000), Sensitive: true})
			frag := append([]byte(nil), hb.Bytes()...)
			if err := w(func() error { return fr.WriteContinuation(1, false, frag) }); err != nil {
				return err
			}
			sent++
		}
	case "settings":
		for !ended() {
			if err := w(func() error {
				return fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 1<<32 - 1}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1<<24 - 1},
					http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 1<<32 - 1}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
			}); err != nil {
				return err
			}
			sent++
		}
	case "winupd":
		for !ended() {
			if err := w(func() error { return fr.WriteWindowUpdate(0, 1) }); err != nil {
				return err
			}
			sent++
		}
	case "winover":
		_ = w(func() error { return fr.WriteWindowUpdate(0, 1<<31-1) })
		_ = w(func() error { return fr.WriteWindowUpdate(0, 1<<31-1) })
		blk := headers(enc, &hb)
		_ = w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true})
		})
		_ = w(func() error { return fr.WriteWindowUpdate(1, 1<<31-1) })
		_ = w(func() error { return fr.WriteWindowUpdate(1, 1<<31-1) })
		sent = 5
		select {
		case <-done:
		case <-time.After(time.Until(stop)):
		}
	case "rst":
		id := uint32(1)
		for !ended() {
			blk := headers(enc, &hb)
			if err := w(func() error {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true}); err != nil {
					return err
				}
				return fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}); err != nil {
				return err
			}
			id += 2
			sent++
			if *per > 0 && sent >= int64(*per) {
				return nil
			}
		}
	case "flood": // legitimate calls (an empty message each), up to 60 in flight, answers read
		id := uint32(1)
		for !ended() {
			select {
			case slots <- struct{}{}:
			case <-time.After(time.Until(stop)):
			}
			blk := headers(enc, &hb)
			if err := w(func() error {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true}); err != nil {
					return err
				}
				return fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
			}); err != nil {
				return err
			}
			id += 2
			sent++
		}
	case "rstmsg": // HEADERS, an empty message, then RST_STREAM
		id := uint32(1)
		for !ended() {
			blk := headers(enc, &hb)
			if err := w(func() error {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true}); err != nil {
					return err
				}
				if err := fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}); err != nil {
					return err
				}
				return fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}); err != nil {
				return err
			}
			id += 2
			sent++
		}
	case "ping":
		for i := uint64(0); !ended(); i++ {
			if err := w(func() error { return fr.WritePing(false, [8]byte{byte(i), byte(i >> 8), byte(i >> 16)}) }); err != nil {
				return err
			}
			sent++
		}
	case "empty": // a call, then empty DATA frames without END_STREAM forever
		blk := headers(enc, &hb)
		if err := w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true})
		}); err != nil {
			return err
		}
		for !ended() {
			if err := w(func() error { return fr.WriteData(1, false, nil) }); err != nil {
				return err
			}
			sent++
		}
	case "priority":
		for i := uint32(1); !ended(); i += 2 {
			if err := w(func() error {
				return fr.WritePriority(i, http2.PriorityParam{StreamDep: i + 2, Weight: 255})
			}); err != nil {
				return err
			}
			sent++
		}
	case "badorder": // HEADERS for a stream id lower than one already used
		blk := headers(enc, &hb)
		_ = w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 101, BlockFragment: blk, EndHeaders: true})
		})
		_ = w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk, EndHeaders: true})
		})
		sent = 2
		select {
		case <-done:
		case <-time.After(time.Until(stop)):
		}
	default:
		return fmt.Errorf("mode %q", *mode)
	}
	return nil
}

var sentTotal atomic.Int64
