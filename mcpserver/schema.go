package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AddTool is mcp.AddTool with the tool's input and output schemas
// inferred from In and Out as the SDK infers them, once per type, and
// kept encoded (json.RawMessage). The SDK encodes every tool's schemas
// into every tools/list answer, and a *jsonschema.Schema is encoded by
// reflection, property by property: three quarters of the daemon's CPU
// under a flood of tools/list (about 1.9 ms for each of its 14 KB answers;
// issue 27, the thirteenth pass); an encoded schema is copied. The SDK
// still checks arguments and results against the same schema (it decodes
// and resolves an encoded one once, when the tool is added). A schema
// set on t is kept as it is.
func AddTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	if t.InputSchema == nil && reflect.TypeFor[In]() != reflect.TypeFor[any]() {
		t.InputSchema = encodedSchema[In]()
	}
	if t.OutputSchema == nil && reflect.TypeFor[Out]() != reflect.TypeFor[any]() {
		t.OutputSchema = encodedSchema[Out]()
	}
	mcp.AddTool(s, t, h)
}

// schemas holds the encoded schema of each type AddTool has seen: the
// proxy adds its meta tools to every session's server.
var schemas sync.Map // reflect.Type → json.RawMessage

// encodedSchema is T's JSON schema as the SDK infers it (of the type a
// pointer points to), encoded. Types are this package's and the proxy's:
// one that has no schema is a programming error, and panics, as
// mcp.AddTool does.
func encodedSchema[T any]() json.RawMessage {
	rt := reflect.TypeFor[T]()
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	if b, ok := schemas.Load(rt); ok {
		return b.(json.RawMessage)
	}
	sc, err := jsonschema.ForType(rt, &jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Errorf("mcpserver: the schema of %v: %w", rt, err))
	}
	b, err := json.Marshal(sc)
	if err != nil {
		panic(fmt.Errorf("mcpserver: encoding the schema of %v: %w", rt, err))
	}
	b2, _ := schemas.LoadOrStore(rt, json.RawMessage(b))
	return b2.(json.RawMessage)
}
