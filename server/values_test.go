package server

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
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
			_, err := c.outcome(&m)
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

// TestCountProtoUnknownFields: a request message may carry up to
// MaxUnknownFields fields its type does not have (a client built on a
// newer API), in it or in the messages it holds; past that it is refused
// before it is decoded (the twenty-seventh hostile pass: 24,573 empty
// unknown groups in a 48 KiB GetIndexInfo, 12 times the client's CPU on
// --listen). Known fields are not counted against it.
func TestCountProtoUnknownFields(t *testing.T) {
	md := (&pb.RouteRequest{}).ProtoReflect().Descriptor()
	unknown := func(k int, group bool) []byte {
		var b []byte
		for range k {
			if group {
				b = protowire.AppendTag(b, 15, protowire.StartGroupType)
				b = protowire.AppendTag(b, 15, protowire.EndGroupType)
			} else {
				b = protowire.AppendTag(b, 999, protowire.VarintType)
				b = protowire.AppendVarint(b, 1)
			}
		}
		return b
	}
	// query (1) is a string: a group of that number is kept as an
	// unknown field by protobuf-go.
	wrongType := func(k int) []byte {
		var b []byte
		for range k {
			b = protowire.AppendTag(b, 1, protowire.StartGroupType)
			b = protowire.AppendTag(b, 1, protowire.EndGroupType)
		}
		return b
	}
	known, err := proto.Marshal(&pb.RouteRequest{Query: "x", IncludeServers: make([]string, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"1,000 known fields", known, nil},
		{"64 unknown", append(unknown(MaxUnknownFields, false), known...), nil},
		{"65 unknown", append(unknown(MaxUnknownFields+1, false), known...), ErrUnknownFields},
		{"65 unknown groups", unknown(MaxUnknownFields+1, true), ErrUnknownFields},
		{"65 groups numbered as a known string", wrongType(MaxUnknownFields + 1), ErrUnknownFields},
		{"64 groups numbered as a known string", wrongType(MaxUnknownFields), nil},
	} {
		n := 0
		if err := CountProtoValues(tc.b, md, &n); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
