package embed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/normalizer"
	ort "github.com/yalue/onnxruntime_go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/text/unicode/norm"

	"github.com/classifierd/classifierd/embed/batch"
	"github.com/classifierd/classifierd/embed/embederr"
	"github.com/classifierd/classifierd/internal/tracing"
	"github.com/classifierd/classifierd/models"
)

// Errors returned by the engine.
var (
	// ErrTooMany reports a batch larger than Config.MaxBatch.
	ErrTooMany = embederr.ErrTooMany
	// ErrModel reports a model whose files or outputs do not match its manifest.
	ErrModel = errors.New("embed: model does not match manifest")
	// ErrInference reports a failure inside ONNX Runtime at run time.
	ErrInference = errors.New("embed: inference failed")
	// ErrClosed reports use of a closed engine.
	ErrClosed = embederr.ErrClosed
	// ErrQueueFull reports a call refused because too many texts already
	// wait for the model (Config.MaxQueue).
	ErrQueueFull = embederr.ErrQueueFull
)

// Config configures an Engine. The zero value of each optional field picks a
// sensible default.
type Config struct {
	// ModelDir holds model.onnx and tokenizer.json.
	ModelDir string
	// Manifest describes the model; required.
	Manifest *models.Manifest
	// IntraOpThreads is ONNX Runtime's per-run thread count (default 1: the
	// daemon gets parallelism from concurrent requests instead).
	IntraOpThreads int
	// MaxConcurrent bounds concurrent model runs (default: number of CPUs).
	MaxConcurrent int
	// ChunkSize is how many texts go into one model run (default 32).
	ChunkSize int
	// MaxBatch bounds the texts of one Embed call (default 1024).
	MaxBatch int
	// MaxQueue, when positive, sends the texts of concurrent Embed calls
	// through a micro-batching queue (embed/batch) that holds at most this
	// many texts waiting for the model: a call finding it full fails at
	// once with ErrQueueFull. Runs take up to ChunkSize texts (one for a
	// batch-dependent model) on MaxConcurrent workers. Zero runs each call
	// on its own, unbounded (what an index build wants).
	MaxQueue int
	// BatchWindow is how long a queued run that is not full waits for more
	// texts, from its oldest text's arrival (with MaxQueue; 0: no wait).
	BatchWindow time.Duration
	// MaxQueueWait, with MaxQueue, also refuses a call (ErrQueueFull) whose
	// texts would wait longer than this for the model, estimated from the
	// recent time per text (0: only MaxQueue bounds the queue).
	MaxQueueWait time.Duration
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.Manifest == nil {
		return out, fmt.Errorf("%w: no manifest", models.ErrBadManifest)
	}
	if err := out.Manifest.Validate(); err != nil {
		return out, err
	}
	if out.IntraOpThreads <= 0 {
		out.IntraOpThreads = 1
	}
	if out.MaxConcurrent <= 0 {
		out.MaxConcurrent = runtime.NumCPU()
	}
	if out.ChunkSize <= 0 {
		out.ChunkSize = 32
	}
	if out.Manifest.BatchDependent {
		out.ChunkSize = 1
	}
	if out.MaxBatch <= 0 {
		out.MaxBatch = 1024
	}
	return out, nil
}

