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
	bad sync.Map // message pointer → badMessage
	// weigh (set before serving when the interceptors charge) keeps each
	// decoded message's charge: weights, a message pointer → its wire
	// size and ValueCost for each value counted.
	weigh   bool
	weights sync.Map
}

// badMessage is a message's decoding failure and its charge: its wire
// size and ValueCost for each value counted.
type badMessage struct {
	err  error
	size int
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
		weight := data.Len() + ValueCost*n
		if errors.Is(err, ErrTooManyValues) {
			c.bad.Store(v, badMessage{status.Errorf(codes.InvalidArgument, "request holds more than %d values: at most %d per request", MaxValues, MaxValues), weight})
			return nil
		}
		if errors.Is(err, ErrUnknownFields) {
			c.bad.Store(v, badMessage{UnknownFieldsRefusal(), weight})
			return nil
		}
		if err := c.CodecV2.Unmarshal(data, v); err != nil {
			c.bad.Store(v, badMessage{err, weight})
		} else if c.weigh {
			c.weights.Store(v, weight)
		}
		return nil
	}
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.bad.Store(v, badMessage{err, data.Len()})
	}
	return nil
}

// failed reports (and forgets) a decode failure of msg, with the charge
// (badMessage.size) of the message that failed.
func (c *requestCodec) failed(msg any) (int, error) {
	if v, ok := c.bad.LoadAndDelete(msg); ok {
		b := v.(badMessage)
		if _, counted := status.FromError(b.err); counted { // MaxValues, unknown fields
			return b.size, b.err
		}
		return b.size, status.Error(codes.InvalidArgument, "request does not parse as the method's protobuf message")
	}
	return 0, nil
}

// weight is the charge of a request message that decoded, which
// Unmarshal kept (and weight forgets): its wire size and ValueCost for
// each value counted in it.
func (c *requestCodec) weight(msg any) int {
	if v, ok := c.weights.LoadAndDelete(msg); ok {
		return v.(int)
	}
	return 0
}

// interceptors refuse a request that did not decode, and tell charge
// (if not nil) each request message's weight and how its call ended (a
// unary call's result, a streamed message's decoding). They are made
// before the server serves.
func (c *requestCodec) interceptors(charge func(ctx context.Context, n int, err error)) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	c.weigh = charge != nil
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if n, err := c.failed(req); err != nil {
			if charge != nil {
				charge(ctx, n, err)
			}
			return nil, err
		}
		resp, err := h(ctx, req)
		if charge != nil {
			charge(ctx, c.weight(req), err)
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &decodeCheckStream{ServerStream: ss, c: c, charge: charge})
	}
	return unary, stream
}

type decodeCheckStream struct {
	grpc.ServerStream
	c      *requestCodec
	charge func(ctx context.Context, n int, err error)
}

func (s *decodeCheckStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	n, err := s.c.failed(m)
	if s.charge != nil {
		if err == nil {
			n = s.c.weight(m)
		}
		s.charge(s.Context(), n, err)
	}
	return err
}

// UnknownFieldsRefusal is the refusal of a request past
// MaxUnknownFields, on every listener.
func UnknownFieldsRefusal() error {
	return status.Errorf(codes.InvalidArgument, "request holds more than %d fields its message type does not have: send only the API's fields", MaxUnknownFields)
}
