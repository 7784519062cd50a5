package embed

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	"github.com/sugarme/tokenizer/pretrained"
)

// tokenizerFile is a tokenizer.json read and decoded once. The engine
// builds its tokenizer from it as the library's pretrained.FromReader
// would, except that a Unigram model's vocabulary is decoded only into the
// engine's own SentencePiece search (sentencepiece.go), never into the
// library's Unigram, and the normaliser is decoded from the same bytes.
// multilingual-e5-small's file holds 250,002 pieces: decoding them three
// times (the library's generic JSON values and trie, then the engine's
// search, then the normaliser) put the daemon's peak RSS about 70 MB
// higher than needed (models/README.md).
type tokenizerFile struct {
	AddedTokens   []tokenizer.TokenConfig `json:"added_tokens"`
	Normalizer    json.RawMessage         `json:"normalizer"`
	PreTokenizer  map[string]any          `json:"pre_tokenizer"`
	PostProcessor map[string]any          `json:"post_processor"`
	Decoder       map[string]any          `json:"decoder"`
	Model         json.RawMessage         `json:"model"`
}

// readTokenizerFile reads and decodes the tokenizer.json at path.
func readTokenizerFile(path string) (*tokenizerFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: tokenizer: %v", ErrModel, err)
	}
	var f tokenizerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: tokenizer: %v", ErrModel, err)
	}
	return &f, nil
}

// build makes the library tokenizer of f (truncation and padding left
// off: the engine truncates and pads itself) and returns the engine's own
// normaliser when the file's is one it applies itself (normalize.go); the
// library's normaliser is then unset.
func (f *tokenizerFile) build() (*tokenizer.Tokenizer, *textNormalizer, error) {
	var kind struct {
		Type string `json:"type"`
	}
	if len(f.Model) > 0 {
		if err := json.Unmarshal(f.Model, &kind); err != nil {
			return nil, nil, fmt.Errorf("%w: tokenizer: model: %v", ErrModel, err)
		}
	}
	var model tokenizer.Model
	if kind.Type == "Unigram" {
		sp, err := parseSentencePiece(f.Model)
		if err != nil {
			return nil, nil, err
		}
		model = sp
	} else {
		var m map[string]any
		if len(f.Model) > 0 {
			if err := json.Unmarshal(f.Model, &m); err != nil {
				return nil, nil, fmt.Errorf("%w: tokenizer: model: %v", ErrModel, err)
			}
		}
		lm, err := libraryCall(func() (tokenizer.Model, error) {
			return pretrained.CreateModel(&tokenizer.Config{Model: m, Decoder: f.Decoder})
		})
		if err != nil || lm == nil {
			return nil, nil, fmt.Errorf("%w: tokenizer: model: %v", ErrModel, err)
		}
		model = lm
	}
	tok := tokenizer.NewTokenizer(model)
	own, err := parseSequenceNormalizer(f.Normalizer)
	if err != nil {
		return nil, nil, err
	}
	if own == nil {
		var nm map[string]any
		if len(f.Normalizer) > 0 {
			if err := json.Unmarshal(f.Normalizer, &nm); err != nil {
				return nil, nil, fmt.Errorf("%w: tokenizer: normalizer: %v", ErrModel, err)
			}
		}
		n, err := libraryCall(func() (normalizer.Normalizer, error) { return pretrained.CreateNormalizer(nm) })
		if err != nil {
			return nil, nil, fmt.Errorf("%w: tokenizer: normalizer: %v", ErrModel, err)
		}
		tok.WithNormalizer(n)
	}
	pre, err := libraryCall(func() (tokenizer.PreTokenizer, error) { return pretrained.CreatePreTokenizer(f.PreTokenizer) })
	if err != nil {
		return nil, nil, fmt.Errorf("%w: tokenizer: pre-tokenizer: %v", ErrModel, err)
	}
	tok.WithPreTokenizer(pre)
	post, err := libraryCall(func() (tokenizer.PostProcessor, error) { return pretrained.CreatePostProcessor(f.PostProcessor) })
	if err != nil {
		return nil, nil, fmt.Errorf("%w: tokenizer: post-processor: %v", ErrModel, err)
	}
	tok.WithPostProcessor(post)
	dec, err := libraryCall(func() (tokenizer.Decoder, error) { return pretrained.CreateDecoder(f.Decoder) })
	if err != nil {
		return nil, nil, fmt.Errorf("%w: tokenizer: decoder: %v", ErrModel, err)
	}
	tok.WithDecoder(dec)
	special, added := pretrained.CreateAddedTokens(f.AddedTokens)
	if len(special) > 0 {
		tok.AddSpecialTokens(special)
	}
	if len(added) > 0 {
		tok.AddTokens(added)
	}
	return tok, own, nil
}

// libraryCall runs one of the tokenizer library's constructors, turning
// the panics its type assertions raise on malformed JSON into errors.
func libraryCall[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed: %v", r)
		}
	}()
	return f()
}