// Engine embeds texts with one ONNX model. It is safe for concurrent use.
type Engine struct {
	cfg         Config
	man         models.Manifest
	tok         *tokenizer.Tokenizer
	tokMu       sync.Mutex
	sess        *ort.DynamicAdvancedSession
	inputNames  []string
	sem         chan struct{}
	fingerprint string

	// nfkc is set when the tokenizer's normaliser is NFKC: the engine then
	// applies NFKC itself (golang.org/x/text) before tokenising. The
	// tokenizer library's own NFKC panics on some valid text ("ǆ") and
	// leaves some decomposed text uncomposed ("e\u0301"), but does nothing
	// to text that is already NFKC, so this gives the tokens the model's
	// reference tokenizer gives.
	nfkc bool
	// bertClean is set when the tokenizer's normaliser is BertNormalizer
	// with clean_text: the engine then drops the characters that step
	// drops before tokenising, because the library's own removal corrupts
	// the text that follows ("\uFFFDǆǆ" comes out as "ǆǆ\uFFFD\x86ǆ\uFFFD").
	bertClean bool
	// bertStrip is set when the BertNormalizer strips accents: explicitly,
	// or (strip_accents null) because it lower-cases, as the Hugging Face
	// tokenizers library does. The Go library reads null as false and
	// turned "café" into [UNK]; the engine strips accents itself.
	bertStrip bool
	// ownNorm, when set, is the tokenizer.json's normaliser (a Sequence of
	// replacements and NFKC) applied by the engine instead of the library.
	ownNorm *textNormalizer

	closeMu sync.RWMutex
	closed  bool

	// words caches the token ids of single words when the tokenizer is
	// word-separable (checked at Open), which removes most tokenisation
	// cost from the request path. Bounded; reset when full.
	wordSplit bool
	// wordPre and wordSuf are the special tokens the tokenizer puts
	// around a text ([CLS] and [SEP] for BERT), which the word path adds
	// around the words' own tokens (none for a model without them).
	wordPre, wordSuf []int64
	// added are the texts of the tokenizer's added tokens ("[CLS]"...),
	// which the library reads differently in a whole text and in a word
	// alone: a text holding one never takes the word path.
	added      []string
	wordsMu    sync.RWMutex
	words      map[string][]int64
	wordsBytes int // what words holds, by wordCost
	wordsMax   int // bound of wordsBytes: maxWordCacheBytes (tests lower it)

	// queue batches the texts of concurrent calls (Config.MaxQueue); nil
	// when each call runs its own texts.
	queue *batch.Batcher[tokenized, []float32]
}

// The word cache is bounded in bytes, not words: unique long words (logs,
// hashes, base64) would otherwise grow it by their length each. Words
// longer than maxCachedWordBytes are not cached (they rarely repeat), and
// the cache is reset when it would pass maxWordCacheBytes.
const (
	maxWordCacheBytes  = 8 << 20
	maxCachedWordBytes = 64
	// wordEntryOverhead is a map entry's cost beside its key and ids:
	// string and slice headers, bucket slot.
	wordEntryOverhead = 64
)

// wordCost is what caching w with ids costs in memory, roughly.
func wordCost(w string, ids []int64) int { return len(w) + 8*cap(ids) + wordEntryOverhead }

// wordProbes are sentences used at Open to check that tokenising word by
// word gives exactly what tokenising the whole text gives.
var wordProbes = []string{
	"Check my GitHub notifications",
	"read config.json and push it to my repo, then open PR #42!",
	"What's the status of PROJ-123? It's been 3 days...",
	"list files in /var/log/nginx (newest first) & delete *.gz",
	"Don't over-write C:\\Users\\bob\\notes.txt; use snake_case_names instead.",
}

