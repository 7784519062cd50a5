package rank

import (
	"math"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"

	"github.com/classifierd/classifierd/index"
)

// bm25 is an Okapi BM25 index over each tool's name, description and
// keywords (not its examples: an example scored as a query at index time
// must not find itself). It adds the lexical overlap that a small
// embedding model misses: rare words such as product names and file
// formats that the prompt and the tool share.
type bm25 struct {
	postings map[string][]posting
	idf      map[string]float64
}

type posting struct {
	doc int     // a label, or for exampleBM25 a vector
	tf  float64 // already length-normalised: tf·(k1+1)/(tf+k1·(1-b+b·dl/avgdl))
}

const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

func newBM25(idx *index.Index, labels []int) bm25 {
	texts := make([]string, len(labels))
	for i, li := range labels {
		l := &idx.Labels[li]
		var text strings.Builder
		for k, src := range l.Sources {
			if src != index.SourceExample {
				text.WriteString(l.Texts[k])
				text.WriteByte(' ')
			}
		}
		text.WriteString(strings.Join(l.Keywords, " "))
		texts[i] = text.String()
	}
	return newBM25Docs(labels, texts)
}

// newBM25Docs indexes texts[i] as document ids[i].
func newBM25Docs(ids []int, texts []string) bm25 {
	b := bm25{postings: map[string][]posting{}, idf: map[string]float64{}}
	docs := make([]map[string]float64, len(ids))
	lens := make([]float64, len(ids))
	var total float64
	for i, text := range texts {
		tf := map[string]float64{}
		for _, w := range lexWords(text) {
			tf[w]++
			lens[i]++
		}
		docs[i] = tf
		total += lens[i]
	}
	if len(ids) == 0 || total == 0 {
		return b
	}
	avg := total / float64(len(ids))
	df := map[string]int{}
	for _, tf := range docs {
		for w := range tf {
			df[w]++
		}
	}
	n := float64(len(ids))
	for w, k := range df {
		b.idf[w] = math.Log(1 + (n-float64(k)+0.5)/(float64(k)+0.5))
	}
	for i, tf := range docs {
		norm := bm25K1 * (1 - bm25B + bm25B*lens[i]/avg)
		for w, f := range tf {
			b.postings[w] = append(b.postings[w], posting{doc: ids[i], tf: f * (bm25K1 + 1) / (f + norm)})
		}
	}
	return b
}

// score returns the BM25 score of each document that shares a word with
// text (each distinct query word counts once).
func (b *bm25) score(text string) map[int]float64 {
	if len(b.postings) == 0 {
		return nil
	}
	return b.scoreWords(distinctLexWords(text))
}

// scoreWords is score for a text's distinctLexWords, so a turn's words
// are split and stemmed once for both BM25 indexes. Only the postings of
// the query's words are read: the cost is in the matching documents, not
// in the catalog's size.
func (b *bm25) scoreWords(words []string) map[int]float64 {
	if len(b.postings) == 0 {
		return nil
	}
	var out map[int]float64
	for _, w := range words {
		ps := b.postings[w]
		if len(ps) == 0 {
			continue
		}
		if out == nil {
			out = map[int]float64{}
		}
		idf := b.idf[w]
		for _, p := range ps {
			out[p.doc] += idf * p.tf
		}
	}
	return out
}

// scoreDense is scoreWords into a slice indexed by document (n of them),
// nil when no document shares a word: a turn's scores are read once per
// label, and at 100,000 tools a map of every matching document cost more
// than the ranking around it. Sums are taken in the same order as
// scoreWords, so the values are the same.
//
// alloc returns a zeroed slice of n (nil: make).
func (b *bm25) scoreDense(words []string, n int, alloc func(int) []float64) []float64 {
	var out []float64
	for _, w := range words {
		ps := b.postings[w]
		if len(ps) == 0 {
			continue
		}
		if out == nil {
			out = zeroed(n, alloc)
		}
		idf := b.idf[w]
		for _, p := range ps {
			out[p.doc] += idf * p.tf
		}
	}
	return out
}

