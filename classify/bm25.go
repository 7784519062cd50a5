package classify

import (
	"math"
	"strings"
	"unicode"

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
	label int
	tf    float64 // already length-normalised: tf·(k1+1)/(tf+k1·(1-b+b·dl/avgdl))
}

const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

func newBM25(idx *index.Index, labels []int) bm25 {
	b := bm25{postings: map[string][]posting{}, idf: map[string]float64{}}
	docs := make([]map[string]float64, len(labels))
	lens := make([]float64, len(labels))
	var total float64
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
		tf := map[string]float64{}
		for _, w := range lexWords(text.String()) {
			tf[w]++
			lens[i]++
		}
		docs[i] = tf
		total += lens[i]
	}
	if len(labels) == 0 || total == 0 {
		return b
	}
	avg := total / float64(len(labels))
	df := map[string]int{}
	for _, tf := range docs {
		for w := range tf {
			df[w]++
		}
	}
	n := float64(len(labels))
	for w, k := range df {
		b.idf[w] = math.Log(1 + (n-float64(k)+0.5)/(float64(k)+0.5))
	}
	for i, tf := range docs {
		norm := bm25K1 * (1 - bm25B + bm25B*lens[i]/avg)
		for w, f := range tf {
			b.postings[w] = append(b.postings[w], posting{label: labels[i], tf: f * (bm25K1 + 1) / (f + norm)})
		}
	}
	return b
}

// score returns the BM25 score of each label that shares a word with text
// (each distinct query word counts once).
func (b *bm25) score(text string) map[int]float64 {
	if len(b.postings) == 0 {
		return nil
	}
	var out map[int]float64
	seen := map[string]bool{}
	for _, w := range lexWords(text) {
		if seen[w] {
			continue
		}
		seen[w] = true
		ps := b.postings[w]
		if len(ps) == 0 {
			continue
		}
		if out == nil {
			out = map[int]float64{}
		}
		idf := b.idf[w]
		for _, p := range ps {
			out[p.label] += idf * p.tf
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

// stem strips a few English inflections so that "files", "filed" and
// "filing" meet "file"; crude, but applied alike to both sides.
func stem(w string) string {
	for _, suf := range []string{"ing", "ies", "es", "s", "ed"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

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
