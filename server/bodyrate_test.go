package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/request"
)

// fakeRate records what is charged to it, and is past its rate once
// told so.
type fakeRate struct {
	mu      sync.Mutex
	charged map[string]int64
	past    bool
}

func (f *fakeRate) Past(string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.past {
		return time.Second
	}
	return 0
}

func (f *fakeRate) Charge(who string, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.charged[who] += n
}

func (f *fakeRate) total() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, v := range f.charged {
		n += v
	}
	return n
}

// rawCodec sends a request's bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestEdgeBodyRates: on the gRPC listener every request message is
// charged to Edge.BodyRate by its size, one refused INVALID_ARGUMENT
// (here for its unknown fields, before decoding) to Edge.BadBodies as
// well, under the caller's key; a caller past either rate is refused
// RESOURCE_EXHAUSTED as its headers arrive, its message unread (the
// twenty-sixth and twenty-seventh hostile passes: --listen had neither
// rate, refused and padded messages at 3.2 and 4.0 times the client's
// CPU, unknown fields at 12.3).
func TestEdgeBodyRates(t *testing.T) {
	all, bad := &fakeRate{charged: map[string]int64{}}, &fakeRate{charged: map[string]int64{}}
	addr := serveEdge(t, Edge{BodyRate: all, BadBodies: bad})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := pb.NewClassifierServiceClient(conn).GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	var groups []byte
	for range MaxUnknownFields + 1 {
		groups = protowire.AppendTag(groups, 15, protowire.StartGroupType)
		groups = protowire.AppendTag(groups, 15, protowire.EndGroupType)
	}
	var out []byte
	err = conn.Invoke(ctx, "/classifier.v1.ClassifierService/GetIndexInfo", &groups, &out, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("%d unknown groups: %v, want INVALID_ARGUMENT", MaxUnknownFields+1, err)
	}
	if n, want := bad.total(), int64(len(groups)+ValueCost*(MaxUnknownFields+1)); n != want {
		t.Fatalf("refused message of %d bytes, %d fields counted: %d charged as refused, want %d", len(groups), MaxUnknownFields+1, n, want)
	}
	// A message that decodes weighs its values as well as its bytes:
	// decoding costs per value (the twenty-seventh pass: 64 KiB of
	// two-byte fields 3.9 times the client's CPU, one field 1.9).
	req := &pb.AnalyzePromptRequest{Prompt: "x", ValidCategories: make([]string, 500)}
	for i := range req.ValidCategories {
		req.ValidCategories[i] = "c"
	}
	before := all.total()
	_, _ = pb.NewClassifierServiceClient(conn).AnalyzePrompt(ctx, req)
	size := int64(proto.Size(req))
	if got, least := all.total()-before, size+ValueCost*501; got < least || got > least+ValueCost*8 {
		t.Fatalf("a message of %d bytes and 501 values charged %d, want %d (its bytes and %d for each value)", size, got, least, ValueCost)
	}
	if n := all.total(); n < int64(len(groups)) {
		t.Fatalf("%d bytes charged in all, want at least %d", n, len(groups))
	}
	all.mu.Lock()
	all.past = true
	all.mu.Unlock()
	before = bad.total()
	_, err = pb.NewClassifierServiceClient(conn).GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("past the rate: %v, want RESOURCE_EXHAUSTED", err)
	}
	if bad.total() != before {
		t.Fatalf("a call refused at its headers was charged")
	}
}

// TestBodyRateRefusalsKeepTheConnection: a caller past its rate of
// request bytes has its calls refused RESOURCE_EXHAUSTED at their
// headers, however many, and its connection is kept: a gateway forwards
// several users' calls over one channel, and closing it for one user's
// refusals cut the others' calls in flight (the thirtieth hostile pass:
// 141 of 190 of another identity's Routes UNAVAILABLE); nor is the peer
// penalized (the twenty-ninth: every local client's new connections
// held). Once the rate has room the same connection is answered.
func TestBodyRateRefusalsKeepTheConnection(t *testing.T) {
	g := NewRecvGuard(&shareBudget{share: 1 << 20, by: map[string]int64{}})
	all := &fakeRate{charged: map[string]int64{}, past: true}
	dom, err := NewDomain(testIndex(t), bagOfWords{}, request.Limits{MaxTextBytes: maxTextBytes, MaxMessages: 4})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{}, dom, bagOfWords{}, log)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(Edge{Log: log, Stats: srv.Stats(), Timeout: 30 * time.Second, Recv: g, BodyRate: all}.ServerOptions()...)
	pb.RegisterClassifierServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(g.Listener(lis)) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 512
	for i := range n {
		if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call %d past the rate: %v, want RESOURCE_EXHAUSTED on the same connection", i, err)
		}
	}
	if g.EarlyResetCloses() != 0 || g.PenalizedPeers() != 0 {
		t.Fatalf("%d refusals for the byte rate: %d connections closed, %d peers penalized, want none", n, g.EarlyResetCloses(), g.PenalizedPeers())
	}
	all.mu.Lock()
	all.past = false
	all.mu.Unlock()
	if _, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{}); err != nil {
		t.Fatalf("the rate with room again: %v, want the call answered", err)
	}
}