// Open loads the model and tokenizer named by cfg. rt must stay open while
// the engine is in use.
func Open(rt *Runtime, cfg Config) (*Engine, error) {
	if rt == nil {
		return nil, fmt.Errorf("%w: nil runtime", ErrRuntime)
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	modelPath := filepath.Join(c.ModelDir, models.ModelFile)
	fp, err := Fingerprint(modelPath, c.Manifest)
	if err != nil {
		return nil, err
	}
	tokPath := filepath.Join(c.ModelDir, models.TokenizerFile)
	tf, err := readTokenizerFile(tokPath) // see tokfile.go: read once
	if err != nil {
		return nil, err
	}
	tok, ownNorm, err := tf.build()
	if err != nil {
		return nil, err
	}
	// The engine truncates (manifest max_tokens) and pads per batch itself.
	// Hugging Face exports often ship a fixed padding of 128 and their own
	// truncation; kept, they would make every short text cost 128 tokens.
	tok.WithPadding(nil)
	tok.WithTruncation(nil)
	inNames := []string{c.Manifest.Inputs.InputIDs, c.Manifest.Inputs.AttentionMask}
	if c.Manifest.Inputs.TokenTypeIDs != "" {
		inNames = append(inNames, c.Manifest.Inputs.TokenTypeIDs)
	}
	if err := checkModelIO(modelPath, inNames, c.Manifest.Output); err != nil {
		return nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: session options: %v", ErrRuntime, err)
	}
	defer opts.Destroy()
	if err := opts.SetIntraOpNumThreads(c.IntraOpThreads); err != nil {
		return nil, fmt.Errorf("%w: intra-op threads: %v", ErrRuntime, err)
	}
	if err := opts.SetInterOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("%w: inter-op threads: %v", ErrRuntime, err)
	}
	sess, err := ort.NewDynamicAdvancedSession(modelPath, inNames, []string{c.Manifest.Output}, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	e := &Engine{
		cfg:         c,
		man:         *c.Manifest,
		tok:         tok,
		sess:        sess,
		inputNames:  inNames,
		sem:         make(chan struct{}, c.MaxConcurrent),
		fingerprint: fp,
		words:       map[string][]int64{},
		wordsMax:    maxWordCacheBytes,
		ownNorm:     ownNorm,
	}
	for _, a := range tf.AddedTokens {
		if a.Content != "" {
			e.added = append(e.added, strings.ToLower(a.Content))
		}
	}
	switch n := tok.GetNormalizer().(type) {
	case *normalizer.NFKC:
		e.nfkc = true
	case *normalizer.UnicodeNormalizer:
		e.nfkc = n.Form == norm.NFKC
	case *normalizer.BertNormalizer:
		e.bertClean = n.CleanText
		strip, err := bertStripsAccents(tf.Normalizer)
		if err != nil {
			_ = sess.Destroy()
			return nil, err
		}
		e.bertStrip = strip
		n.StripAccents = false
	}
	e.wordSplit = e.checkWordSplit()
	// Probe once so a model whose output width or shape disagrees with the
	// manifest fails at load, not on the first request.
	if _, err := e.Embed(context.Background(), []string{"probe"}); err != nil {
		_ = sess.Destroy()
		return nil, fmt.Errorf("%w: probe run: %v", ErrModel, err)
	}
	if err := e.openQueue(); err != nil {
		_ = sess.Destroy()
		return nil, err
	}
	return e, nil
}

func checkModelIO(modelPath string, inNames []string, output string) error {
	ins, outs, err := ort.GetInputOutputInfo(modelPath)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModel, err)
	}
	have := map[string]bool{}
	for _, in := range ins {
		have[in.Name] = true
	}
	for _, n := range inNames {
		if !have[n] {
			return fmt.Errorf("%w: model has no input %q", ErrModel, n)
		}
	}
	if len(ins) != len(inNames) {
		return fmt.Errorf("%w: model has %d inputs, manifest names %d", ErrModel, len(ins), len(inNames))
	}
	for _, o := range outs {
		if o.Name == output {
			return nil
		}
	}
	return fmt.Errorf("%w: model has no output %q", ErrModel, output)
}

