package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"math/big"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// rawH2 is a plaintext HTTP/2 client writing frames as a test says.
type rawH2 struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	addr string
	// status is each stream's grpc-status, once answered.
	status map[uint32]string
}

func dialRawH2(t *testing.T, addr string, viaTLS bool) *rawH2 {
	t.Helper()
	var nc net.Conn
	var err error
	if viaTLS {
		nc, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a self-signed test server
	} else {
		nc, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &rawH2{t: t, nc: nc, fr: fr, addr: addr, status: map[uint32]string{}}
}

// call opens stream id for method, with extra header fields.
func (h *rawH2) call(id uint32, method string, extra ...[2]string) {
	h.t.Helper()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range append([][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", h.addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}}, extra...) {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		h.t.Fatal(err)
	}
}

// data sends b on stream id in frames of 16 KiB at most.
func (h *rawH2) data(id uint32, b []byte, end bool) {
	h.t.Helper()
	for {
		n := min(len(b), 16<<10)
		if err := h.fr.WriteData(id, end && n == len(b), b[:n]); err != nil {
			h.t.Fatal(err)
		}
		if b = b[n:]; len(b) == 0 {
			return
		}
	}
}

// sync sends a PING and reads until its ACK (the server has read every
// frame sent before it) and until each of streams is answered.
func (h *rawH2) sync(streams ...uint32) {
	h.t.Helper()
	acked := false
	if err := h.fr.WritePing(false, [8]byte{'s', 'y', 'n', 'c'}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.nc.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		h.t.Fatal(err)
	}
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.t.Fatalf("reading the answers: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := h.fr.WriteSettingsAck(); err != nil {
					h.t.Fatal(err)
				}
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == [8]byte{'s', 'y', 'n', 'c'} {
				acked = true
			}
			if !f.IsAck() {
				if err := h.fr.WritePing(true, f.Data); err != nil {
					h.t.Fatal(err)
				}
			}
		case *http2.RSTStreamFrame:
			if h.status[f.StreamID] == "" {
				h.status[f.StreamID] = "rst " + f.ErrCode.String()
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				if hf.Name == "grpc-status" {
					h.status[f.StreamID] = hf.Value
				}
			}
		}
		if acked && h.answered(streams) {
			return
		}
	}
}

func (h *rawH2) answered(streams []uint32) bool {
	for _, id := range streams {
		if h.status[id] == "" {
			return false
		}
	}
	return true
}

// envelope is a gRPC message of n bytes in all: a GetIndexInfoRequest
// with an unknown field of padding.
func envelope(n int) []byte {
	b := make([]byte, n)
	b[0] = 0
	binary.BigEndian.PutUint32(b[1:5], uint32(n-5))
	msg := b[5:]
	msg[0] = 0x7a // field 15, bytes
	k := binary.PutUvarint(msg[1:], uint64(len(msg)-1-3))
	if k != 3 {
		panic("padding length not 3 bytes")
	}
	return b
}

// TestUnreadDataCounted: the DATA a gRPC connection sends that no call
// reads is counted, to the byte, in plaintext and through TLS: the body
// of a call the taps refused, frames on a stream the server had ended,
// frames of an unknown type. A body a call read is not, whatever its
// size.
func TestUnreadDataCounted(t *testing.T) {
	for _, viaTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "TLS"}[viaTLS], func(t *testing.T) { testUnreadData(t, viaTLS) })
	}
}

func testUnreadData(t *testing.T, viaTLS bool) {
	g := NewRecvGuard(&shareBudget{share: 64 << 20, by: map[string]int64{}})
	rate := &fakeRate{charged: map[string]int64{}}
	var opts []grpc.ServerOption
	if viaTLS {
		cert := selfSignedCert(t)
		opts = append(opts, grpc.Creds(FrameCounting(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))))
	}
	addr := serveEdge(t, Edge{Timeout: 30 * time.Second, Recv: g, BodyRate: rate, MaxConcurrentStreams: 64}, opts...)
	const method = "/classifier.v1.ClassifierService/GetIndexInfo"
	h := dialRawH2(t, addr, viaTLS)
	h.sync()
	want := int64(0)
	check := func(what string) {
		t.Helper()
		if got := g.UnreadData(); got != want {
			t.Fatalf("%s: %d bytes unread, want %d", what, got, want)
		}
	}

	// Refused from its headers: its whole body is unread.
	rate.mu.Lock()
	rate.past = true
	rate.mu.Unlock()
	h.call(1, method)
	h.data(1, envelope(40_000), true)
	h.sync(1)
	if h.status[1] != "8" {
		t.Fatalf("call past its rate: grpc-status %q, want 8", h.status[1])
	}
	want += 40_000
	check("a refused call's body")

	// Answered: its body was read.
	rate.mu.Lock()
	rate.past = false
	rate.mu.Unlock()
	h.call(3, method)
	h.data(3, envelope(40_000), true)
	h.sync(3)
	if h.status[3] != "0" {
		t.Fatalf("answered call: grpc-status %q, want 0", h.status[3])
	}
	check("an answered call's body")

	// Ended by the server while the client was still to send its message
	// (its deadline passed): what comes on it after is read by no call.
	h.call(5, method, [2]string{"grpc-timeout", "300m"})
	h.sync(5)
	if h.status[5] != "4" && h.status[5] != "rst CANCEL" {
		t.Fatalf("call past its deadline: grpc-status %q, want 4 or a RST_STREAM (CANCEL)", h.status[5])
	}
	h.data(5, make([]byte, 20_000), false)
	h.sync()
	want += 20_000
	check("DATA after the server ended its stream")

	// Frames of an unknown type: grpc-go reads and drops them.
	for range 2 {
		if err := h.fr.WriteRawFrame(0x20, 0, 0, make([]byte, 10_000)); err != nil {
			t.Fatal(err)
		}
	}
	h.sync()
	want += 20_000
	check("frames of an unknown type")
	if g.EarlyResetCloses() != 0 {
		t.Fatalf("%d connections closed", g.EarlyResetCloses())
	}
}

