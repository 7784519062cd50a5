// Package onnxgen writes a tiny BERT-shaped sentence-transformer model for
// tests: model.onnx (hand-encoded ONNX protobuf), a WordPiece tokenizer.json
// and a manifest, so the BERT input path (token_type_ids, mean pooling,
// special tokens, lower-casing) is exercised without any downloaded weights.
//
// The graph mimics what matters about BERT for an embedding engine: it
// reads input_ids, attention_mask and token_type_ids, and each token's
// output depends on the other unmasked tokens of its sequence (a masked
// average, like attention), so wrong padding or masking changes the result:
//
//	h   = word[input_ids] + type[token_type_ids]
//	m   = float(attention_mask)[..., None]
//	ctx = Σ(h·m) / Σ m            (over the sequence)
//	out = (h + 0.5·ctx) · m       -> last_hidden_state [batch, seq, dims]
//
// Mean pooling over the mask then gives 1.5·mean(h), so the normalised
// sentence vector is normalise(mean over tokens of word[id] + type[tt]),
// which Expected computes in plain Go.
package onnxgen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Vocab is the tokenizer's vocabulary, in id order.
var Vocab = func() []string {
	v := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", ".", ",", "?", "!", "'", "-"}
	words := strings.Fields(`the a an my your our to of and or in on for with from at by is are be it this that
check list show open read write create delete update find search get send post run start stop what which who how
github notifications pull request requests issue issues repo repository branch commit file files folder directory config json
docker container containers image logs database table query sql jira ticket sprint board slack channel message email note notes
web page url fetch weather news user users group password python script install package memory remember help please now
today new old all any some more last first next second one two three five ten`)
	v = append(v, words...)
	v = append(v, "##s", "##ing", "##ed", "##er", "##ly", "##es", "##y")
	return v
}()

// Model describes a generated model.
type Model struct {
	Dims  int
	Word  [][]float32 // [vocab][dims]
	Type  [][]float32 // [2][dims]
	Vocab map[string]int
}

// Generate makes deterministic weights for a model of the given width.
func Generate(dims int, seed int64) *Model {
	r := rand.New(rand.NewSource(seed))
	m := &Model{Dims: dims, Vocab: map[string]int{}}
	for i, w := range Vocab {
		m.Vocab[w] = i
		row := make([]float32, dims)
		for k := range row {
			row[k] = float32(r.NormFloat64())
		}
		m.Word = append(m.Word, row)
	}
	for t := 0; t < 2; t++ {
		row := make([]float32, dims)
		for k := range row {
			row[k] = float32(r.NormFloat64() * 0.1)
		}
		m.Type = append(m.Type, row)
	}
	return m
}

// Expected is the engine's expected output for token ids (including any
// special tokens) with token type 0: the normalised mean of word+type rows.
func (m *Model) Expected(ids []int64) []float32 {
	sum := make([]float64, m.Dims)
	for _, id := range ids {
		for k := range sum {
			sum[k] += float64(m.Word[id][k] + m.Type[0][k])
		}
	}
	var n float64
	for k := range sum {
		sum[k] /= float64(len(ids))
		n += sum[k] * sum[k]
	}
	out := make([]float32, m.Dims)
	for k := range sum {
		out[k] = float32(sum[k] / math.Sqrt(n))
	}
	return out
}

// DefaultMaxTokens is the token cap WriteBertModel puts in the manifest.
const DefaultMaxTokens = 16

// WriteBertModel generates a model of the given width from seed and writes
// model.onnx, tokenizer.json and manifest.json (max_tokens
// DefaultMaxTokens) into dir.
func WriteBertModel(dir string, dims int, seed int64) error {
	return Generate(dims, seed).Write(dir, DefaultMaxTokens)
}

// Write writes model.onnx, tokenizer.json and manifest.json into dir.
func (m *Model) Write(dir string, maxTokens int) error {
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), m.onnx(), 0o644); err != nil {
		return err
	}
	tok, err := tokenizerJSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644); err != nil {
		return err
	}
	man := fmt.Sprintf(`{
  "name": "tiny-bert-test",
  "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask", "token_type_ids": "token_type_ids"},
  "output": "last_hidden_state",
  "pooling": "mean",
  "normalize": true,
  "dims": %d,
  "max_tokens": %d,
  "lowercase": true,
  "collapse_whitespace": true,
  "add_special_tokens": true,
  "pad_id": 0
}`, m.Dims, maxTokens)
	return os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(man), 0o644)
}

