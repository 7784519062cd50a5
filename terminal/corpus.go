package terminal

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
)

// CorpusExample is the candidate prompt line of one capture of the corpus
// (terminal/testdata/corpus), with its program so that leave-program-out
// can hold a program's lines out.
type CorpusExample struct {
	Program string `json:"program"`
	Example
}

// corpusJSON is CorpusExamplesOf(the corpus), written by
// `go run ./tools/terminal-eval -write-examples`; a test fails when it
// and the corpus disagree.
//
//go:embed corpus_examples.json
var corpusJSON []byte

// CorpusExamplesFile is where corpusJSON lives, relative to the module root.
const CorpusExamplesFile = "terminal/corpus_examples.json"

// CorpusExamplesOf makes the examples of captures: the daemon learns from
// every capture's prompt line, the evaluation from all but one program's.
func CorpusExamplesOf(caps []Capture) []CorpusExample {
	var out []CorpusExample
	for _, c := range caps {
		if e := ExampleFrom(c.Raw, c.Waiting, c.Type); e.Text != "" {
			out = append(out, CorpusExample{Program: c.Program, Example: e})
		}
	}
	return out
}

// MarshalCorpusExamples is the file form of examples: one per line, so a
// change to the corpus shows as a readable diff.
func MarshalCorpusExamples(examples []CorpusExample) ([]byte, error) {
	var b []byte
	b = append(b, "[\n"...)
	for i, e := range examples {
		line, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		b = append(b, line...)
		if i < len(examples)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "]\n"...), nil
}

// ShippedCorpusExamples are the examples built into the daemon.
func ShippedCorpusExamples() ([]CorpusExample, error) {
	var out []CorpusExample
	if err := json.Unmarshal(corpusJSON, &out); err != nil {
		return nil, fmt.Errorf("terminal: built-in corpus examples: %w", err)
	}
	return out, nil
}

// NewDetector embeds the built-in examples, fits the semantic classifier's
// temperature by leave-one-out on them, and adds the prompt lines of the
// capture corpus (every program in it), which is the detector the daemon
// serves and the one leave-program-out scores, less the held-out program.
func NewDetector(ctx context.Context, emb Embedder) (*Detector, error) {
	d, err := newBaseDetector(ctx, emb)
	if err != nil {
		return nil, err
	}
	corpus, err := ShippedCorpusExamples()
	if err != nil {
		return nil, err
	}
	ex := make([]Example, len(corpus))
	for i, c := range corpus {
		ex[i] = c.Example
	}
	danger, err := ShippedDangerModel()
	if err != nil {
		return nil, err
	}
	if d, err = d.WithDangerModel(danger); err != nil {
		return nil, err
	}
	return d.WithExamples(ctx, ex)
}

// base is d with only the built-in examples, none learned.
func (d *Detector) base() *Detector {
	out := *d
	out.vecs, out.label = d.vecs[:d.builtin:d.builtin], d.label[:d.builtin:d.builtin]
	return &out
}
