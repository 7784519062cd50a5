package mcpserver

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestJSONStringBytesAsEncoded: jsonStringBytes is the size
// encoding/json gives a string, quotes aside, HTML escapes included.
func TestJSONStringBytesAsEncoded(t *testing.T) {
	alphabet := []string{"a", "<", ">", "&", "\"", "\\", "\n", "\t", "\b", "\f", "\x01", "\x7f", "é", "日", "\u2028", "\u2029", "\xff", "\xe6\x97", "😀"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonStringBytes(s), len(enc)-2; got != want {
			t.Fatalf("string %d %q: %d bytes counted, encoding/json writes %d", i, s, got, want)
		}
	}
}

// TestForwardBoundsEncodedSizes: an answer is measured as it will be
// encoded (3 MB of `<` is 18 MB of JSON, over MaxForwardedAnswer, where
// its bytes are not), and arguments that encode past
// MaxForwardedArguments are not forwarded (the eighteenth hostile pass).
func TestForwardBoundsEncodedSizes(t *testing.T) {
	lt := strings.Repeat("<", 3<<20)
	if n := AnswerBytes(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: lt}}}); n <= MaxForwardedAnswer {
		t.Fatalf("3 MB of '<' counted as %d bytes, within MaxForwardedAnswer", n)
	}
	if n := AnswerBytes(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("a", 3<<20)}}}); n > MaxForwardedAnswer {
		t.Fatalf("3 MB of 'a' counted as %d bytes, over MaxForwardedAnswer", n)
	}
	echo := echoCaller{}
	res := Forward(context.Background(), &echo, "s", "echo", map[string]any{"q": lt})
	if !res.IsError || echo.calls != 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "RESOURCE_EXHAUSTED") {
		t.Fatalf("3 MB of '<' as arguments (18 MB encoded): forwarded %d times, result %+v; want refused unforwarded", echo.calls, res.Content)
	}
	res = Forward(context.Background(), &echo, "s", "echo", map[string]any{"q": strings.Repeat("a", 3<<20)})
	if res.IsError || echo.calls != 1 {
		t.Fatalf("3 MB of 'a' as arguments: forwarded %d times, error %v; want forwarded once", echo.calls, res.IsError)
	}
}

// echoCaller answers every call with an empty result, counting them.
type echoCaller struct{ calls int }

func (e *echoCaller) CallTool(context.Context, string, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	e.calls++
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}