// Fingerprint is the hex sha256 of model.onnx followed by the manifest's
// canonical JSON: it changes when either the weights or how they are run
// changes, so an index built with one model is never served with another.
func Fingerprint(modelPath string, m *models.Manifest) (string, error) {
	f, err := os.Open(modelPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrModel, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%w: read model: %v", ErrModel, err)
	}
	canon := *m
	canon.ModelSHA256 = "" // descriptive only; the bytes above already count
	mj, err := json.Marshal(canon)
	if err != nil {
		return "", fmt.Errorf("embed: manifest json: %w", err)
	}
	h.Write(mj)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Dims is the embedding width.
func (e *Engine) Dims() int { return e.man.Dims }

// Fingerprint identifies the model weights and manifest.
func (e *Engine) Fingerprint() string { return e.fingerprint }

// Manifest returns a copy of the engine's manifest.
func (e *Engine) Manifest() models.Manifest { return e.man }

// MaxBatch is the largest number of texts one Embed call accepts.
func (e *Engine) MaxBatch() int { return e.cfg.MaxBatch }

// Tokens returns the token ids the model would see for text, after
// normalisation and truncation.
func (e *Engine) Tokens(text string) ([]int64, error) {
	ids, _, err := e.encode(text, false)
	return ids, err
}

// checkWordSplit reports whether the tokenizer treats each space-separated
// word independently (true for SentencePiece/Metaspace and BERT word-piece
// pre-tokenizers), by comparing on probe texts: the whole text's tokens
// must be the words' own tokens, each word tokenised alone without special
// tokens, between the special tokens the tokenizer puts around a text
// (BERT's [CLS] and [SEP]), which it then sets as wordPre and wordSuf.
func (e *Engine) checkWordSplit() bool {
	if !e.man.CollapseWhitespace {
		return false
	}
	pre, suf, ok := e.specials()
	if !ok || e.man.AddSpecialTokens && len(suf) != 1 {
		// encode truncates a text with special tokens by keeping its
		// last token: the word path can do so only when that is the
		// one closing special token.
		return false
	}
	for _, p := range wordProbes {
		norm := e.man.NormalizeText(p)
		whole, err := e.tokenize(norm)
		if err != nil {
			return false
		}
		parts := slices.Clone(pre)
		for _, w := range strings.Split(norm, " ") {
			if w == "" {
				continue
			}
			ids, err := e.wordTokens(w)
			if err != nil {
				return false
			}
			parts = append(parts, ids...)
		}
		if !slices.Equal(whole, append(parts, suf...)) {
			return false
		}
	}
	e.wordPre, e.wordSuf = pre, suf
	return true
}

// wordTokens tokenises one word without special tokens.
func (e *Engine) wordTokens(w string) ([]int64, error) {
	enc, err := e.encodeRaw(w)
	if err != nil {
		return nil, err
	}
	return idsOf(enc), nil
}

// encodeSingle runs the tokenizer on normalised text. It turns a panic in
// the tokenizer library (it has index bugs on some Unicode input) into an
// error, so a request text can neither crash the process nor leave tokMu
// locked.
func (e *Engine) encodeSingle(text string) (enc *tokenizer.Encoding, err error) {
	return e.encodeWith(text, e.man.AddSpecialTokens)
}

// encodeRaw is encodeSingle without special tokens.
func (e *Engine) encodeRaw(text string) (*tokenizer.Encoding, error) {
	return e.encodeWith(text, false)
}

func (e *Engine) encodeWith(text string, special bool) (enc *tokenizer.Encoding, err error) {
	if e.ownNorm != nil {
		text = e.ownNorm.apply(text)
	} else if e.nfkc {
		text = norm.NFKC.String(text)
	}
	e.tokMu.Lock()
	defer e.tokMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			enc, err = nil, fmt.Errorf("embed: tokenize: tokenizer failed: %v", p)
		}
	}()
	enc, err = e.tok.EncodeSingle(text, special)
	if err != nil {
		return nil, fmt.Errorf("embed: tokenize: %w", err)
	}
	return enc, nil
}

// tokenize runs the tokenizer on normalised text.
func (e *Engine) tokenize(norm string) ([]int64, error) {
	enc, err := e.encodeSingle(norm)
	if err != nil {
		return nil, err
	}
	return idsOf(enc), nil
}

// idsOf is enc's token ids as the model takes them.
func idsOf(enc *tokenizer.Encoding) []int64 {
	raw := enc.GetIds()
	ids := make([]int64, len(raw))
	for i, x := range raw {
		ids[i] = int64(x)
	}
	return ids
}