// selfSignedCert makes a P-256 certificate for 127.0.0.1.
func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestSecondMessageForgottenAndCharged: a call that sends two request
// messages to a method that takes one is refused by grpc-go after it
// decoded the second, before any interceptor: what the codec kept of it
// is taken when the call ends and charged to the caller's rate of bytes.
// Kept, it grew the live heap ~12 KB a call (the thirty-first hostile
// pass), and the second messages were charged to no rate.
func TestSecondMessageForgottenAndCharged(t *testing.T) {
	rate := &fakeRate{charged: map[string]int64{}}
	addr := serveEdge(t, Edge{Timeout: 30 * time.Second, BodyRate: rate})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The second message: GetIndexInfoRequest's bytes with one field it
	// does not have, 20,000 bytes of it.
	second := &pb.GetIndexInfoRequest{}
	second.ProtoReflect().SetUnknown(envelope(20_005)[5:])
	const calls = 50
	for i := range calls {
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/classifier.v1.ClassifierService/GetIndexInfo")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&pb.GetIndexInfoRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(second); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if err := st.RecvMsg(&pb.GetIndexInfoResponse{}); status.Code(err) == codes.OK {
			t.Fatalf("call %d: two messages answered, want refused", i)
		}
	}
	// The last call's End may come just after its answer.
	deadline := time.Now().Add(10 * time.Second)
	for rate.total() < calls*20_000 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := rate.total(); got < calls*20_000 || got > calls*20_100 {
		t.Fatalf("%d calls with a second message of 20,000 bytes charged %d bytes, want about %d", calls, got, calls*20_000)
	}
}

// TestSecondMessageHeldToTheBudget: after a unary call's message, grpc-go
// reads on to refuse a second one, and buffers what comes of it: the
// call counts as receiving until its handler starts, so those bytes are
// held to the connection's share of the body budget. Counted only until
// its message was in, a second message's bytes (up to its declared MiB a
// stream) were held by no budget until the receive timeout.
func TestSecondMessageHeldToTheBudget(t *testing.T) {
	g := NewRecvGuard(&shareBudget{share: 32 << 10, by: map[string]int64{}})
	h := dialRawH2(t, serveEdge(t, Edge{Timeout: 30 * time.Second, Recv: g}), false)
	h.sync()
	h.call(1, "/classifier.v1.ClassifierService/GetIndexInfo")
	// An empty message, then a second declaring 1 MiB.
	h.data(1, []byte{0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0}, false)
	time.Sleep(200 * time.Millisecond) // the first is handed on, the second awaited
	h.data(1, make([]byte, 40<<10), false)
	if awaitEnd(t, h, 10*time.Second) == "" {
		t.Fatalf("40 KiB of a second message past a 32 KiB share: no answer")
	}
	if h.status[1] == "0" {
		t.Fatalf("a call with a second message answered OK")
	}
}

// TestStreamedMessageHeldToTheBudget: a call of a method that takes a
// stream of messages (gRPC reflection) receives again while it waits for
// its next message: what of it has arrived is held to the connection's
// share of the body budget. Counted only until its first message, a
// second declaring 4 MiB and sent all but its last byte was held by
// nothing, for as long as the client liked (the thirty-second hostile
// pass: +2.2 GB).
func TestStreamedMessageHeldToTheBudget(t *testing.T) {
	addr, _ := reflectionServer(t, 32<<10, 0)
	h := dialRawH2(t, addr, false)
	h.sync()
	h.call(1, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	// list_services, answered; then a second request declaring 1 MiB.
	h.data(1, []byte{0, 0, 0, 0, 2, 0x3a, 0}, false)
	awaitAnswer(t, h)
	h.data(1, []byte{0, 0, 0x10, 0, 0}, false)
	h.data(1, make([]byte, 40<<10), false)
	if awaitEnd(t, h, 10*time.Second) == "" {
		t.Fatalf("40 KiB of a streamed message past a 32 KiB share: no answer")
	}
	if h.status[1] == "0" {
		t.Fatalf("a stream holding 40 KiB of a message answered OK")
	}
}

// reflectionServer serves the test classifier and gRPC reflection behind
// a RecvGuard of share bytes a connection, with recvTimeout.
func reflectionServer(t *testing.T, share int64, recvTimeout time.Duration) (string, *shareBudget) {
	t.Helper()
	b := &shareBudget{share: share, by: map[string]int64{}}
	edge := Edge{Timeout: 30 * time.Second, Recv: NewRecvGuard(b), RecvTimeout: recvTimeout}
	return serveEdgeWith(t, edge, func(gs *grpc.Server) { reflection.Register(gs) }), b
}

// total is what b holds, every holder together.
func (b *shareBudget) total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, v := range b.by {
		n += v
	}
	return n
}

