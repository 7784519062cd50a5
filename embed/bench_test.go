package embed

import (
	"context"
	"fmt"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// BenchmarkEmbed is end-to-end embedding (normalise, tokenise, pad, run,
// pool, normalise) on use-lite-en by batch size.
func BenchmarkEmbed(b *testing.B) {
	e := realEngine(b)
	ctx := context.Background()
	for _, n := range []int{1, 8, 32} {
		texts := make([]string, n)
		for i := range texts {
			texts[i] = sentences[i%len(sentences)]
		}
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Embed(ctx, texts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/text")
		})
	}
}

// BenchmarkRawORTRun is the bare ONNX Runtime call for one short sentence:
// DynamicAdvancedSession.Run on tensors built once, output into a
// preallocated tensor, no tokenising, padding or pooling. It is the
// baseline the engine's end-to-end cost is compared with.
func BenchmarkRawORTRun(b *testing.B) {
	e := realEngine(b)
	ids, err := e.Tokens(sentences[0])
	if err != nil {
		b.Fatal(err)
	}
	shape := ort.NewShape(1, int64(len(ids)))
	mask := make([]int64, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	idT, err := ort.NewTensor(shape, ids)
	if err != nil {
		b.Fatal(err)
	}
	defer idT.Destroy()
	maskT, err := ort.NewTensor(shape, mask)
	if err != nil {
		b.Fatal(err)
	}
	defer maskT.Destroy()
	out, err := ort.NewEmptyTensor[float32](ort.NewShape(1, int64(e.Dims())))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Destroy()
	inputs, outputs := []ort.Value{idT, maskT}, []ort.Value{out}
	b.ReportAllocs()
	for b.Loop() {
		if err := e.sess.Run(inputs, outputs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/text")
}

// BenchmarkInfer is the engine's model step alone on pre-tokenised text:
// tensors built per call, run options with cancellation, pooling and
// normalisation.
func BenchmarkInfer(b *testing.B) {
	e := realEngine(b)
	ids, err := e.Tokens(sentences[0])
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Infer(ctx, [][]int64{ids}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenize compares the word-cache path with the whole-text
// tokenizer, on use-lite-en and on the generated BERT tokenizer.
func BenchmarkTokenize(b *testing.B) {
	e := realEngine(b)
	// The longest text a request may carry (8 KiB) of non-ASCII words: the
	// engine tokenises only the first max_tokens words ("whole-text" is
	// what tokenising all of it costs).
	long := strings.ToValidUTF8(strings.Repeat("Grüße aus 東京 😀 ", 480)[:8000], "")
	for _, tc := range []struct{ name, text string }{{"use-lite-en", sentences[2]}, {"use-lite-en/8KiB-non-ascii", long}} {
		b.Run(tc.name+"/cached-words", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Tokens(tc.text); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/whole-text", func(b *testing.B) {
			norm := e.man.NormalizeText(tc.text)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.tokenize(norm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("bert-wordpiece", func(b *testing.B) {
		bert := sharedBert(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bert.Tokens(sentences[2]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
