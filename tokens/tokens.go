// Package tokens counts the LLM tokens that tool definitions cost, with a
// real BPE tokenizer (cl100k_base, the encoding of GPT-4-class models)
// whose ranks ship inside the Go module github.com/pkoukk/tiktoken-go-loader,
// so nothing is downloaded at run time. Other LLMs tokenise differently;
// treat the counts as a close estimate of what a client sends.
package tokens

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding is the BPE encoding counted.
const Encoding = "cl100k_base"

// tiktoken-go keeps its loader in a package variable; set it once, to the
// offline loader, before any encoding is built.
var setLoader sync.Once

// Counter counts tokens. It is safe for concurrent use.
type Counter struct {
	enc *tiktoken.Tiktoken
}

// NewCounter loads the encoding from the ranks embedded in the binary.
func NewCounter() (*Counter, error) {
	setLoader.Do(func() { tiktoken.SetBpeLoader(loader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(Encoding)
	if err != nil {
		return nil, fmt.Errorf("tokens: load %s: %w", Encoding, err)
	}
	return &Counter{enc: enc}, nil
}

// Count returns the number of tokens in text.
func (c *Counter) Count(text string) int {
	return len(c.enc.EncodeOrdinary(text))
}

// ToolText is the text counted for one tool: the JSON object a client
// sends an LLM for it ({"name","description","input_schema"}).
func ToolText(name, description, inputSchemaJSON string) string {
	schema := json.RawMessage(inputSchemaJSON)
	if len(schema) == 0 || !json.Valid(schema) {
		schema = json.RawMessage("{}")
	}
	b, _ := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{name, description, schema})
	return string(b)
}

// CountTool counts one tool definition.
func (c *Counter) CountTool(name, description, inputSchemaJSON string) int {
	return c.Count(ToolText(name, description, inputSchemaJSON))
}
