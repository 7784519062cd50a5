package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestGRPCStreamsBounded speaks raw HTTP/2 to the real daemon, as the
// hostile pass's h2bomb does: the server must announce
// --max-concurrent-streams in its SETTINGS, and a call whose request
// message declares 1 MiB but sends 100 bytes must be ended with
// DEADLINE_EXCEEDED after --recv-timeout, not held (gRPC reserves the
// declared length while it waits: 20 such streams held +66 MB for as long
// as the client liked).
func TestGRPCStreamsBounded(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	d, _ := startDaemon(t, idx, "--recv-timeout", "1s", "--max-concurrent-streams", "4")
	nc, fr := rawH2(t, d.addr)
	defer nc.Close()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	const streams = 3
	start := time.Now()
	for s := uint32(0); s < streams; s++ {
		hb.Reset()
		encodeRouteHead(enc, d.addr)
		id := 2*s + 1
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 5+100)
		binary.BigEndian.PutUint32(body[1:5], 1<<20)
		if err := fr.WriteData(id, false, body); err != nil {
			t.Fatal(err)
		}
	}
	var maxStreams uint32
	status := map[uint32]string{}
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for len(status) < streams {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v: %v; max streams %d, ended %v: a stream whose message never arrives is held",
				time.Since(start).Round(time.Millisecond), err, maxStreams, status)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok && !f.IsAck() {
				maxStreams = v
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if v := f.PseudoValue("status"); v != "" && v != "200" {
				status[f.StreamID] = "http " + v
			}
			for _, h := range f.Fields {
				if h.Name == "grpc-status" {
					status[f.StreamID] = h.Value
				}
			}
		case *http2.RSTStreamFrame:
			if _, ok := status[f.StreamID]; !ok { // after the trailers: the client never ended its half
				status[f.StreamID] = "rst " + f.ErrCode.String()
			}
		}
	}
	if maxStreams != 4 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want 4", maxStreams)
	}
	for id, st := range status {
		if st != "4" { // DEADLINE_EXCEEDED
			t.Errorf("stream %d ended with %q, want grpc-status 4 (DEADLINE_EXCEEDED)", id, st)
		}
	}
	t.Logf("%d held streams ended after %v", streams, time.Since(start).Round(time.Millisecond))
}

// rawH2 dials addr and opens an HTTP/2 connection by hand (the preface,
// a SETTINGS frame with settings), for tests that send what no client
// library would.
func rawH2(t *testing.T, addr string, settings ...http2.Setting) (net.Conn, *http2.Framer) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return nc, fr
}

// encodeRouteHead encodes the head of a gRPC Route call to authority
// with enc, without a token.
func encodeRouteHead(enc *hpack.Encoder, authority string) {
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/classifier.v1.ClassifierService/Route"},
		{":authority", authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
}

// TestGRPCCompressedRefused: a request whose message is compressed is
// refused UNIMPLEMENTED before any of it is inflated, with no token (the
// ninth hostile pass: a 3,923-byte gzip health Check inflated to 4 MB,
// counted at its wire size; 952 such calls: RSS 223 → 825 MB). The
// OpenTelemetry exporter linked into the daemon registers gzip with
// grpc-go, which made every listener accept it.
func TestGRPCCompressedRefused(t *testing.T) {
	idx := genIndex(t, "testdata/mini.json")
	d, _ := startDaemon(t, idx)
	nc, fr := rawH2(t, d.addr)
	defer nc.Close()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", d.addr}, {"content-type", "application/grpc"}, {"te", "trailers"}, {"grpc-encoding", "gzip"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(append([]byte{0x0a, 0x80, 0x80, 0x40}, make([]byte, 1<<20)...)) // field 1, a 1 MiB string of zeros
	_ = zw.Close()
	msg := make([]byte, 5, 5+z.Len())
	msg[0] = 1 // compressed
	binary.BigEndian.PutUint32(msg[1:5], uint32(z.Len()))
	if err := fr.WriteData(1, true, append(msg, z.Bytes()...)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no grpc-status for the compressed call: %v", err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			for _, h := range f.Fields {
				if h.Name == "grpc-status" {
					if h.Value != "12" { // UNIMPLEMENTED
						t.Fatalf("compressed health Check ended grpc-status %s (%s), want 12 (UNIMPLEMENTED)", h.Value, f.Fields)
					}
					return
				}
			}
		}
	}
}