// lexWords splits text into lower-case word stems, dropping stop words
// and one-letter words.
func lexWords(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(w) < 2 || stopWords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// distinctLexWords returns each of lexWords(s) once, stemming each
// distinct word once, so a long paste costs one pass and a stem per
// distinct word, and allocates for its distinct words only (not a
// lower-cased copy of s and a slice of all its words: a 240 KB prompt
// made 1 MB of garbage here).
func distinctLexWords(s string) []string {
	var out []string
	seenWord, seenStem := map[string]bool{}, map[string]bool{}
	eachLowerField(s, func(w string) {
		if len(w) < 2 || stopWords[w] || seenWord[w] {
			return
		}
		seenWord[w] = true
		if st := stem(w); !seenStem[st] {
			seenStem[st] = true
			out = append(out, st)
		}
	})
	return out
}

func notLetterOrDigit(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// eachLowerField calls fn with each field of
// strings.FieldsFunc(strings.ToLower(s), notLetterOrDigit), in order,
// without building either: it splits s itself and lower-cases each field
// (no copy when it is lower-case already), splitting a lowered field
// again in the unlikely case that lower-casing made a separator of one
// of its runes.
func eachLowerField(s string, fn func(string)) {
	emit := func(f string) {
		w := strings.ToLower(f)
		if strings.IndexFunc(w, notLetterOrDigit) < 0 {
			fn(w)
			return
		}
		for _, x := range strings.FieldsFunc(w, notLetterOrDigit) {
			fn(x)
		}
	}
	start := -1
	for i, r := range s {
		if !notLetterOrDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			emit(s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		emit(s[start:])
	}
}

// exampleBM25 is a BM25 index with each tool example its own document. A
// tool scores as its best example, the lexical twin of the nearest-example
// cosine: a prompt that shares rare words ("Kakaku.com", "NFT", "Arxiv")
// with one example of a tool is likely meant for it, however far the
// tool's other examples are. Pooled into one document per tool, a broad
// tool's examples would dilute one another.
type exampleBM25 struct {
	bm    bm25
	owner []int // vector -> tool label, for example vectors
}

func newExampleBM25(idx *index.Index, tools []int) exampleBM25 {
	owner := make([]int, idx.NumVectors())
	var ids []int
	var texts []string
	for _, li := range tools {
		l := &idx.Labels[li]
		for k, src := range l.Sources {
			if src == index.SourceExample {
				ids = append(ids, l.First+k)
				texts = append(texts, l.Texts[k])
				owner[l.First+k] = li
			}
		}
	}
	return exampleBM25{bm: newBM25Docs(ids, texts), owner: owner}
}

// score returns each tool's best example score for text, leaving out the
// example vector held (-1: none), which is the text itself when an example
// is scored as a query at calibration time.
func (e *exampleBM25) score(text string, held int) map[int]float64 {
	return e.scoreWords(distinctLexWords(text), held)
}

// scoreWords is score for a text's distinctLexWords.
func (e *exampleBM25) scoreWords(words []string, held int) map[int]float64 {
	per := e.bm.scoreWords(words)
	if per == nil {
		return nil
	}
	out := make(map[int]float64, len(per))
	for v, s := range per {
		if v == held {
			continue
		}
		if li := e.owner[v]; s > out[li] {
			out[li] = s
		}
	}
	return out
}

// scoreDense is scoreWords as a slice indexed by label (labels of them,
// nil when no example shares a word), for a turn (see bm25.scoreDense).
func (e *exampleBM25) scoreDense(words []string, held, labels int, alloc func(int) []float64) []float64 {
	per := e.bm.scoreDense(words, len(e.owner), nil)
	if per == nil {
		return nil
	}
	out := zeroed(labels, alloc)
	for v, s := range per {
		if s == 0 || v == held {
			continue
		}
		if li := e.owner[v]; s > out[li] {
			out[li] = s
		}
	}
	return out
}

// zeroed returns alloc(n), or a new slice of n without alloc.
func zeroed(n int, alloc func(int) []float64) []float64 {
	if alloc == nil {
		return make([]float64, n)
	}
	return alloc(n)
}

// stem reduces a lower-case word to its Snowball (Porter2) English stem,
// so that "files", "filed" and "filing" meet "file"; applied alike to
// both sides. Stop words were dropped before, so stem them too.
func stem(w string) string { return english.Stem(w, true) }

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or of to in on for with is are be can you me my i your it this that
		what how do does please from by at as about any some help find get give tell show want need would like could
		should will am was were has have had which who whom whose when where why there their them they we our us its
		into out up so if then than also just more most very all`) {
		m[w] = true
	}
	return m
}()
