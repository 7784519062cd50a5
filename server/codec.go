package server

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	protov2 "google.golang.org/protobuf/proto"
)

// requestCodec is the proto codec, except that a request that does not
// parse is reported as InvalidArgument: grpc-go turns any codec error
// into Internal, which would blame the server for the client's bytes. The
// codec records the failure against the message and decodes nothing; the
// interceptors, which see that message next, answer InvalidArgument
// before the handler runs.
type requestCodec struct {
	encoding.CodecV2
	bad sync.Map // message pointer → unmarshal error
}

func newRequestCodec() *requestCodec {
	return &requestCodec{CodecV2: encoding.GetCodecV2(proto.Name)}
}

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(protov2.Message); ok {
		// Counted before decoding: decoding costs memory per value
		// (MaxValues), and a 4 MiB message can hold 2 million.
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		n := 0
		err := CountProtoValues(buf.ReadOnlyData(), m.ProtoReflect().Descriptor(), &n)
		buf.Free()
		if errors.Is(err, ErrTooManyValues) {
			c.bad.Store(v, status.Errorf(codes.InvalidArgument, "request holds more than %d values: at most %d per request", MaxValues, MaxValues))
			return nil
		}
		if errors.Is(err, ErrUnknownFields) {
			c.bad.Store(v, unknownFieldsRefusal())
			return nil
		}
	}
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.bad.Store(v, err)
	}
	return nil
}

// failed reports (and forgets) a decode failure of msg.
func (c *requestCodec) failed(msg any) error {
	if err, ok := c.bad.LoadAndDelete(msg); ok {
		if _, counted := status.FromError(err.(error)); counted { // MaxValues
			return err.(error)
		}
		return status.Error(codes.InvalidArgument, "request does not parse as the method's protobuf message")
	}
	return nil
}

func (c *requestCodec) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := c.failed(req); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &decodeCheckStream{ServerStream: ss, c: c})
	}
	return unary, stream
}

type decodeCheckStream struct {
	grpc.ServerStream
	c *requestCodec
}

func (s *decodeCheckStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.c.failed(m)
}

// unknownFieldsRefusal is the refusal of a request past MaxUnknownFields.
func unknownFieldsRefusal() error {
	return status.Errorf(codes.InvalidArgument, "request holds more than %d fields its message type does not have: send only the API's fields", MaxUnknownFields)
}

// UnknownFieldsRefusal is that refusal, for the HTTP listeners' count.
func UnknownFieldsRefusal() error { return unknownFieldsRefusal() }