// awaitEnd reads h's frames until stream 1 ends, and returns how.
func awaitEnd(t *testing.T, h *rawH2, within time.Duration) string {
	t.Helper()
	if err := h.nc.SetReadDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	for h.status[1] == "" {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return ""
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				if hf.Name == "grpc-status" && f.StreamID == 1 {
					h.status[1] = hf.Value
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				h.status[1] = "rst " + f.ErrCode.String()
			}
		}
	}
	return h.status[1]
}

// awaitAnswer reads h's frames until stream 1 is answered a message
// (list_services), failing the test if none comes within 10 s.
func awaitAnswer(t *testing.T, h *rawH2) {
	t.Helper()
	if err := h.nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("list_services: no answer (%v)", err)
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
			return
		}
	}
}

// TestStreamedMessageWithTheFirst: a reflection stream's second message
// sent in one burst with the first (before the first is handed on) is
// held to the budget for as long as it waits, and cut past the share.
// Charged only while the first was awaited, it was given back with it
// and held by nothing (the thirty-third hostile pass: 64 KiB a
// connection).
func TestStreamedMessageWithTheFirst(t *testing.T) {
	burst := append([]byte{0, 0, 0, 0, 2, 0x3a, 0}, 0, 0, 0x10, 0, 0)
	burst = append(burst, make([]byte, 40<<10)...)
	addr, b := reflectionServer(t, 64<<20, 0)
	h := dialRawH2(t, addr, false)
	h.sync()
	h.call(1, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	h.data(1, burst, false)
	// Once the first request is answered it was handed on: what the
	// connection held while awaiting it was given back.
	awaitAnswer(t, h)
	// The rest of the burst may still be being read: charged as it is.
	for deadline := time.Now().Add(5 * time.Second); b.total() < 40<<10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if held := b.total(); held < 40<<10 {
		t.Fatalf("a second message's 40 KiB waiting on its stream: %d bytes held by the budget, want them all", held)
	}
	addr, _ = reflectionServer(t, 32<<10, 0)
	h = dialRawH2(t, addr, false)
	h.sync()
	h.call(1, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	h.data(1, burst, false)
	if got := awaitEnd(t, h, 10*time.Second); got == "" || got == "0" {
		t.Fatalf("40 KiB of a second message sent with the first, past a 32 KiB share: %q, want the call cut", got)
	}
}

// TestStreamedMessageTimedOut: a reflection stream's message begun must
// arrive within the receive timeout, as a first message must.
func TestStreamedMessageTimedOut(t *testing.T) {
	addr, _ := reflectionServer(t, 64<<20, 300*time.Millisecond)
	h := dialRawH2(t, addr, false)
	h.sync()
	h.call(1, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	h.data(1, []byte{0, 0, 0, 0, 2, 0x3a, 0}, false)
	h.data(1, append([]byte{0, 0, 0, 0x10, 0}, make([]byte, 1000)...), false)
	if got := awaitEnd(t, h, 10*time.Second); got == "" || got == "0" {
		t.Fatalf("a second message 1,000 bytes of 4,096 for 10 s: %q, want the call ended at the 300 ms receive timeout", got)
	}
}

// TestIdleReflectionStreamHoldsNothing: an idle reflection stream holds
// nothing of its connection's other calls: with one open, 40 Routes of
// 20 KB on the same channel (800 KB, past a 256 KiB share) are answered,
// and the stream answers again after them. Counted as receiving while
// it waited, it made its connection hold everything read after it, and
// the calls were cut (the thirty-third hostile pass).
func TestIdleReflectionStreamHoldsNothing(t *testing.T) {
	addr, _ := reflectionServer(t, 256<<10, 10*time.Second)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list := &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}
	if err := rc.Send(list); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Recv(); err != nil {
		t.Fatal(err)
	}
	c := pb.NewClassifierServiceClient(conn)
	padded := &pb.GetIndexInfoRequest{}
	padded.ProtoReflect().SetUnknown(envelope(20_005)[5:])
	for i := range 40 {
		if _, err := c.GetIndexInfo(ctx, padded); err != nil {
			t.Fatalf("call %d beside an idle reflection stream: %v", i, err)
		}
	}
	if err := rc.Send(list); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Recv(); err != nil {
		t.Fatalf("the reflection stream after the calls: %v", err)
	}
}