// wordPath reports whether the normalised text norm is tokenised word by
// word: the tokenizer is word-separable, norm is ASCII, and it holds no
// added token's text (in any case).
func (e *Engine) wordPath(norm string) bool {
	if !e.wordSplit || !isASCII(norm) {
		return false
	}
	var lower string
	for _, a := range e.added {
		c := a[0]
		if strings.IndexByte(norm, c) < 0 && (c < 'a' || c > 'z' || strings.IndexByte(norm, c-'a'+'A') < 0) {
			continue
		}
		if lower == "" {
			lower = strings.ToLower(norm)
		}
		if strings.Contains(lower, a) {
			return false
		}
	}
	return true
}

// encodeWords tokenises ASCII text word by word through the cache, without
// special tokens, stopping once it has limit tokens or more (limit <= 0:
// all). NFKC and the other normalisers are the identity on ASCII, so this
// equals tokenising the whole text without special tokens (checked at Open
// by checkWordSplit).
func (e *Engine) encodeWords(norm string, limit int) ([]int64, error) {
	var ids []int64
	for _, w := range strings.Split(norm, " ") {
		if w == "" {
			continue
		}
		e.wordsMu.RLock()
		cached, ok := e.words[w]
		e.wordsMu.RUnlock()
		if !ok {
			var err error
			if cached, err = e.wordTokens(w); err != nil {
				return nil, err
			}
			if len(w) <= maxCachedWordBytes {
				e.cacheWord(w, cached)
			}
		}
		ids = append(ids, cached...)
		if limit > 0 && len(ids) >= limit {
			break
		}
	}
	return ids, nil
}

// cacheWord adds w to the word cache, resetting it when full.
func (e *Engine) cacheWord(w string, ids []int64) {
	cost := wordCost(w, ids)
	e.wordsMu.Lock()
	defer e.wordsMu.Unlock()
	if _, ok := e.words[w]; ok {
		return
	}
	if e.wordsBytes+cost > e.wordsMax {
		e.words, e.wordsBytes = map[string][]int64{}, 0
	}
	e.words[strings.Clone(w)] = ids
	e.wordsBytes += cost
}

