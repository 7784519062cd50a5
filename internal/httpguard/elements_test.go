package httpguard

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// TestCheckElements: values are counted outside JSON strings and along
// the request message's fields; a body at MaxElements passes, one past it
// is refused, whatever its framing.
func TestCheckElements(t *testing.T) {
	const route = "/classifier.v1.ClassifierService/Route"
	msgs := func(n int) []byte {
		m := &pb.RouteRequest{Query: "x"}
		for range n {
			m.Messages = append(m.Messages, &pb.Message{})
		}
		b, _ := proto.Marshal(m)
		return b
	}
	// The query field and n messages: n+1 fields.
	atLimit, overLimit := msgs(MaxElements-1), msgs(MaxElements)
	jsonArray := func(n int) []byte { return []byte("[" + strings.Repeat("{},", n-1) + "{}]") }
	for _, tc := range []struct {
		name, path, ct string
		body           []byte
		refused        bool
	}{
		{"JSON commas and brackets inside strings", route, "application/json",
			[]byte(`{"query":"` + strings.Repeat(`,{[\",`, 100000) + `"}`), false},
		// "[" plus n objects and n-1 commas: 2n values.
		{"JSON at the limit", route, "application/json", jsonArray(MaxElements / 2), false},
		{"JSON past the limit", route, "application/json; charset=utf-8", jsonArray(MaxElements/2 + 1), true},
		{"Connect streaming JSON past the limit", route, "application/connect+json", []byte(envelope(string(jsonArray(MaxElements)))), true},
		// The first prefix's length byte is '"' (a 34-byte message): read
		// as JSON it opened a string that hid the next message's values.
		{"+json messages counted without their prefixes", route, "application/grpc-web+json",
			[]byte(envelope(`{"query":"`+strings.Repeat("x", 22)+`"}`) + envelope(string(jsonArray(MaxElements)))), true},
		{"protobuf at the limit", route, "application/proto", atLimit, false},
		{"protobuf past the limit", route, "application/proto", overLimit, true},
		{"gRPC-Web past the limit", route, "application/grpc-web+proto", []byte(envelope(string(overLimit))), true},
		{"gRPC-Web at the limit", route, "application/grpc-web", []byte(envelope(string(atLimit))), false},
		{"unknown method: left to the handler", "/x.Y/Z", "application/proto", overLimit, false},
		{"an object at the members' limit", route, "application/json", jsonObject(MaxObjectMembers), false},
		{"an object past the members' limit", route, "application/json", jsonObject(MaxObjectMembers + 1), true},
		{"a nested object past it, after a long array", route, "application/json",
			[]byte(`{"a":[` + strings.Repeat("1,", 10000) + `1],"b":{"args":` + string(jsonObject(MaxObjectMembers+1)) + `}}`), true},
		{"past it after nesting deeper than tracked", route, "application/json",
			[]byte(`{"x":` + strings.Repeat("[", maxTrackedDepth+100) + strings.Repeat("]", maxTrackedDepth+100) + `,` + string(jsonObject(MaxObjectMembers + 1))[1:]), true},
		{"a long array after nesting deeper than tracked", route, "application/json",
			[]byte(`{"x":` + strings.Repeat("[", maxTrackedDepth+100) + strings.Repeat("]", maxTrackedDepth+100) + `,"a":[` + strings.Repeat("1,", 10000) + `1]}`), false},
		{"many objects under the bound, past it together", route, "application/json",
			[]byte(`[` + strings.Repeat(string(jsonObject(MaxObjectMembers-1))+",", 4) + string(jsonObject(MaxObjectMembers-1)) + `]`), true},
		{"members of nested objects counted apart", route, "application/json",
			[]byte(`{"a":` + string(jsonObject(MaxObjectMembers)) + `,"b":` + string(jsonObject(MaxObjectMembers)) + `}`), false},
		{"not protobuf: left to the decoder", route, "application/proto", []byte{0xff, 0xff}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckElements(tc.path, tc.ct, tc.body)
			if (err != nil) != tc.refused {
				t.Fatalf("CheckElements: %v; want refused %v", err, tc.refused)
			}
		})
	}
}

// jsonObject is an object of n members.
func jsonObject(n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func FuzzCheckElements(f *testing.F) {
	f.Add([]byte(`{"query":"x","messages":[{},{}]}`), true)
	f.Add([]byte("\x0a\x01x\x12\x00"), false)
	f.Fuzz(func(t *testing.T, body []byte, json bool) {
		ct := "application/proto"
		if json {
			ct = "application/json"
		}
		_ = CheckElements("/classifier.v1.ClassifierService/Route", ct, body)
	})
}
