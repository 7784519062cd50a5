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
	"google.golang.org/grpc/stats"
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
			c.store(v, decodeOutcome{status.Errorf(codes.InvalidArgument, "request holds more than %d values: at most %d per request", MaxValues, MaxValues), weight})
			return nil
		case errors.Is(err, ErrUnknownFields):
			c.store(v, decodeOutcome{UnknownFieldsRefusal(), weight})
			return nil
		}
	}
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		c.store(v, decodeOutcome{err, weight})
	} else if c.weigh && ok {
		c.store(v, decodeOutcome{nil, weight})
	}
	return nil
}

// store keeps o for v, adding the weight of what v held not yet taken:
// grpc-go decodes a unary call's second message into the first's (to
// refuse it), and both weigh.
func (c *requestCodec) store(v any, o decodeOutcome) {
	if old, ok := c.decoded.Load(v); ok {
		o.weight += old.(decodeOutcome).weight
	}
	c.decoded.Store(v, o)
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

// errSecondMessage is how a call's request message no interceptor took
// is charged: grpc-go decodes a second message of a call that takes one
// (to refuse it, INTERNAL "cardinality violation"), before any
// interceptor runs.
var errSecondMessage = status.Error(codes.InvalidArgument, "more than one request message for a method that takes one")

// codecCalls is the stats handler that forgets, when a call ends, what
// the codec kept of its latest request message and no interceptor took,
// and charges its weight. grpc-go decodes a second message into a unary
// call's request to refuse it, and the call then ends before the
// interceptors: the thirty-first hostile pass sent an empty GetIndexInfo
// message followed by a 63 KiB one, 60,000 calls in 10 s, and the
// outcomes kept (the message, its unknown fields) grew the live heap ~12
// KB a call without bound (1.5 GB in 10 s); the second messages, 2.5 GB
// in 10 s, were charged to no rate.
type codecCalls struct {
	c      *requestCodec
	charge func(ctx context.Context, n int, err error)
}

type codecCallKey struct{}

// codecCall is a call's latest request message (stats.InPayload).
type codecCall struct {
	mu  sync.Mutex
	msg any
}

func (h codecCalls) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, codecCallKey{}, &codecCall{})
}

func (h codecCalls) HandleRPC(ctx context.Context, s stats.RPCStats) {
	cc, ok := ctx.Value(codecCallKey{}).(*codecCall)
	if !ok {
		return
	}
	var prev any
	switch s := s.(type) {
	case *stats.InPayload:
		cc.mu.Lock()
		if cc.msg != s.Payload {
			prev, cc.msg = cc.msg, s.Payload
		}
		cc.mu.Unlock()
	case *stats.End:
		cc.mu.Lock()
		prev, cc.msg = cc.msg, nil
		cc.mu.Unlock()
	}
	if prev == nil {
		return
	}
	if v, ok := h.c.decoded.LoadAndDelete(prev); ok && h.charge != nil {
		h.charge(ctx, v.(decodeOutcome).weight, errSecondMessage)
	}
}

func (codecCalls) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (codecCalls) HandleConn(context.Context, stats.ConnStats) {}