// wordCacheBytes is the word cache's size by wordCost (for tests).
func (e *Engine) wordCacheBytes() int {
	e.wordsMu.RLock()
	defer e.wordsMu.RUnlock()
	return e.wordsBytes
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// encode tokenises one text as a request (the manifest's query prefix) or,
// with label set, as a label text at index time (its LabelPrefix).
func (e *Engine) encode(text string, label bool) (ids, types []int64, err error) {
	// The tokenizer library mis-handles invalid UTF-8 (it panics on some), so
	// the engine sees only valid text: each invalid byte becomes U+FFFD.
	text = strings.ToValidUTF8(text, "\uFFFD")
	if e.bertClean {
		text = bertCleanText(text)
	}
	if e.bertStrip {
		text = stripAccents(text)
	}
	normalize := e.man.NormalizeText
	if label {
		normalize = e.man.NormalizeLabel
	}
	norm := firstWords(normalize(text), e.man.MaxTokens)
	if IsBlank(norm) || IsBlank(text) {
		return nil, nil, ErrEmptyText
	}
	if e.wordPath(norm) {
		words, err := e.encodeWords(norm, e.man.MaxTokens)
		if err != nil {
			return nil, nil, err
		}
		if len(words) > 0 {
			ids := make([]int64, 0, len(e.wordPre)+len(words)+len(e.wordSuf))
			ids = append(append(append(ids, e.wordPre...), words...), e.wordSuf...)
			if len(ids) > e.man.MaxTokens {
				// As below: the first tokens, the closing special
				// token last (checkWordSplit: one at most).
				ids = append(ids[:e.man.MaxTokens-len(e.wordSuf)], e.wordSuf...)
			}
			return ids, make([]int64, len(ids)), nil
		}
		if len(e.wordPre)+len(e.wordSuf) == 0 {
			return nil, nil, ErrEmptyText
		}
		// No word token but special ones: as the tokenizer says.
	}
	enc, err := e.encodeSingle(norm)
	if err != nil {
		return nil, nil, err
	}
	raw := enc.GetIds()
	rawTypes := enc.GetTypeIds()
	if len(raw) == 0 {
		return nil, nil, ErrEmptyText
	}
	n := len(raw)
	if n > e.man.MaxTokens {
		n = e.man.MaxTokens
		if e.man.AddSpecialTokens && n >= 2 {
			// Keep the closing special token ([SEP]) a BERT model was trained with.
			ids = make([]int64, n)
			for i := 0; i < n-1; i++ {
				ids[i] = int64(raw[i])
			}
			ids[n-1] = int64(raw[len(raw)-1])
			types = make([]int64, n)
			for i := range types {
				if i < len(rawTypes) {
					types[i] = int64(rawTypes[i])
				}
			}
			return ids, types, nil
		}
	}
	ids = make([]int64, n)
	types = make([]int64, n)
	for i := 0; i < n; i++ {
		ids[i] = int64(raw[i])
		if i < len(rawTypes) {
			types[i] = int64(rawTypes[i])
		}
	}
	return ids, types, nil
}

// bertStripsAccents reads the BertNormalizer's strip_accents from a
// tokenizer.json normaliser: true, false, or null meaning "as lowercase".
func bertStripsAccents(raw json.RawMessage) (bool, error) {
	var tj struct {
		Normalizer struct {
			Lowercase    bool  `json:"lowercase"`
			StripAccents *bool `json:"strip_accents"`
		}
	}
	if err := json.Unmarshal(raw, &tj.Normalizer); err != nil {
		return false, fmt.Errorf("%w: tokenizer: %v", ErrModel, err)
	}
	if tj.Normalizer.StripAccents == nil {
		return tj.Normalizer.Lowercase, nil
	}
	return *tj.Normalizer.StripAccents, nil
}

// Embed returns one unit-length (if the manifest normalises) vector per
// text, in order. Blank texts fail with ErrEmptyText before the model runs.
// Texts are embedded as requests (the manifest's query prefix).
func (e *Engine) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.embed(ctx, texts, false)
}

// EmbedLabels is Embed for label texts at index time: each text gets the
// manifest's LabelPrefix ("passage: " for a model whose manifest sets
// passage_labels) instead of the query prefix.
func (e *Engine) EmbedLabels(ctx context.Context, texts []string) ([][]float32, error) {
	return e.embed(ctx, texts, true)
}

// Labels returns the engine as an embedder of label texts (EmbedLabels),
// for the index builders (indexbuild, labels).
func (e *Engine) Labels() LabelEmbedder { return LabelEmbedder{e} }

// LabelEmbedder embeds label texts with its engine's EmbedLabels.
type LabelEmbedder struct{ e *Engine }

// Embed implements the index builders' Embedder with EmbedLabels.
func (l LabelEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return l.e.EmbedLabels(ctx, texts)
}

