package onnxgen

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// msg is a decoded protobuf message: field number -> raw values in order
// (varints as uint64, length-delimited fields as []byte).
type msg map[protowire.Number][]any

func decode(t *testing.T, b []byte) msg {
	t.Helper()
	m := msg{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				t.Fatalf("field %d: bad varint", num)
			}
			m[num] = append(m[num], v)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				t.Fatalf("field %d: bad bytes", num)
			}
			m[num] = append(m[num], v)
			b = b[n:]
		default:
			t.Fatalf("field %d: unexpected wire type %d", num, typ)
		}
	}
	return m
}

func (m msg) str(num protowire.Number) string {
	if len(m[num]) == 0 {
		return ""
	}
	return string(m[num][0].([]byte))
}

func (m msg) int(num protowire.Number) int64 {
	if len(m[num]) == 0 {
		return 0
	}
	return int64(m[num][0].(uint64))
}

func (m msg) subs(t *testing.T, num protowire.Number) []msg {
	var out []msg
	for _, v := range m[num] {
		out = append(out, decode(t, v.([]byte)))
	}
	return out
}

// shapeOf renders a ValueInfoProto's tensor type as elem type and dims
// (numbers or symbolic names).
func shapeOf(t *testing.T, vi msg) (int64, []any) {
	typ := vi.subs(t, valueType)[0]
	tt := typ.subs(t, typeTensor)[0]
	var dims []any
	for _, d := range tt.subs(t, ttShape)[0].subs(t, shapeDim) {
		if p := d.str(dimParam); p != "" {
			dims = append(dims, p)
		} else {
			dims = append(dims, d.int(dimValue))
		}
	}
	return tt.int(ttElemType), dims
}

// TestModelProto decodes the generated model with the field numbers of
// onnx/onnx.proto and checks what ONNX Runtime relies on: IR and opset
// versions, the BERT input/output signature with symbolic batch and
// sequence dims, initialisers holding the generated weights, and nodes in
// topological order.
func TestModelProto(t *testing.T) {
	const dims = 16
	gen := Generate(dims, 3)
	model := decode(t, gen.onnx())

	if got := model.int(modelIRVersion); got != 8 {
		t.Errorf("ir_version: got %d, want 8", got)
	}
	opsets := model.subs(t, modelOpset)
	if len(opsets) != 1 || opsets[0].str(1) != "" || opsets[0].int(opsetVersion) != 13 {
		t.Errorf("opset_import: got %v, want one default-domain opset 13", opsets)
	}
	graph := model.subs(t, modelGraph)[0]

	var inputs []string
	for _, in := range graph.subs(t, graphInput) {
		inputs = append(inputs, in.str(valueName))
		elem, shape := shapeOf(t, in)
		if elem != dtInt64 || !slices.Equal(shape, []any{"batch", "seq"}) {
			t.Errorf("input %s: got elem %d shape %v, want int64 [batch seq]", in.str(valueName), elem, shape)
		}
	}
	if want := []string{"input_ids", "attention_mask", "token_type_ids"}; !slices.Equal(inputs, want) {
		t.Errorf("inputs: got %v, want %v", inputs, want)
	}
	outs := graph.subs(t, graphOutput)
	if len(outs) != 1 || outs[0].str(valueName) != "last_hidden_state" {
		t.Fatalf("outputs: got %d, want last_hidden_state only", len(outs))
	}
	if elem, shape := shapeOf(t, outs[0]); elem != dtFloat || !slices.Equal(shape, []any{"batch", "seq", int64(dims)}) {
		t.Errorf("output: got elem %d shape %v, want float [batch seq %d]", elem, shape, dims)
	}

	known := map[string]bool{}
	for _, n := range inputs {
		known[n] = true
	}
	for _, init := range graph.subs(t, graphInitializer) {
		name := init.str(tensorName)
		known[name] = true
		var shape []int64
		for _, d := range init[tensorDims] {
			shape = append(shape, int64(d.(uint64)))
		}
		raw := init[tensorRaw][0].([]byte)
		switch name {
		case "word_emb":
			if !slices.Equal(shape, []int64{int64(len(Vocab)), dims}) || init.int(tensorDataType) != dtFloat {
				t.Errorf("word_emb: got shape %v type %d", shape, init.int(tensorDataType))
			}
			// Row 5, column 7 in the raw little-endian data is the weight Expected uses.
			off := (5*dims + 7) * 4
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[off:])); got != gen.Word[5][7] {
				t.Errorf("word_emb[5][7]: got %v, want %v", got, gen.Word[5][7])
			}
			if len(raw) != len(Vocab)*dims*4 {
				t.Errorf("word_emb raw: got %d bytes, want %d", len(raw), len(Vocab)*dims*4)
			}
		case "type_emb":
			if !slices.Equal(shape, []int64{2, dims}) || len(raw) != 2*dims*4 {
				t.Errorf("type_emb: got shape %v, %d bytes", shape, len(raw))
			}
		}
	}
	for _, name := range []string{"word_emb", "type_emb", "axis_last", "axis_seq", "half"} {
		if !known[name] {
			t.Errorf("initializer %s missing", name)
		}
	}

	used := map[string]bool{}
	for i, n := range graph.subs(t, graphNode) {
		for _, in := range n[nodeInput] {
			name := string(in.([]byte))
			used[name] = true
			if !known[name] {
				t.Errorf("node %d (%s) reads %q before anything produces it", i, n.str(nodeOpType), name)
			}
		}
		for _, out := range n[nodeOutput] {
			known[string(out.([]byte))] = true
		}
	}
	for _, in := range inputs {
		if !used[in] {
			t.Errorf("input %s is never read by the graph", in)
		}
	}
	if !known["last_hidden_state"] {
		t.Error("no node produces last_hidden_state")
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, b, c := Generate(8, 1).onnx(), Generate(8, 1).onnx(), Generate(8, 2).onnx()
	if !bytes.Equal(a, b) {
		t.Error("same seed: got different model bytes, want identical")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds: got identical model bytes, want different")
	}
}

