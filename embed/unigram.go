package embed

import (
	"sync"
	"sync/atomic"

	"github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/model/unigram"
	"github.com/sugarme/tokenizer/pretrained"
)

// sugarme/tokenizer's Unigram model (use-lite-en's) caches every sequence
// it tokenises in a go-cache whose entries expire after 5 ns but are only
// removed by a janitor every 10 minutes: unique text (logs, hashes, names)
// grows the heap by its size for 10 minutes, about 100 MiB in 5 minutes at
// a few hundred unique words a second. The cache is unexported, so the
// engine wraps the model and, once the text tokenised since the last swap
// passes a budget, swaps in a fresh model read from tokenizer.json: the old
// cache is dropped whole (go-cache's finalizer stops its janitor).

// unigramCacheBudget bounds, by unigramCost, the text a Unigram model
// holds in its cache. Small: for ASCII text the engine's word cache sits in
// front of it, and whole non-ASCII texts rarely repeat.
const unigramCacheBudget = 4 << 20

// unigramCost is about what caching seq costs: the key, its tokens
// (strings of about the same bytes) and the entry.
func unigramCost(seq string) int64 { return int64(2*len(seq) + 160) }

// boundedModel is a tokenizer.Model that swaps its Unigram model for a
// fresh one when the cache may hold more than budget.
type boundedModel struct {
	cur    atomic.Pointer[modelBox]
	used   atomic.Int64
	budget int64
	load   func() (tokenizer.Model, error)
	mu     sync.Mutex // one swap at a time
	swaps  atomic.Int64
}

type modelBox struct{ m tokenizer.Model }

var _ tokenizer.Model = (*boundedModel)(nil)

// boundUnigramCache wraps tok's model when it is a Unigram; path is the
// tokenizer.json it was read from.
func boundUnigramCache(tok *tokenizer.Tokenizer, path string, budget int64) {
	if _, ok := tok.GetModel().(*unigram.Unigram); !ok {
		return
	}
	b := &boundedModel{budget: budget, load: func() (tokenizer.Model, error) {
		t, err := pretrained.FromFile(path)
		if err != nil {
			return nil, err
		}
		return t.GetModel(), nil
	}}
	b.cur.Store(&modelBox{tok.GetModel()})
	tok.WithModel(b)
}

func (b *boundedModel) model() tokenizer.Model { return b.cur.Load().m }

// Tokenize implements tokenizer.Model.
func (b *boundedModel) Tokenize(seq string) ([]tokenizer.Token, error) {
	toks, err := b.model().Tokenize(seq)
	if b.used.Add(unigramCost(seq)) > b.budget {
		b.renew()
	}
	return toks, err
}

// renew swaps in a fresh model. Should reading it fail (the file changed
// since start), the current model stays and the count restarts, so the
// daemon keeps answering.
func (b *boundedModel) renew() {
	if !b.mu.TryLock() {
		return // another call is swapping
	}
	defer b.mu.Unlock()
	if b.used.Load() <= b.budget {
		return
	}
	if m, err := b.load(); err == nil {
		b.cur.Store(&modelBox{m})
		b.swaps.Add(1)
	}
	b.used.Store(0)
}

// TokenToId implements tokenizer.Model.
func (b *boundedModel) TokenToId(token string) (int, bool) { return b.model().TokenToId(token) }

// IdToToken implements tokenizer.Model.
func (b *boundedModel) IdToToken(id int) (string, bool) { return b.model().IdToToken(id) }

// GetVocab implements tokenizer.Model.
func (b *boundedModel) GetVocab() map[string]int { return b.model().GetVocab() }

// GetVocabSize implements tokenizer.Model.
func (b *boundedModel) GetVocabSize() int { return b.model().GetVocabSize() }

// Save implements tokenizer.Model.
func (b *boundedModel) Save(path string, prefixOpt ...string) error {
	return b.model().Save(path, prefixOpt...)
}
