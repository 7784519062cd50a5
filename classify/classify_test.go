package classify

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"strings"
	"testing"

	"github.com/classifierd/classifierd/catalog"
	"github.com/classifierd/classifierd/index"
	"github.com/classifierd/classifierd/indexbuild"
)

// bowEmbedder is a deterministic fake: a hashed bag of lower-cased words,
// L2-normalised, so texts sharing words are similar. Unit tests use it; the
// real model is exercised by the daemon and embed tests.
type bowEmbedder struct {
	dims int
	fail error
}

func (b bowEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if b.fail != nil {
		return nil, b.fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, b.dims)
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}) {
			if stop[w] {
				continue
			}
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%uint32(b.dims)]++
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

const testCatalog = `{
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

// parseCatalog parses a catalog written in a test.
func parseCatalog(t testing.TB, js string) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Parse([]byte(js), "")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// bowClassifier indexes cat with the bag-of-words fake of dims dimensions
// and serves it with emb (the fake when nil), on the prior calibration.
func bowClassifier(t testing.TB, cat *catalog.Catalog, dims int, emb Embedder) *Classifier {
	t.Helper()
	fake := bowEmbedder{dims: dims}
	idx, err := indexbuild.Build(context.Background(), cat, fake, indexbuild.Model{Name: "bow", Fingerprint: "f", Dims: dims}, indexbuild.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if emb == nil {
		emb = fake
	}
	c, err := New(idx, emb, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTestClassifier(t testing.TB, emb Embedder) *Classifier {
	t.Helper()
	c := bowClassifier(t, parseCatalog(t, testCatalog), 256, emb)
	// The prior calibration is tuned for sentence encoders; the bag-of-words
	// fake has lower similarities, so centre the maps on its scale.
	c.cal.Categories = SingleLabel{Method: "test", T: 0.1, OOS: -10, Threshold: 0.4,
		InScope: Binary{Method: "test", A: -12, B: 3.6}}
	b := Binary{Method: "test", A: -12, B: 4.2, Threshold: 0.5}
	c.cal.CategoriesMulti, c.cal.Servers, c.cal.Tools = b, b, b
	return c
}

func f32(v float32) *float32 { return &v }

func TestClassify(t *testing.T) {
	c := newTestClassifier(t, nil)
	ctx := context.Background()
	cases := []struct {
		text     string
		want     string // "" means abstain
		evidence string
	}{
		{"check my github notifications", "github", "nearest example"},
		{"read the config json file", "filesystem", "nearest"},
		{"move ticket PROJ-123 to done", "jira", "pattern matched \"PROJ-123\""},
		{"bake a chocolate cake", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			res, err := c.Classify(ctx, tc.text, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !res.Abstained || len(res.Categories) != 0 || !strings.HasPrefix(res.Reasoning, "abstained") {
					t.Fatalf("got %+v, want abstain", res)
				}
				return
			}
			if res.Abstained || res.Categories[0].ID != tc.want {
				t.Fatalf("got %+v, want %s first", res, tc.want)
			}
			if !strings.Contains(res.Categories[0].Evidence, tc.evidence) || !strings.HasPrefix(res.Reasoning, tc.want) {
				t.Fatalf("evidence %q / reasoning %q, want %q", res.Categories[0].Evidence, res.Reasoning, tc.evidence)
			}
			var sum float64
			for _, s := range res.Categories {
				sum += s.Confidence
			}
			if sum > 1+1e-9 {
				t.Fatalf("single-label confidences sum to %v > 1", sum)
			}
		})
	}
	t.Run("deterministic reasoning", func(t *testing.T) {
		a, _ := c.Classify(ctx, "list open pull requests", 3, nil)
		b, _ := c.Classify(ctx, "list open pull requests", 3, nil)
		if a.Reasoning != b.Reasoning {
			t.Fatalf("%q != %q", a.Reasoning, b.Reasoning)
		}
	})
	t.Run("min_confidence 0 returns top_k", func(t *testing.T) {
		res, err := c.Classify(ctx, "bake a chocolate cake", 2, f32(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Categories) != 2 || res.Abstained {
			t.Fatalf("got %+v, want 2 categories", res)
		}
	})
}

func TestClassifyBadInput(t *testing.T) {
	c := newTestClassifier(t, nil)
	ctx := context.Background()
	cases := []struct {
		name string
		text string
		k    int
		mc   *float32
		want error
	}{
		{"empty", "", 0, nil, ErrEmptyText},
		{"blank", " \t\n", 0, nil, ErrEmptyText},
		{"too long", strings.Repeat("x", 9000), 0, nil, ErrTextTooLong},
		{"negative k", "hi", -1, nil, ErrBadArgument},
		{"huge k", "hi", 101, nil, ErrBadArgument},
		{"confidence above 1", "hi", 0, f32(1.5), ErrBadArgument},
		{"confidence NaN", "hi", 0, f32(float32(math.NaN())), ErrBadArgument},
		{"bad utf8", "\xff", 0, nil, ErrBadArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Classify(ctx, tc.text, tc.k, tc.mc)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	c := newTestClassifier(t, nil)
	ctx := context.Background()
	t.Run("github first", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Query: "check my github notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) == 0 || res.Servers[0].ID != "github" || res.Tools[0].Name != "list_notifications" {
			t.Fatalf("got %+v", res)
		}
		for _, tl := range res.Tools {
			if tl.Server != "github" && !containsServer(res.Servers, tl.Server) {
				t.Fatalf("tool %s/%s from an unselected server", tl.Server, tl.Name)
			}
		}
	})
	t.Run("two needs give two servers", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Query: "read the config json file and create a github issue"})
		if err != nil {
			t.Fatal(err)
		}
		if !containsServer(res.Servers, "github") || !containsServer(res.Servers, "filesystem") {
			t.Fatalf("servers = %+v, want github and filesystem", res.Servers)
		}
	})
	t.Run("include and exclude", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Query: "check my github notifications", Exclude: []string{"github"}, MinConfidence: f32(0)})
		if err != nil {
			t.Fatal(err)
		}
		if containsServer(res.Servers, "github") {
			t.Fatal("excluded server returned")
		}
		res, err = c.Route(ctx, RouteQuery{Query: "check my github notifications", Include: []string{"jira"}, MinConfidence: f32(0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) != 1 || res.Servers[0].ID != "jira" || len(res.Candidates) != 1 {
			t.Fatalf("include jira: %+v", res.Servers)
		}
		if _, err := c.Route(ctx, RouteQuery{Query: "x", Include: []string{"nope"}}); !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("unknown include: %v", err)
		}
	})
	t.Run("no-match policies", func(t *testing.T) {
		for _, tc := range []struct {
			p     NoMatch
			tools int
			want  string
		}{
			{NoMatchDefault, 0, "policy NONE"},
			{NoMatchNone, 0, "policy NONE"},
			{NoMatchMeta, 1, "policy META"},
			{NoMatchAll, 6, "policy ALL"},
		} {
			res, err := c.Route(ctx, RouteQuery{Query: "bake a chocolate cake", OnNoMatch: tc.p})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Abstained || len(res.Tools) != tc.tools || !strings.Contains(res.PolicyReason, tc.want) {
				t.Fatalf("%v: abstained=%v tools=%d reason=%q", tc.p, res.Abstained, len(res.Tools), res.PolicyReason)
			}
			if tc.p == NoMatchMeta && res.Tools[0].Name != "analyze_prompt" {
				t.Fatalf("META returned %v", res.Tools)
			}
		}
	})
	t.Run("follow-up keeps the conversation's server", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Messages: []Message{
			{Role: "user", Content: "check my github notifications"},
			{Role: "assistant", Content: "You have 3 unread github notifications."},
			{Role: "user", Content: "and what about the second one?"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) == 0 || res.Servers[0].ID != "github" || !strings.Contains(res.Servers[0].Evidence, "earlier conversation") {
			t.Fatalf("got %+v", res.Servers)
		}
	})
	t.Run("topic change moves away", func(t *testing.T) {
		res, err := c.Route(ctx, RouteQuery{Messages: []Message{
			{Role: "user", Content: "check my github notifications"},
			{Role: "user", Content: "now read the config json file"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Servers) == 0 || res.Servers[0].ID != "filesystem" {
			t.Fatalf("got %+v", res.Servers)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, q := range []RouteQuery{
			{},
			{Messages: []Message{{Role: "assistant", Content: "hi"}}},
			{Query: "x", Messages: []Message{{Role: "robot", Content: "x"}}},
			{Query: "x", MaxTools: -1},
			{Query: "x", MaxServers: 1000},
			{Query: strings.Repeat("y", 9000)},
		} {
			if _, err := c.Route(ctx, q); err == nil {
				t.Fatalf("%+v: no error", q)
			}
		}
	})
}

func containsServer(ss []Scored, id string) bool {
	for _, s := range ss {
		if s.ID == id {
			return true
		}
	}
	return false
}

func TestAnalyze(t *testing.T) {
	ctx := context.Background()
	c := newTestClassifier(t, nil)
	t.Run("empty prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "   "})
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Categories) != 1 || a.Categories[0] != "meta" || a.Confidence != 0 || a.Reasoning != EmptyPromptReasoning {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("clear prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "check github notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Categories[0] != "github" || a.Confidence < 0.7 || !strings.HasPrefix(a.NextStep, "proceed") || a.Warning != "" {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("several needs", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "read the config json file and create a github issue"})
		if err != nil {
			t.Fatal(err)
		}
		if !contains(a.Categories, "github") || !contains(a.Categories, "filesystem") {
			t.Fatalf("got %v", a.Categories)
		}
	})
	t.Run("vague prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "bake a chocolate cake"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Categories[0] != "meta" || a.Confidence >= 0.5 || a.Warning == "" || a.Suggestion == "" || !strings.HasPrefix(a.NextStep, "be more specific") {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("valid categories restrict and unknown names warn", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "check github notifications", Valid: []string{"filesystem", "jira", "bogus"}})
		if err != nil {
			t.Fatal(err)
		}
		if contains(a.Categories, "github") || !contains(a.Ignored, "bogus") || !strings.Contains(a.Warning, "bogus") {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("degraded on inference failure", func(t *testing.T) {
		d := newTestClassifier(t, bowEmbedder{dims: 256, fail: errors.New("onnx: boom with secret prompt")})
		a, err := d.Analyze(ctx, AnalyzeQuery{Prompt: "open github.com/acme/repo please"})
		if err != nil {
			t.Fatal(err)
		}
		if !a.Degraded || a.Confidence > 0.4 || !contains(a.Categories, "github") || strings.Contains(a.Reasoning, "secret") {
			t.Fatalf("got %+v", a)
		}
	})
	t.Run("context counts less than the prompt", func(t *testing.T) {
		a, err := c.Analyze(ctx, AnalyzeQuery{Prompt: "read the config json file", Context: "check github notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Categories[0] != "filesystem" {
			t.Fatalf("got %v, want filesystem first", a.Categories)
		}
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestDetectContexts(t *testing.T) {
	c := newTestClassifier(t, nil)
	ctx := context.Background()
	cs, err := c.DetectContexts(ctx, "I need to check PROJ-123 ticket comments")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) == 0 || cs[0].ID != "jira" || cs[0].Kind != "pattern" || !strings.Contains(cs[0].Evidence, "PROJ-123") {
		t.Fatalf("got %+v", cs)
	}
	cs, err = c.DetectContexts(ctx, "bake a chocolate cake")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 0 {
		t.Fatalf("got %+v, want none", cs)
	}
}

func TestCalibrationJSON(t *testing.T) {
	for _, raw := range []string{`{"categories":{"t":0}}`, `{"servers":{"a":"x"}}`, `not json`} {
		if _, err := ParseCalibration([]byte(raw)); err == nil {
			t.Fatalf("%s: accepted", raw)
		}
	}
	c, err := ParseCalibration(nil)
	if err != nil || c.Fitted || c.Categories.Method != "prior" {
		t.Fatalf("default: %+v %v", c, err)
	}
	p := c.Categories.Probabilities([]float64{0.9, 0.2, -1})
	if !(p[0] > p[1] && p[1] > p[2]) || p[0]+p[1]+p[2] > 1 {
		t.Fatalf("probabilities %v", p)
	}
	if got := (Binary{A: -10, B: 5}).Prob(0.5); math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("Prob(0.5) = %v, want 0.5", got)
	}
}

var _ = index.KindTool
