// Package probe holds what the hostile passes' Go probes under tools/hostile
// share: the TLS client configuration (ALPN h2, certificate not verified), the
// start of an HTTP/2 client connection, a frame-reading loop that answers
// SETTINGS (and PING), the header fields of a request, a tally of answers
// printed one line a kind, and the CPU seconds and load average a probe
// prints. The probes themselves are cited as reproduction commands by
// docs/operations.md and tools/hostile/*.md, so their flags and output stay
// theirs; only the logic that was the same in several of them lives here.
package probe

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TLSConfig is the client configuration of a probe against a test daemon
// with a self-signed certificate: ALPN h2, the certificate not verified.
func TLSConfig() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}} //nolint:gosec // a probe against a self-signed test daemon
}

// DialTLS dials addr over TLS with TLSConfig, with d (nil: a zero Dialer).
func DialTLS(d *net.Dialer, addr string) (*tls.Conn, error) {
	if d == nil {
		d = new(net.Dialer)
	}
	return tls.DialWithDialer(d, "tcp", addr, TLSConfig())
}

// Start begins an HTTP/2 client connection on nc: it writes the client
// preface and one SETTINGS frame carrying settings, and returns a framer on
// nc. With tableSize > 0 the framer decodes header blocks (ReadMetaHeaders,
// an HPACK table of tableSize bytes); with 0 it returns raw HEADERS frames.
func Start(nc net.Conn, tableSize uint32, settings ...http2.Setting) (*http2.Framer, error) {
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	fr := http2.NewFramer(nc, nc)
	if tableSize > 0 {
		fr.ReadMetaHeaders = hpack.NewDecoder(tableSize, nil)
	}
	if err := fr.WriteSettings(settings...); err != nil {
		return nil, err
	}
	return fr, nil
}

// BigWindow is the SETTINGS entry most probes announce: a 1 GiB initial
// stream window, so that the server's answers are never held back.
var BigWindow = http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}

// ReadLoop reads frames from fr until a read fails, and returns that error.
// It acknowledges every SETTINGS frame that is not an ACK and, with pong,
// answers every PING that is not an ACK, writing under wmu; then it hands
// each frame (those too) to handle.
func ReadLoop(fr *http2.Framer, wmu *sync.Mutex, pong bool, handle func(http2.Frame)) error {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				wmu.Lock()
				_ = fr.WriteSettingsAck()
				wmu.Unlock()
			}
		case *http2.PingFrame:
			if pong && !f.IsAck() {
				wmu.Lock()
				_ = fr.WritePing(true, f.Data)
				wmu.Unlock()
			}
		}
		handle(f)
	}
}

// Head returns the header fields that open the probes' requests, in their
// order: :method, :scheme, :path, :authority, content-type and te: trailers.
func Head(method, scheme, path, authority, ctype string) []hpack.HeaderField {
	return []hpack.HeaderField{{Name: ":method", Value: method}, {Name: ":scheme", Value: scheme}, {Name: ":path", Value: path},
		{Name: ":authority", Value: authority}, {Name: "content-type", Value: ctype}, {Name: "te", Value: "trailers"}}
}

// Bearer returns the authorization field for token, or none for "".
func Bearer(token string) []hpack.HeaderField {
	if token == "" {
		return nil
	}
	return []hpack.HeaderField{{Name: "authorization", Value: "Bearer " + token}}
}

// WriteFields encodes fields with enc, in order.
func WriteFields(enc *hpack.Encoder, fields []hpack.HeaderField) {
	for _, f := range fields {
		_ = enc.WriteField(f)
	}
}

// Block empties hb (the output of enc), encodes fields and returns a copy of
// the header block.
func Block(enc *hpack.Encoder, hb *bytes.Buffer, fields []hpack.HeaderField) []byte {
	hb.Reset()
	WriteFields(enc, fields)
	return append([]byte(nil), hb.Bytes()...)
}

// Tally counts answers by kind, safe for concurrent use.
type Tally struct{ m sync.Map }

// Count adds one to kind k.
func (t *Tally) Count(k string) {
	v, _ := t.m.LoadOrStore(k, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// Print writes one line a kind to w: the count right-aligned in width
// columns, two spaces, the kind.
func (t *Tally) Print(w io.Writer, width int) {
	t.m.Range(func(k, v any) bool {
		fmt.Fprintf(w, "%*d  %s\n", width, v.(*atomic.Int64).Load(), k)
		return true
	})
}

// CPUSeconds is the user and system CPU time, in seconds, of process pid
// (from /proc/PID/stat; 0 when it cannot be read), or of this process for "".
func CPUSeconds(pid string) float64 {
	if pid == "" {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var u, s float64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return (u + s) / 100
}

// LoadAvg is the one-minute load average, as /proc/loadavg writes it.
func LoadAvg() string {
	load, _ := os.ReadFile("/proc/loadavg")
	return strings.Fields(string(load))[0]
}

// UniqueQuery is a query of size bytes no other call sends (a random word
// repeated with " word "), so that no cache of the daemon answers it.
func UniqueQuery(size int) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	w := hex.EncodeToString(b)
	return strings.Repeat(w+" word ", size/(len(w)+6)+1)[:size]
}

// Meter measures a probe's run from its start: the time, the probe's own
// CPU and a daemon's (pid; none for "").
type Meter struct {
	pid    string
	t0     time.Time
	c0, d0 float64
}

// Measure starts a Meter now.
func Measure(pid string) Meter {
	return Meter{pid: pid, t0: time.Now(), c0: CPUSeconds(""), d0: CPUSeconds(pid)}
}

// End is secs after the meter's start.
func (m Meter) End(secs float64) time.Time {
	return m.t0.Add(time.Duration(secs * float64(time.Second)))
}

// Figures are the seconds since the start, the probe's CPU seconds and
// the daemon's in them, and the daemon's over the probe's (0 when the
// probe used none).
func (m Meter) Figures() (secs, client, daemon, ratio float64) {
	client, daemon = CPUSeconds("")-m.c0, CPUSeconds(m.pid)-m.d0
	if client > 0 {
		ratio = daemon / client
	}
	return time.Since(m.t0).Seconds(), client, daemon, ratio
}
