// Package testindex builds small indexes for unit tests: a deterministic
// bag-of-words embedder, a test catalog and a calibration centred on the
// fake's similarities. The real model is exercised by the daemon and embed
// tests.
package testindex

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/calibrate"
	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/labels"
)

// Embedder is a deterministic fake: a hashed bag of lower-cased words,
// L2-normalised, so texts sharing words are similar. Unit tests use it; the
// real model is exercised by the daemon and embed tests.
type Embedder struct {
	Dims int
	Fail error
}

func (b Embedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if b.Fail != nil {
		return nil, b.Fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, b.Dims)
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if stop[w] {
				continue
			}
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%uint32(b.Dims)]++
		}
		var s float64
		for _, x := range v {
			s += float64(x * x)
		}
		if s == 0 {
			v[0] = 1
			s = 1
		}
		for k := range v {
			v[k] /= float32(math.Sqrt(s))
		}
		out[i] = v
	}
	return out, nil
}

var stop = map[string]bool{"the": true, "a": true, "my": true, "to": true, "of": true, "and": true, "in": true, "on": true, "it": true, "me": true, "is": true, "for": true}

// Catalog is the catalog most unit tests route and classify against.
const Catalog = `{
 "categories": [
  {"id": "github", "description": "github repositories issues pull requests notifications",
   "examples": ["check github notifications", "list open pull requests", "create github issue"],
   "keywords": ["github"], "patterns": ["github\\.com/"]},
  {"id": "filesystem", "description": "read write list local files directories",
   "examples": ["read file config json", "list files directory", "write file notes"]},
  {"id": "jira", "description": "jira tickets sprint board",
   "examples": ["show jira ticket", "move ticket done"], "patterns": ["\\b[A-Z][A-Z0-9]+-\\d+\\b"]},
  {"id": "meta", "description": "what tools can you do help",
   "examples": ["what can you do", "which tools available"]}
 ],
 "servers": [
  {"id": "github", "description": "github api repositories issues pull requests", "categories": ["github"],
   "tools": [
    {"name": "list_notifications", "description": "list github notifications unread", "examples": ["any github notifications"]},
    {"name": "create_issue", "description": "create github issue repository"}]},
  {"id": "filesystem", "description": "local files directories", "categories": ["filesystem"],
   "tools": [
    {"name": "read_file", "description": "read file contents", "examples": ["read file config json"]},
    {"name": "list_directory", "description": "list files directory"}]},
  {"id": "jira", "description": "jira tickets", "categories": ["jira"],
   "tools": [{"name": "get_issue", "description": "get jira ticket details comments"}]},
  {"id": "meta", "description": "classifier meta tools", "categories": ["meta"],
   "tools": [{"name": "analyze_prompt", "description": "which tools categories prompt needs"}]}
 ]
}`

// Parse parses a catalog written in a test.
func Parse(tb testing.TB, js string) *catalog.Catalog {
	tb.Helper()
	cat, err := catalog.Parse([]byte(js), "")
	if err != nil {
		tb.Fatal(err)
	}
	return cat
}

// Build indexes cat with the fake of dims dimensions (no calibration).
func Build(tb testing.TB, cat *catalog.Catalog, dims int) *index.Index {
	tb.Helper()
	idx, err := labels.Embed(context.Background(), cat, Embedder{Dims: dims}, labels.Model{Name: "bow", Fingerprint: "f", Dims: dims}, labels.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return idx
}

// Calibration is the prior calibration with its maps centred on the
// fake's scale: the prior is tuned for sentence encoders, and the
// bag-of-words fake has lower similarities.
func Calibration() calibrate.Calibration {
	cal := calibrate.DefaultCalibration()
	cal.Categories = calibrate.SingleLabel{Method: "test", T: 0.1, OOS: -10, Threshold: 0.4,
		InScope: calibrate.Binary{Method: "test", A: -12, B: 3.6}}
	b := calibrate.Binary{Method: "test", A: -12, B: 4.2, Threshold: 0.5}
	cal.CategoriesMulti, cal.Servers, cal.Tools = b, b, b
	return cal
}

// FitCatalog has three examples per category and two per tool: enough for
// the build pipeline to fit every multi-label map on the catalog itself
// (the indexbuild and gen-index eval tests use it).
const FitCatalog = `{"categories": [
  {"id": "weather", "description": "weather forecasts", "examples": ["will it rain tomorrow", "forecast for the weekend", "is it cold outside"]},
  {"id": "stocks", "description": "stock market prices", "examples": ["price of apple shares", "how did the market close", "dow jones today"]}],
 "servers": [
  {"id": "meteo", "description": "weather service", "categories": ["weather"], "tools": [
    {"name": "forecast", "description": "weather forecast for a city", "examples": ["rain in paris tomorrow", "sunny in rome this weekend"]},
    {"name": "alerts", "description": "storm and heat alerts", "examples": ["any storm warnings", "heat alert today"]}]},
  {"id": "exchange", "description": "stock exchange data", "categories": ["stocks"], "tools": [
    {"name": "quote", "description": "latest share price", "examples": ["apple share price", "tesla stock quote"]},
    {"name": "close", "description": "market close summary", "examples": ["how did the market close", "nasdaq close today"]}]}]}`