func (e *Engine) embed(ctx context.Context, texts []string, label bool) (_ [][]float32, err error) {
	if len(texts) == 0 {
		return nil, nil
	}
	ctx, sp := tracing.Start(ctx, tracing.Embed)
	defer func() { endSpan(sp, err) }()
	if len(texts) > e.cfg.MaxBatch {
		return nil, fmt.Errorf("%w: %d texts, limit %d", ErrTooMany, len(texts), e.cfg.MaxBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // do not tokenise a batch nobody waits for
	}
	if e.queue != nil {
		if err := e.queue.Admit(len(texts)); err != nil {
			return nil, err // refused: no tokenising either
		}
	}
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	type item struct {
		ids, types []int64
		pos        int
	}
	items := make([]item, len(texts))
	for i, t := range texts {
		ids, types, err := e.encode(t, label)
		if err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
		items[i] = item{ids: ids, types: types, pos: i}
	}
	if sp.IsRecording() {
		tokens := 0
		for _, it := range items {
			tokens += len(it.ids)
		}
		sp.SetAttributes(tracing.KeyModel.String(e.man.Name), tracing.KeyTexts.Int(len(texts)), tracing.KeyTokens.Int(tokens))
	}
	if e.queue != nil {
		queued := make([]tokenized, len(items))
		for i, it := range items {
			queued[i] = tokenized{ids: it.ids, types: it.types}
		}
		return e.embedQueued(ctx, queued)
	}
	// Sort by length so each chunk pads little; results go back in order.
	sort.SliceStable(items, func(a, b int) bool { return len(items[a].ids) < len(items[b].ids) })
	out := make([][]float32, len(texts))
	runChunk := func(ctx context.Context, chunk []item) error {
		ids := make([][]int64, len(chunk))
		types := make([][]int64, len(chunk))
		for i, it := range chunk {
			ids[i], types[i] = it.ids, it.types
		}
		vecs, err := e.run(ctx, ids, types)
		if err != nil {
			return err
		}
		for i, it := range chunk {
			out[it.pos] = vecs[i]
		}
		return nil
	}
	if len(items) <= e.cfg.ChunkSize {
		if err := runChunk(ctx, items); err != nil {
			return nil, err
		}
		return out, nil
	}
	// Several chunks (a long batch, or a batch-dependent model that runs
	// each text alone) run concurrently; e.sem bounds the model runs, so
	// this uses idle cores without exceeding MaxConcurrent. The first error
	// cancels the rest.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for start := 0; start < len(items); start += e.cfg.ChunkSize {
		chunk := items[start:min(start+e.cfg.ChunkSize, len(items))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runChunk(runCtx, chunk); err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		if err := ctx.Err(); err != nil {
			return nil, err // the caller's cancellation, not a chunk's
		}
		return nil, firstErr
	}
	return out, nil
}

// endSpan ends an embed span, marking it failed with the error's kind
// only: an error message may quote the text.
func endSpan(sp trace.Span, err error) {
	if err != nil && sp.IsRecording() {
		sp.SetStatus(codes.Error, errKind(err))
	}
	sp.End()
}

// errKind names an embedding error for a span without its message.
func errKind(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, ErrQueueFull):
		return "queue full"
	case errors.Is(err, ErrEmptyText):
		return "empty text"
	case errors.Is(err, ErrTooMany):
		return "too many texts"
	case errors.Is(err, ErrClosed):
		return "engine closed"
	}
	return "model error"
}

// Infer runs the model on already-tokenised texts: the bare ONNX Runtime
// call (tensors in, pooled vectors out) without tokenisation. Benchmarks use
// it as the baseline that end-to-end latency is compared against.
func (e *Engine) Infer(ctx context.Context, ids [][]int64) ([][]float32, error) {
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	types := make([][]int64, len(ids))
	for i, x := range ids {
		if len(x) == 0 {
			return nil, fmt.Errorf("text %d: %w", i, ErrEmptyText)
		}
		types[i] = make([]int64, len(x))
	}
	return e.run(ctx, ids, types)
}

// run executes one padded batch. It never returns while ONNX Runtime may
// still read the input tensors: cancellation sets the run's terminate flag
// and then waits for Run to come back.
func (e *Engine) run(ctx context.Context, ids, types [][]int64) ([][]float32, error) {
	return e.runSpans(ctx, ids, types, nil)
}

