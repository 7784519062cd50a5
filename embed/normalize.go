package embed

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// textNormalizer is a tokenizer.json normaliser of the form
//
//	{"type": "Sequence", "normalizers": [Replace..., NFKC, Replace...]}
//
// (Replace with a String or a Regex pattern) that the engine applies itself
// before tokenising, in place of the tokenizer library's: that library reads
// a Regex pattern as an empty string, its Replace rewrites text through the
// same alignment code that corrupts BERT's clean_text, and its NFKC panics
// on some valid text (see Engine.nfkc). tools/modelconv writes this form for
// multilingual-e5-small: SentencePiece's normaliser is NFKC plus a few
// replacements (control characters dropped; tab, newline and zero-width
// characters made spaces), then runs of spaces collapsed. The Hugging Face
// tokenizers library reads the same file, so the converter's check of the
// ids holds for the Go engine too.
type textNormalizer struct {
	steps []normStep
}

// normStep is one step: NFKC, or a replacement of a string or a regular
// expression.
type normStep struct {
	nfkc bool
	old  string
	re   *regexp.Regexp
	new  string
}

// apply runs the steps in order.
func (n *textNormalizer) apply(s string) string {
	for _, st := range n.steps {
		switch {
		case st.nfkc:
			s = norm.NFKC.String(s)
		case st.re != nil:
			s = st.re.ReplaceAllLiteralString(s, st.new)
		default:
			s = strings.ReplaceAll(s, st.old, st.new)
		}
	}
	return s
}

// rawNormalizer is the shape of a tokenizer.json normaliser this file reads.
type rawNormalizer struct {
	Type        string          `json:"type"`
	Normalizers []rawNormalizer `json:"normalizers"`
	Pattern     *struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Content string `json:"content"`
}

// parseSequenceNormalizer returns the engine's own normaliser for a
// tokenizer.json normaliser (raw: its "normalizer" value) when it is a
// Sequence of Replace and NFKC steps, and nil (the library's normaliser
// stays) otherwise.
func parseSequenceNormalizer(raw json.RawMessage) (*textNormalizer, error) {
	var tj struct {
		Normalizer *rawNormalizer
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &tj.Normalizer); err != nil {
			return nil, fmt.Errorf("%w: tokenizer: %v", ErrModel, err)
		}
	}
	if tj.Normalizer == nil || tj.Normalizer.Type != "Sequence" {
		return nil, nil
	}
	var n textNormalizer
	for _, r := range tj.Normalizer.Normalizers {
		switch {
		case r.Type == "NFKC":
			n.steps = append(n.steps, normStep{nfkc: true})
		case r.Type == "Replace" && r.Pattern != nil && r.Pattern.String != nil && *r.Pattern.String != "":
			n.steps = append(n.steps, normStep{old: *r.Pattern.String, new: r.Content})
		case r.Type == "Replace" && r.Pattern != nil && r.Pattern.Regex != nil:
			re, err := regexp.Compile(*r.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("%w: tokenizer: normalizer regex %q: %v", ErrModel, *r.Pattern.Regex, err)
			}
			n.steps = append(n.steps, normStep{re: re, new: r.Content})
		default:
			return nil, nil // another kind of step: the library's normaliser stays
		}
	}
	return &n, nil
}
