package server

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxValues is the most values one request message may hold (protobuf
// fields, each element of a repeated field one; on the HTTP listeners JSON
// values too), counted before it is decoded. Decoding costs memory per
// value, not per byte: the tenth hostile pass's Route of 2 million empty
// messages (2 bytes each, under the 4 MiB message limit) cost over 500 MB
// to decode before its "limit 64" refusal, three at once +1.6 GB on
// --listen. The largest request the API takes at its defaults holds a few
// thousand (AnalyzePrompt's 1,024 valid_categories, 64 messages or texts),
// so this is room for limits raised sixteen-fold; 65,536 values decode in
// about 22 MB.
const MaxValues = 1 << 16

// ValueCost is what one value of a request (a protobuf field, a JSON
// value; MaxValues counts them) weighs against one byte in the per-caller
// rates of request bytes (--body-bytes-per-second,
// --refused-body-bytes-per-second): a body is charged its bytes plus
// ValueCost for each value. Decoding costs per value, not per byte. The
// twenty-seventh hostile pass measured, on the 2-core machine, about 18 ns
// of TLS, HTTP/2 and decoding per byte of a 64 KiB field, 46 ns per value
// of 64 KiB of two-byte protobuf fields (3.9 times the client's CPU within
// the rate of bytes, against 1.9 for the same bytes as one field) and
// about 300 ns per value of an MCP request's JSON (the SDK decodes
// params._meta several times: 4.9 times). 16 bytes a value holds the
// protobuf and transcoded JSON values to what their bytes' worth of one
// field costs (the MCP listeners weigh theirs more:
// httpguard.MCPValueCost); an honest request holds a few to a few
// thousand values (AnalyzePrompt's 1,024 valid_categories: 16 KiB more),
// nothing against 64 MiB of burst.
const ValueCost = 16

// ErrTooManyValues is a request of more than MaxValues values.
var ErrTooManyValues = errors.New("too many values")

// maxProtoDepth bounds the nesting CountProtoValues follows (the decoder's
// own limit is 10,000).
const maxProtoDepth = 100

// CountProtoValues adds the fields of the protobuf message b (of type md)
// and of the messages it holds to *n, without decoding it:
// ErrTooManyValues past MaxValues, another error if b does not parse
// (which the decoder then reports itself).
func CountProtoValues(b []byte, md protoreflect.MessageDescriptor, n *int) error {
	unknown := 0
	return countProto(b, md, n, &unknown, 0)
}

// MaxUnknownFields is the most fields a request message (and the
// messages it holds) may carry that its type does not have: a client
// built on a newer API sends a few, and protobuf-go parses each one
// kept, at a cost per field. The twenty-seventh hostile pass's
// GetIndexInfo of 24,573 empty unknown groups (4 bytes each, 48 KiB) cost
// the daemon 12 times its client's CPU on --listen.
const MaxUnknownFields = 64

// ErrUnknownFields is a request of more than MaxUnknownFields fields its
// type does not have.
var ErrUnknownFields = errors.New("too many unknown fields")

// wireTypeOf reports whether typ is a wire type fd's values come in: a
// field sent in another is kept as an unknown field by protobuf-go, at an
// unknown field's cost (the twenty-eighth hostile pass: a GetSession of
// 24,573 empty groups numbered as its session_id, 2.6 times the client's
// CPU where the byte rate let them through).
func wireTypeOf(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	var want protowire.Type
	switch fd.Kind() {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		want = protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		want = protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		want = protowire.Fixed64Type
	case protoreflect.GroupKind:
		want = protowire.StartGroupType
	default: // string, bytes, message
		return typ == protowire.BytesType
	}
	// A repeated number may come packed, as bytes.
	return typ == want || fd.IsList() && typ == protowire.BytesType
}

func countProto(b []byte, md protoreflect.MessageDescriptor, n, unknown *int, depth int) error {
	if depth > maxProtoDepth {
		return errors.New("nested too deep")
	}
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		v := protowire.ConsumeFieldValue(num, typ, b)
		if v < 0 {
			return protowire.ParseError(v)
		}
		if *n++; *n > MaxValues {
			return ErrTooManyValues
		}
		fd := md.Fields().ByNumber(num)
		if fd != nil && !wireTypeOf(fd, typ) {
			fd = nil // protobuf-go keeps it as an unknown field
		}
		if fd == nil {
			if *unknown++; *unknown > MaxUnknownFields {
				return ErrUnknownFields
			}
		}
		if fd != nil && typ == protowire.BytesType &&
			(fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind) {
			inner, _ := protowire.ConsumeBytes(b[:v])
			if err := countProto(inner, fd.Message(), n, unknown, depth+1); err != nil {
				return err
			}
		}
		b = b[v:]
	}
	return nil
}
