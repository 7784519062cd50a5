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
	// decoded is each message's outcome until an interceptor takes it
	// (message pointer → decodeOutcome): every failure, and with weigh
	// (set before serving when the interceptors charge) every success.
	decoded sync.Map
	weigh   bool
}

// decodeOutcome is a message's decoding failure (nil: it decoded) and
// its charge: its wire size and ValueCost for each value counted.
type decodeOutcome struct {
	err    error
	weight int
}

func newRequestCodec() *requestCodec {
	return &requestCodec{CodecV2: encoding.GetCodecV2(proto.Name)}
}

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	weight := data.Len()
	m, ok := v.(protov2.Message)
	if ok {
		// Counted before decoding: decoding costs memory per value
		// (MaxValues), and a 4 MiB message can hold 2 million.
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		n := 0
		err := CountProtoValues(buf.ReadOnlyData(), m.ProtoReflect().Descriptor(), &n)
		buf.Free()
		weight += ValueCost * n
		switch {
		case errors.Is(err, ErrTooManyValues):
			c.decoded.Store(v, decodeOutcome{status.Errorf(codes.InvalidArgument, "request holds more than %d values: at most %d per request", MaxValues, MaxValues), weight})
			return nil
		case errors.Is(err, ErrUnknownFields):
			c.decoded.Store(v, decodeOutcome{UnknownFieldsRefusal(), weight})
			return nil
		}
	}
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.decoded.Store(v, decodeOutcome{err, weight})
	} else if c.weigh && ok {
		c.decoded.Store(v, decodeOutcome{nil, weight})
	}
	return nil
}

// outcome takes (and forgets) what Unmarshal kept of msg: its charge,
// and the refusal of a message that did not decode.
func (c *requestCodec) outcome(msg any) (int, error) {
	v, ok := c.decoded.LoadAndDelete(msg)
	if !ok {
		return 0, nil
	}
	o := v.(decodeOutcome)
	if o.err == nil {
		return o.weight, nil
	}
	if _, counted := status.FromError(o.err); counted { // MaxValues, unknown fields
		return o.weight, o.err
	}
	return o.weight, status.Error(codes.InvalidArgument, "request does not parse as the method's protobuf message")
}

// interceptors refuse a request that did not decode, and tell charge
// (if not nil) each request message's weight and how its call ended (a
// unary call's result, a streamed message's decoding). They are made
// before the server serves.
func (c *requestCodec) interceptors(charge func(ctx context.Context, n int, err error)) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	c.weigh = charge != nil
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		n, err := c.outcome(req)
		if err != nil {
			if charge != nil {
				charge(ctx, n, err)
			}
			return nil, err
		}
		resp, err := h(ctx, req)
		if charge != nil {
			charge(ctx, n, err)
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
	n, err := s.c.outcome(m)
	if s.charge != nil {
		s.charge(s.Context(), n, err)
	}
	return err
}

// UnknownFieldsRefusal is the refusal of a request past
// MaxUnknownFields, on every listener.
func UnknownFieldsRefusal() error {
	return status.Errorf(codes.InvalidArgument, "request holds more than %d fields its message type does not have: send only the API's fields", MaxUnknownFields)
}
