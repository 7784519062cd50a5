package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// TestEdgeRefusesOverloadBeforeReadingTheMessage runs a real gRPC
// listener with a token file and an admission whose one place is taken by
// a call expected to run for a second. A Route with a 1 s deadline of its
// own could not fit (a second's wait and a second's service in 0.4 s), so
// the tap refuses it with RESOURCE_EXHAUSTED while its message is still
// incomplete: before grpc-go starts its goroutine or reads its message.
// The same call without a token is told UNAUTHENTICATED, not
// RESOURCE_EXHAUSTED: authentication goes first.
func TestEdgeRefusesOverloadBeforeReadingTheMessage(t *testing.T) {
	adm := NewAdmission(AdmissionConfig{MaxInFlight: 1, MaxQueue: 10, DeadlineShare: 0.4})
	adm.mu.Lock()
	adm.cost.observe(100, float64(time.Second)) // calls take a second
	adm.mu.Unlock()
	release, err := adm.admit(WithCaller(context.Background(), Caller{Name: "reader", Quota: "token:reader"}), "m", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	addr := serveEdge(t, Edge{Timeout: 5 * time.Second, Auth: AuthConfig{Tokens: routeTokens(t)}, Admission: adm}, grpc.MaxRecvMsgSize(4<<20))

	deadline := [2]string{"grpc-timeout", "1000m"}
	for _, tc := range []struct{ name, token, want string }{
		{"token, no room before its deadline", "tok-route-0123456789", "8"},
		{"no token", "", "16"},
		{"unknown token", "nope", "16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := partialCall(t, addr, "/classifier.v1.ClassifierService/Route", tc.token, deadline); got != tc.want {
				t.Fatalf("grpc-status %q while the message was incomplete, want %q", got, tc.want)
			}
		})
	}
	if n := adm.Flows(); n != 1 {
		t.Fatalf("%d active flows after the refusals, want 1 (the running call's)", n)
	}
}

// TestEdgeLearnsTheDispatchDelayBeforeTheMessage sends a Route whose
// message follows its headers 300 ms later, through a real listener and
// client: the return margin is learnt from the call's goroutine starting,
// before its message is read, so a slow sender does not make the daemon
// keep 600 ms of every caller's deadline for the way back.
func TestEdgeLearnsTheDispatchDelayBeforeTheMessage(t *testing.T) {
	adm := NewAdmission(AdmissionConfig{MaxInFlight: 4, MaxQueue: 10})
	addr := serveEdge(t, Edge{Timeout: 5 * time.Second, Admission: adm})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/classifier.v1.ClassifierService/Route")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cs.SendMsg(&pb.RouteRequest{Query: "list my github issues"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var resp pb.RouteResponse
	if err := cs.RecvMsg(&resp); err != nil {
		t.Fatalf("Route: %v", err)
	}
	if m := adm.ReturnMargin(); m >= 300*time.Millisecond {
		t.Fatalf("return margin %v after one call whose message came 300ms after its headers, want the dispatch delay alone", m)
	}
}
