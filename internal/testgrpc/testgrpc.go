// Package testgrpc is gRPC test support: a server served in memory over
// bufconn with a client connection to it (Serve), and the first change an
// exposure watch sees (FirstChange), for tests of the daemon's edge and of
// its clients.
package testgrpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// Serve serves gs on an in-memory listener (bufconn) and returns a client
// connection to it; when t ends the connection is closed, then gs
// stopped.
func Serve(t testing.TB, gs *grpc.Server) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// FirstChange returns the first change w, a watch of session id, receives,
// or its error: it changes the session's exposure (github, then
// filesystem, in turn) every interval until w receives. A watch is
// registered some time after the call that opens it returns, so one
// change made at once could be missed.
func FirstChange(ctx context.Context, c pb.ClassifierServiceClient, id string, w grpc.ServerStreamingClient[pb.WatchExposureResponse], every time.Duration) (*pb.WatchExposureResponse, error) {
	seen := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			cats := []string{"github", "filesystem"}[i%2 : i%2+1]
			_, _ = c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: id, Categories: cats, Mode: "replacement"})
			select {
			case <-seen:
				return
			case <-time.After(every):
			}
		}
	}()
	r, err := w.Recv()
	close(seen)
	return r, err
}