func TestExpected(t *testing.T) {
	m := Generate(4, 9)
	ids := []int64{2, 20, 20, 3}
	got := m.Expected(ids)
	var want [4]float64
	var n float64
	for k := range want {
		for _, id := range ids {
			want[k] += float64(m.Word[id][k]+m.Type[0][k]) / 4
		}
		n += want[k] * want[k]
	}
	for k := range want {
		if d := math.Abs(float64(got[k]) - want[k]/math.Sqrt(n)); d > 1e-6 {
			t.Errorf("dim %d: got %v, want %v", k, got[k], want[k]/math.Sqrt(n))
		}
	}
}

func TestWriteBertModel(t *testing.T) {
	dir := t.TempDir()
	if err := WriteBertModel(dir, 12, 5); err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(model, Generate(12, 5).onnx()) {
		t.Error("model.onnx: got other bytes than Generate(12, 5)")
	}

	var tok struct {
		Normalizer    struct{ Type string } `json:"normalizer"`
		PreTokenizer  struct{ Type string } `json:"pre_tokenizer"`
		PostProcessor struct {
			Type string
			Cls  []any
		} `json:"post_processor"`
		Model struct {
			Type  string
			Vocab map[string]int
		} `json:"model"`
	}
	readJSON(t, filepath.Join(dir, "tokenizer.json"), &tok)
	if tok.Normalizer.Type != "BertNormalizer" || tok.PreTokenizer.Type != "BertPreTokenizer" ||
		tok.PostProcessor.Type != "BertProcessing" || tok.Model.Type != "WordPiece" {
		t.Errorf("tokenizer components: got %+v", tok)
	}
	if len(tok.Model.Vocab) != len(Vocab) {
		t.Errorf("vocab: got %d entries, want %d (duplicate words?)", len(tok.Model.Vocab), len(Vocab))
	}
	for w, id := range map[string]int{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3} {
		if tok.Model.Vocab[w] != id {
			t.Errorf("vocab[%s]: got %d, want %d", w, tok.Model.Vocab[w], id)
		}
	}

	var man map[string]any
	readJSON(t, filepath.Join(dir, "manifest.json"), &man)
	for k, want := range map[string]any{
		"pooling": "mean", "normalize": true, "dims": 12.0, "max_tokens": float64(DefaultMaxTokens),
		"lowercase": true, "add_special_tokens": true, "output": "last_hidden_state",
	} {
		if man[k] != want {
			t.Errorf("manifest %s: got %v, want %v", k, man[k], want)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
