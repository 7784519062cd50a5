package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/request"
	"github.com/classifierd/classifierd/server/auth"
)

// TestEdgeRefusesBeforeReadingTheMessage sends, on a raw HTTP/2
// connection to a real gRPC listener with a token file, calls whose
// message declares 1 MiB and sends a first piece of it, as a client that
// wants the daemon to hold its bytes would. Each must be answered (its
// code in the trailers-only response) while the message is still
// incomplete: grpc-go reads a unary message whole before any interceptor
// runs, so a check in the interceptors alone left an unauthenticated
// client holding 4 MiB per stream, on as many streams as it opened, for
// as long as it liked (the hostile pass held 400 MB with 100 streams).
func TestEdgeRefusesBeforeReadingTheMessage(t *testing.T) {
	addr := serveEdge(t, Edge{Timeout: 5 * time.Second, Auth: AuthConfig{Tokens: routeTokens(t)}}, grpc.MaxRecvMsgSize(4<<20))

	for _, tc := range []struct {
		name, method, token, want string
	}{
		{"no token", "/classifier.v1.ClassifierService/Route", "", "16"},
		{"unknown token", "/classifier.v1.ClassifierService/Route", "nope", "16"},
		{"scope missing", "/classifier.v1.ClassifierService/GetStats", "tok-route-0123456789", "7"},
		{"no token, unserved method", "/x.Y/Z", "", "16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := partialCall(t, addr, tc.method, tc.token); got != tc.want {
				t.Fatalf("grpc-status %q while the message was incomplete, want %q", got, tc.want)
			}
		})
	}
}

// routeTokens writes and loads a token file with one token,
// tok-route-0123456789, of the caller "reader" with the route scope.
func routeTokens(t *testing.T) *auth.Tokens {
	t.Helper()
	tokFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokFile, []byte("reader route tok-route-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.Load(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

// serveEdge serves the test index's classifier behind edge (its Log and
// Stats filled in) on a loopback gRPC listener until the test ends, and
// returns the listener's address.
func serveEdge(t *testing.T, edge Edge, opts ...grpc.ServerOption) string {
	t.Helper()
	return serveEdgeWith(t, edge, nil, opts...)
}

// serveEdgeWith is serveEdge, with register adding services (nil: none)
// and the listener counted by edge.Recv when set.
func serveEdgeWith(t *testing.T, edge Edge, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	dom, err := NewDomain(testIndex(t), bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{}, dom, bagOfWords{}, log)
	if err != nil {
		t.Fatal(err)
	}
	edge.Log, edge.Stats = log, srv.Stats()
	gs := grpc.NewServer(append(edge.ServerOptions(), opts...)...)
	pb.RegisterClassifierServiceServer(gs, srv)
	if register != nil {
		register(gs)
	}
	var lis net.Listener
	if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if edge.Recv != nil {
		lis = edge.Recv.Listener(lis)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return addr
}

// partialCall opens an HTTP/2 connection to addr, starts a call of method
// (with token, if any) declaring a 1 MiB message, sends its first 32 KiB
// and returns the grpc-status the server answers before the message is
// complete ("" if none within 10 s).
func partialCall(t *testing.T, addr, method, token string, extra ...[2]string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}}
	if token != "" {
		fields = append(fields, [2]string{"authorization", "Bearer " + token})
	}
	fields = append(fields, extra...)
	for _, f := range fields {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// 32 KiB, in frames of the default 16 KiB, fits the initial 64 KiB
	// flow-control windows: no window update is needed to send it.
	body := make([]byte, 32<<10)
	binary.BigEndian.PutUint32(body[1:5], 1<<20)
	for len(body) > 0 {
		if err := fr.WriteData(1, false, body[:16<<10]); err != nil {
			break // the server may already have answered and ended the stream
		}
		body = body[16<<10:]
	}
	if err := nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "" // no answer: the server is waiting for the rest
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				for _, h := range f.Fields {
					if h.Name == "grpc-status" {
						return h.Value
					}
				}
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "rst " + f.ErrCode.String()
			}
		}
	}
}

func TestTapLabelIsOneOfOurMethods(t *testing.T) {
	for _, tc := range []struct{ method, want string }{
		{"/classifier.v1.ClassifierService/Route", "/classifier.v1.ClassifierService/Route"},
		{"/classifier.v1.ClassifierService/WatchExposure", "/classifier.v1.ClassifierService/WatchExposure"},
		{"/terminal.v1.TerminalService/TrackInputEvent", "/terminal.v1.TerminalService/TrackInputEvent"},
		{"/terminal.v1.TerminalService/Minted123", "unknown"},
		{"/x.Y/Z", "unknown"},
	} {
		if got := tapLabel(tc.method); got != tc.want {
			t.Errorf("tapLabel(%q) = %q, want %q", tc.method, got, tc.want)
		}
	}
}
