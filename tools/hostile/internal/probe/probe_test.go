package probe

import (
	"bytes"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// server reads the client preface from c and returns a framer for the
// server's side of the connection.
func server(t *testing.T, c net.Conn) *http2.Framer {
	t.Helper()
	p := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, p); err != nil || string(p) != http2.ClientPreface {
		t.Fatalf("preface %q, %v", p, err)
	}
	return http2.NewFramer(c, c)
}

func TestStartWritesPrefaceAndSettings(t *testing.T) {
	cli, srv := net.Pipe()
	defer cli.Close()
	defer srv.Close()
	errc := make(chan error, 1)
	go func() { _, err := Start(cli, 4096, BigWindow); errc <- err }()
	f, err := server(t, srv).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingInitialWindowSize); !ok || v != 1<<30 || sf.NumSettings() != 1 {
		t.Fatalf("settings %v", sf)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestReadLoop: SETTINGS are acknowledged, PINGs answered only with pong,
// every frame reaches the handler, and the loop ends with the read error.
func TestReadLoop(t *testing.T) {
	for _, pong := range []bool{false, true} {
		cli, srv := net.Pipe()
		var got []http2.FrameType
		var wmu sync.Mutex
		errc := make(chan error, 1)
		go func() {
			fr, err := Start(cli, 4096)
			if err != nil {
				errc <- err
				return
			}
			errc <- ReadLoop(fr, &wmu, pong, func(f http2.Frame) { got = append(got, f.Header().Type) })
		}()
		sfr := server(t, srv)
		if f, err := sfr.ReadFrame(); err != nil || f.Header().Type != http2.FrameSettings {
			t.Fatalf("client's SETTINGS: %v %v", f, err)
		}
		if err := sfr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		if f, err := sfr.ReadFrame(); err != nil || !f.(*http2.SettingsFrame).IsAck() {
			t.Fatalf("want a SETTINGS ACK, got %v %v", f, err)
		}
		if err := sfr.WritePing(false, [8]byte{7}); err != nil {
			t.Fatal(err)
		}
		if pong {
			f, err := sfr.ReadFrame()
			if p, ok := f.(*http2.PingFrame); err != nil || !ok || !p.IsAck() || p.Data != [8]byte{7} {
				t.Fatalf("want a PING ACK, got %v %v", f, err)
			}
		}
		srv.Close()
		if err := <-errc; err == nil {
			t.Fatal("ReadLoop ended without an error")
		}
		want := []http2.FrameType{http2.FrameSettings, http2.FramePing}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("pong %v: handler saw %v, want %v", pong, got, want)
		}
		cli.Close()
	}
}

func TestHeadBearerBlock(t *testing.T) {
	f := append(Head("POST", "https", "/p", "h:1", "application/grpc"), Bearer("tok")...)
	var names []string
	for _, x := range f {
		names = append(names, x.Name+"="+x.Value)
	}
	want := ":method=POST :scheme=https :path=/p :authority=h:1 content-type=application/grpc te=trailers authorization=Bearer tok"
	if strings.Join(names, " ") != want {
		t.Fatalf("fields %q\nwant %q", strings.Join(names, " "), want)
	}
	if Bearer("") != nil {
		t.Fatal("Bearer(\"\") is not empty")
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	blk := Block(enc, &hb, f)
	dec, err := hpack.NewDecoder(4096, nil).DecodeFull(blk)
	if err != nil || len(dec) != len(f) || dec[6].Value != "Bearer tok" {
		t.Fatalf("decoded %v, %v", dec, err)
	}
	blk2 := Block(enc, &hb, f[:1])
	if len(blk2) != 1 { // :method POST is entry 3 of the static table: one byte
		t.Fatalf("Block did not reset its buffer: %d bytes for one indexed field", len(blk2))
	}
}

func TestTallyPrint(t *testing.T) {
	var ta Tally
	ta.Count("a")
	ta.Count("a")
	var b bytes.Buffer
	ta.Print(&b, 10)
	if b.String() != "         2  a\n" {
		t.Fatalf("%q", b.String())
	}
}

func TestCPUSeconds(t *testing.T) {
	if CPUSeconds(strconv.Itoa(os.Getpid())) < 0 || CPUSeconds("") < 0 {
		t.Fatal("negative CPU time")
	}
	if v := CPUSeconds("no-such-pid"); v != 0 {
		t.Fatalf("unreadable stat gave %v", v)
	}
	if _, err := strconv.ParseFloat(LoadAvg(), 64); err != nil {
		t.Fatal(err)
	}
}

func TestUniqueQuery(t *testing.T) {
	a, b := UniqueQuery(100), UniqueQuery(100)
	if len(a) != 100 || len(b) != 100 || a == b || len(UniqueQuery(3)) != 3 {
		t.Fatalf("%q %q", a, b)
	}
}

// TestMeter: a probe measuring itself as the daemon (its own pid) sees
// the same CPU on both sides, so a ratio of about 1, and its end is the
// start plus secs.
func TestMeter(t *testing.T) {
	m := Measure(strconv.Itoa(os.Getpid()))
	if got := m.End(1.5).Sub(m.t0); got != 1500*time.Millisecond {
		t.Fatalf("End(1.5) is %v after the start", got)
	}
	for x := 0; CPUSeconds("")-m.c0 < 0.05; x++ {
		_ = strconv.Itoa(x)
	}
	secs, client, daemon, ratio := m.Figures()
	if secs <= 0 || client < 0.05 || daemon < 0.04 || ratio < 0.5 || ratio > 2 {
		t.Fatalf("secs %.3f, client %.3f, daemon %.3f, ratio %.2f; want the same CPU on both sides", secs, client, daemon, ratio)
	}
}
