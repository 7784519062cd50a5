package embed

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/classifierd/classifierd/internal/tracing"
	"github.com/classifierd/classifierd/models"
)

// EmbedSpans embeds text in one model run and returns its vector (the
// vector Embed returns for it: the same tokens in a run of its own) and a
// vector for each span of it: the mean of the final token states of the
// span's tokens, normalised as the manifest says ("late chunking": each
// clause of a request gets a vector that read the whole request, for no
// model run of its own). spans are byte ranges of text, cut between words.
//
// A span's vector is nil where it cannot be pooled so: a span past the
// model's max_tokens, a model that does not mean-pool its token states, or
// a text whose tokens, taken a piece at a time, are not the tokens of the
// whole (the caller then embeds those spans alone).
func (e *Engine) EmbedSpans(ctx context.Context, text string, spans [][2]int) (_ []float32, _ [][]float32, err error) {
	ctx, sp := tracing.Start(ctx, tracing.Embed)
	defer func() { endSpan(sp, err) }()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if e.queue != nil {
		if err := e.queue.Admit(1); err != nil {
			return nil, nil, err
		}
	}
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return nil, nil, ErrClosed
	}
	ids, types, err := e.encode(text, false)
	if err != nil {
		return nil, nil, err
	}
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyModel.String(e.man.Name), tracing.KeyTexts.Int(1), tracing.KeyTokens.Int(len(ids)))
	}
	var tokSpans [][2]int
	if e.man.Pooling == models.PoolMean && len(spans) > 0 {
		tokSpans = e.tokenSpans(text, spans, ids)
	}
	item := tokenized{ids: ids, types: types, spans: tokSpans}
	var out [][]float32
	if e.queue != nil {
		out, err = e.embedQueued(ctx, []tokenized{item})
	} else {
		out, err = e.runTokenized(ctx, []tokenized{item})
	}
	if err != nil {
		return nil, nil, err
	}
	d := e.man.Dims
	flat := out[0]
	parts := make([][]float32, len(spans))
	for i, ts := range tokSpans {
		if ts[1] > ts[0] {
			parts[i] = flat[(i+1)*d : (i+2)*d]
		}
	}
	return flat[:d:d], parts, nil
}

// tokenSpans maps byte spans of text to token ranges of ids (the tokens
// encode gave the whole text): it tokenises the text a piece at a time
// (the spans and the text between them, each normalised as encode
// normalises, without special tokens) and checks that the pieces' tokens,
// between the model's leading and trailing special tokens, are ids (cut
// as encode cuts at max_tokens). It returns nil when they are not, and an
// empty range for a span that is not whole within ids.
func (e *Engine) tokenSpans(text string, spans [][2]int, ids []int64) [][2]int {
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]][0] < spans[order[b]][0] })
	pre, suf := e.wordPre, e.wordSuf
	if !e.wordSplit {
		var ok bool
		if pre, suf, ok = e.specials(); !ok {
			return nil
		}
	}
	full := slices.Clone(pre)
	if p := e.man.TextPrefix(); p != "" {
		t, err := e.encodeRaw(p)
		if err != nil {
			return nil
		}
		for _, x := range t.GetIds() {
			full = append(full, int64(x))
		}
	}
	out := make([][2]int, len(spans))
	at := 0
	piece := func(s string) bool {
		if strings.TrimSpace(s) == "" {
			return true
		}
		t, err := e.rawTokens(s)
		if err != nil {
			return false
		}
		full = append(full, t...)
		return true
	}
	for _, i := range order {
		sp := spans[i]
		if sp[0] < at || sp[1] < sp[0] || sp[1] > len(text) {
			return nil // overlapping or out of range
		}
		if !piece(text[at:sp[0]]) {
			return nil
		}
		start := len(full)
		if !piece(text[sp[0]:sp[1]]) {
			return nil
		}
		out[i] = [2]int{start, len(full)}
		at = sp[1]
	}
	if !piece(text[at:]) {
		return nil
	}
	full = append(full, suf...)
	// encode keeps the first max_tokens tokens, the closing special token
	// last.
	want := full
	if len(full) > e.man.MaxTokens {
		want = append(slices.Clone(full[:e.man.MaxTokens-len(suf)]), suf...)
	}
	if !slices.Equal(want, ids) {
		return nil
	}
	limit := len(ids) - len(suf)
	for i := range out {
		if out[i][1] > limit || out[i][0] >= out[i][1] {
			out[i] = [2]int{}
		}
	}
	return out
}

// rawTokens tokenises a piece of text as encode tokenises a text, without
// special tokens.
func (e *Engine) rawTokens(s string) ([]int64, error) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if e.bertClean {
		s = bertCleanText(s)
	}
	if e.bertStrip {
		s = stripAccents(s)
	}
	// The manifest's query prefix is a piece of its own (tokenSpans).
	norm := strings.TrimPrefix(e.man.NormalizeText(s), e.man.TextPrefix())
	if IsBlank(norm) {
		return nil, nil
	}
	if e.wordPath(norm) {
		// The words were mostly just tokenised for the whole text.
		return e.encodeWords(norm, 0)
	}
	enc, err := e.encodeRaw(norm)
	if err != nil {
		return nil, err
	}
	raw := enc.GetIds()
	out := make([]int64, len(raw))
	for i, x := range raw {
		out[i] = int64(x)
	}
	return out, nil
}

// specials returns the tokens the tokenizer puts before and after a text
// (BERT's [CLS] and [SEP]; none for a model without special tokens).
func (e *Engine) specials() (pre, suf []int64, ok bool) {
	with, err := e.tokenize("a")
	if err != nil {
		return nil, nil, false
	}
	if !e.man.AddSpecialTokens {
		return nil, nil, true
	}
	bare, err := e.rawTokens("a")
	if err != nil || len(bare) == 0 {
		return nil, nil, false
	}
	i := slices.Index(with, bare[0])
	if i < 0 || i+len(bare) > len(with) || !slices.Equal(with[i:i+len(bare)], bare) {
		return nil, nil, false
	}
	return with[:i], with[i+len(bare):], true
}

// poolSpans appends to v (the text's pooled vector) the mean of each
// span's token states, normalised as the manifest says; an empty span
// gives a zero vector (EmbedSpans returns nil for it).
func (e *Engine) poolSpans(v []float32, data []float32, row, seq int, spans [][2]int) ([]float32, error) {
	d := e.man.Dims
	out := append(make([]float32, 0, d*(1+len(spans))), v...)
	for _, sp := range spans {
		u := make([]float32, d)
		if sp[1] > sp[0] {
			if sp[1] > seq {
				return nil, fmt.Errorf("%w: span %v past %d tokens", ErrInference, sp, seq)
			}
			for j := sp[0]; j < sp[1]; j++ {
				tok := data[(row*seq+j)*d : (row*seq+j+1)*d]
				for k, x := range tok {
					u[k] += x
				}
			}
			n := float32(sp[1] - sp[0])
			for k := range u {
				u[k] /= n
			}
			if e.man.Normalize {
				normalize(u)
			}
		}
		out = append(out, u...)
	}
	return out, nil
}
