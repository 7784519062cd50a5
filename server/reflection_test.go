package server

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// endlessStream is a stream whose client sends requests for ever.
type endlessStream struct{ grpc.ServerStream }

func (endlessStream) RecvMsg(any) error { return nil }

// TestReflectionStreamBounded: one reflection stream answers at most
// MaxReflectionRequests requests (the thirteenth hostile pass sent 34,534
// on one), then ends RESOURCE_EXHAUSTED; other streams are not counted.
func TestReflectionStreamBounded(t *testing.T) {
	for _, tc := range []struct {
		method string
		bound  bool
	}{
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true},
		{"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", true},
		{"/classifier.v1.ClassifierService/Other", false},
	} {
		const sent = MaxReflectionRequests + 100
		n := 0
		err := boundReflection(nil, endlessStream{}, &grpc.StreamServerInfo{FullMethod: tc.method}, func(_ any, ss grpc.ServerStream) error {
			for n < sent {
				if err := ss.RecvMsg(nil); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if tc.bound && (n != MaxReflectionRequests || status.Code(err) != codes.ResourceExhausted) {
			t.Errorf("%s: %d requests read, %v; want %d then RESOURCE_EXHAUSTED", tc.method, n, err, MaxReflectionRequests)
		}
		if !tc.bound && (n != sent || err != nil) {
			t.Errorf("%s: %d requests read, %v; want all %d", tc.method, n, err, sent)
		}
	}
}
