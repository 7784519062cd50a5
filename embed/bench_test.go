package embed

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkEmbed is end-to-end embedding (tokenise, pad, run, pool) by batch size.
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
			for i := 0; i < b.N; i++ {
				if _, err := e.Embed(ctx, texts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/text")
		})
	}
}

// BenchmarkInfer is the bare ONNX Runtime call on pre-tokenised text: the
// baseline that end-to-end latency is compared against.
func BenchmarkInfer(b *testing.B) {
	e := realEngine(b)
	ids, err := e.Tokens(sentences[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := e.Infer(context.Background(), [][]int64{ids}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenize compares the word-cache path with the whole-text tokenizer.
func BenchmarkTokenize(b *testing.B) {
	e := realEngine(b)
	text := sentences[2]
	b.Run("cached-words", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := e.Tokens(text); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole-text", func(b *testing.B) {
		norm := e.man.NormalizeText(text)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := e.tokenize(norm); err != nil {
				b.Fatal(err)
			}
		}
	})
}
