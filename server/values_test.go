package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// TestRequestCodecCountsValues: a request of MaxValues values decodes; one
// more is refused INVALID_ARGUMENT before decoding (nothing decoded), and a
// request that does not parse keeps its own error.
func TestRequestCodecCountsValues(t *testing.T) {
	route := func(n int) []byte {
		m := &pb.RouteRequest{Query: "x"}
		for range n {
			m.Messages = append(m.Messages, &pb.Message{})
		}
		b, _ := proto.Marshal(m)
		return b
	}
	c := newRequestCodec()
	for _, tc := range []struct {
		name string
		body []byte
		want string // in the error; "" decodes
	}{
		{"at the limit", route(MaxValues - 1), ""},
		{"past the limit", route(MaxValues), "values"},
		{"does not parse", []byte{0xff, 0xff}, "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m pb.RouteRequest
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.body)}, &m); err != nil {
				t.Fatal(err)
			}
			err := c.failed(&m)
			switch {
			case tc.want == "" && (err != nil || len(m.GetMessages()) != MaxValues-1):
				t.Fatalf("err %v, %d messages decoded; want %d", err, len(m.GetMessages()), MaxValues-1)
			case tc.want != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v; want INVALID_ARGUMENT with %q", err, tc.want)
			case tc.want == "values" && len(m.GetMessages()) != 0:
				t.Fatalf("%d messages decoded past the limit; want none", len(m.GetMessages()))
			}
		})
	}
}