func tokenizerJSON() ([]byte, error) {
	vocab := map[string]int{}
	for i, w := range Vocab {
		vocab[w] = i
	}
	t := map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []map[string]any{
			{"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		},
		"normalizer":     map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": true},
		"pre_tokenizer":  map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{"type": "BertProcessing", "sep": []any{"[SEP]", 3}, "cls": []any{"[CLS]", 2}},
		"decoder":        map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": vocab},
	}
	return json.Marshal(t)
}

// ONNX protobuf field numbers (onnx/onnx.proto).
const (
	modelIRVersion   = 1
	modelProducer    = 2
	modelGraph       = 7
	modelOpset       = 8
	opsetVersion     = 2
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12
	nodeInput        = 1
	nodeOutput       = 2
	nodeName         = 3
	nodeOpType       = 4
	nodeAttribute    = 5
	attrName         = 1
	attrI            = 3
	attrType         = 20
	attrTypeInt      = 2
	tensorDims       = 1
	tensorDataType   = 2
	tensorName       = 8
	tensorRaw        = 9
	valueName        = 1
	valueType        = 2
	typeTensor       = 1
	ttElemType       = 1
	ttShape          = 2
	shapeDim         = 1
	dimValue         = 1
	dimParam         = 2
	dtFloat          = 1
	dtInt64          = 7
)

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func strField(b []byte, num protowire.Number, s string) []byte { return bytesField(b, num, []byte(s)) }

func intField(b []byte, num protowire.Number, v int64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func tensor(name string, dt int64, dims []int64, raw []byte) []byte {
	var b []byte
	for _, d := range dims {
		b = intField(b, tensorDims, d)
	}
	b = intField(b, tensorDataType, dt)
	b = strField(b, tensorName, name)
	return bytesField(b, tensorRaw, raw)
}

func floats(rows [][]float32) []byte {
	var b []byte
	for _, r := range rows {
		for _, f := range r {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

func int64s(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// valueInfo declares a graph input/output; dims are numbers or symbolic names.
func valueInfo(name string, elem int64, dims ...any) []byte {
	var shape []byte
	for _, d := range dims {
		var dim []byte
		switch v := d.(type) {
		case int:
			dim = intField(dim, dimValue, int64(v))
		case string:
			dim = strField(dim, dimParam, v)
		}
		shape = bytesField(shape, shapeDim, dim)
	}
	var tt []byte
	tt = intField(tt, ttElemType, elem)
	tt = bytesField(tt, ttShape, shape)
	var typ []byte
	typ = bytesField(typ, typeTensor, tt)
	var b []byte
	b = strField(b, valueName, name)
	return bytesField(b, valueType, typ)
}

func node(op, name string, in, out []string, intAttrs map[string]int64) []byte {
	var b []byte
	for _, s := range in {
		b = strField(b, nodeInput, s)
	}
	for _, s := range out {
		b = strField(b, nodeOutput, s)
	}
	b = strField(b, nodeName, name)
	b = strField(b, nodeOpType, op)
	for k, v := range intAttrs {
		var a []byte
		a = strField(a, attrName, k)
		a = intField(a, attrI, v)
		a = intField(a, attrType, attrTypeInt)
		b = bytesField(b, nodeAttribute, a)
	}
	return b
}

func (m *Model) onnx() []byte {
	var g []byte
	nodes := [][]byte{
		node("Gather", "word", []string{"word_emb", "input_ids"}, []string{"we"}, nil),
		node("Gather", "type", []string{"type_emb", "token_type_ids"}, []string{"te"}, nil),
		node("Add", "h", []string{"we", "te"}, []string{"h"}, nil),
		node("Cast", "maskf", []string{"attention_mask"}, []string{"mf"}, map[string]int64{"to": dtFloat}),
		node("Unsqueeze", "mask3", []string{"mf", "axis_last"}, []string{"m3"}, nil),
		node("Mul", "hm", []string{"h", "m3"}, []string{"hm"}, nil),
		node("ReduceSum", "sum", []string{"hm", "axis_seq"}, []string{"sum"}, map[string]int64{"keepdims": 1}),
		node("ReduceSum", "cnt", []string{"m3", "axis_seq"}, []string{"cnt"}, map[string]int64{"keepdims": 1}),
		node("Div", "ctx", []string{"sum", "cnt"}, []string{"ctx"}, nil),
		node("Mul", "ctxh", []string{"ctx", "half"}, []string{"ctxh"}, nil),
		node("Add", "h2", []string{"h", "ctxh"}, []string{"h2"}, nil),
		node("Mul", "out", []string{"h2", "m3"}, []string{"last_hidden_state"}, nil),
	}
	for _, n := range nodes {
		g = bytesField(g, graphNode, n)
	}
	g = strField(g, graphName, "tiny_bert")
	g = bytesField(g, graphInitializer, tensor("word_emb", dtFloat, []int64{int64(len(m.Word)), int64(m.Dims)}, floats(m.Word)))
	g = bytesField(g, graphInitializer, tensor("type_emb", dtFloat, []int64{2, int64(m.Dims)}, floats(m.Type)))
	g = bytesField(g, graphInitializer, tensor("axis_last", dtInt64, []int64{1}, int64s(-1)))
	g = bytesField(g, graphInitializer, tensor("axis_seq", dtInt64, []int64{1}, int64s(1)))
	g = bytesField(g, graphInitializer, tensor("half", dtFloat, []int64{1}, floats([][]float32{{0.5}})))
	for _, in := range []string{"input_ids", "attention_mask", "token_type_ids"} {
		g = bytesField(g, graphInput, valueInfo(in, dtInt64, "batch", "seq"))
	}
	g = bytesField(g, graphOutput, valueInfo("last_hidden_state", dtFloat, "batch", "seq", m.Dims))

	var b []byte
	b = intField(b, modelIRVersion, 8)
	b = strField(b, modelProducer, "classifierd-onnxgen")
	var opset []byte
	opset = strField(opset, 1, "")
	opset = intField(opset, opsetVersion, 13)
	b = bytesField(b, modelOpset, opset)
	return bytesField(b, modelGraph, g)
}