// runSpans is run, where spans[i] (when given) lists token ranges of text
// i whose pooled vectors follow its own in its result (poolSpans).
func (e *Engine) runSpans(ctx context.Context, ids, types [][]int64, spans [][][2]int) ([][]float32, error) {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.sem }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	b := len(ids)
	seq := 0
	for _, x := range ids {
		seq = max(seq, len(x))
	}
	idData := make([]int64, b*seq)
	maskData := make([]int64, b*seq)
	var typeData []int64
	if e.man.Inputs.TokenTypeIDs != "" {
		typeData = make([]int64, b*seq)
	}
	pad := int64(e.man.PadID)
	for i, x := range ids {
		row := idData[i*seq : (i+1)*seq]
		for j := range row {
			if j < len(x) {
				row[j] = x[j]
				maskData[i*seq+j] = 1
				if typeData != nil {
					typeData[i*seq+j] = types[i][j]
				}
			} else {
				row[j] = pad
			}
		}
	}
	shape := ort.NewShape(int64(b), int64(seq))
	inputs := make([]ort.Value, 0, 3)
	destroy := func() {
		for _, v := range inputs {
			_ = v.Destroy()
		}
	}
	defer destroy()
	for _, data := range [][]int64{idData, maskData, typeData} {
		if data == nil {
			continue
		}
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor: %v", ErrInference, err)
		}
		inputs = append(inputs, t)
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: run options: %v", ErrInference, err)
	}
	defer ro.Destroy()

	done := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			_ = ro.Terminate()
		case <-done:
		}
	}()
	outputs := []ort.Value{nil}
	runErr := e.sess.RunWithOptions(inputs, outputs, ro)
	close(done)
	<-watcherDone
	if outputs[0] != nil {
		defer outputs[0].Destroy()
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %v", ErrInference, runErr)
	}
	t, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("%w: output %q is not a float32 tensor", ErrModel, e.man.Output)
	}
	out, err := e.pool(t.GetShape(), t.GetData(), maskData, b, seq)
	if err != nil {
		return nil, err
	}
	for i := range spans {
		if len(spans[i]) > 0 {
			if out[i], err = e.poolSpans(out[i], t.GetData(), i, seq, spans[i]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (e *Engine) pool(shape ort.Shape, data []float32, mask []int64, b, seq int) ([][]float32, error) {
	d := e.man.Dims
	out := make([][]float32, b)
	switch e.man.Pooling {
	case models.PoolNone:
		if len(shape) != 2 || shape[0] != int64(b) || shape[1] != int64(d) {
			return nil, fmt.Errorf("%w: output shape %v, want [%d %d]", ErrModel, shape, b, d)
		}
		for i := range out {
			out[i] = append([]float32(nil), data[i*d:(i+1)*d]...)
		}
	case models.PoolMean, models.PoolCLS:
		if len(shape) != 3 || shape[0] != int64(b) || shape[1] != int64(seq) || shape[2] != int64(d) {
			return nil, fmt.Errorf("%w: output shape %v, want [%d %d %d]", ErrModel, shape, b, seq, d)
		}
		for i := range out {
			v := make([]float32, d)
			if e.man.Pooling == models.PoolCLS {
				copy(v, data[i*seq*d:i*seq*d+d])
			} else {
				var n float32
				for j := 0; j < seq; j++ {
					if mask[i*seq+j] == 0 {
						continue
					}
					n++
					tok := data[(i*seq+j)*d : (i*seq+j+1)*d]
					for k, x := range tok {
						v[k] += x
					}
				}
				for k := range v {
					v[k] /= n
				}
			}
			out[i] = v
		}
	}
	if e.man.Normalize {
		for _, v := range out {
			normalize(v)
		}
	}
	for i, v := range out {
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("%w: non-finite value in embedding %d", ErrInference, i)
			}
		}
	}
	return out, nil
}

func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}

// Close waits for runs in flight and releases the ONNX session. It is
// idempotent.
func (e *Engine) Close() error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if e.queue != nil {
		// No Embed call is in flight (closeMu is held), so the queue is
		// empty; Close stops its workers before the session goes.
		_ = e.queue.Close()
	}
	if err := e.sess.Destroy(); err != nil {
		return fmt.Errorf("embed: destroy session: %w", err)
	}
	return nil
}
