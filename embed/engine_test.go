package embed

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEmbedShapes runs both model shapes the engine supports: use-lite-en
// (pooled output [batch, dims], no token types) and a BERT-shaped model
// (token output [batch, seq, dims], token_type_ids, mean pooling).
func TestEmbedShapes(t *testing.T) {
	ctx := context.Background()
	bert, _ := bertEngine(t, 32)
	for _, tc := range []struct {
		name string
		e    *Engine
		dims int
	}{
		{"use-lite-en", realEngine(t), 512},
		{"bert-shaped", bert, bertDims},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.e.Dims(); got != tc.dims {
				t.Fatalf("Dims: got %d, want %d", got, tc.dims)
			}
			vs, err := tc.e.Embed(ctx, sentences)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(sentences) {
				t.Fatalf("got %d vectors, want %d", len(vs), len(sentences))
			}
			for i, v := range vs {
				checkUnit(t, fmt.Sprintf("vector %d", i), v, tc.dims)
			}
			// Different texts get different vectors (a pooling or padding
			// bug that returns one row for all would pass the checks above).
			if d := maxAbsDiff(vs[0], vs[1]); d < 1e-3 {
				t.Fatalf("vectors 0 and 1: got max diff %g, want distinct vectors", d)
			}
			if got, err := tc.e.Embed(ctx, nil); err != nil || got != nil {
				t.Fatalf("Embed(nil): got %v, %v; want nil, nil", got, err)
			}
		})
	}
}

// TestBertMeanPooling checks the whole BERT path (tokenise with [CLS]/[SEP],
// feed token_type_ids, run, mean-pool over the mask, normalise) against
// the same computation in plain Go from the generated weights, alone and in
// a padded batch.
func TestBertMeanPooling(t *testing.T) {
	ctx := context.Background()
	bert, gen := bertEngine(t, 32)
	batch, err := bert.Embed(ctx, sentences)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range sentences {
		ids, err := bert.Tokens(s)
		if err != nil {
			t.Fatal(err)
		}
		if ids[0] != 2 || ids[len(ids)-1] != 3 {
			t.Fatalf("%q: got ids %v, want [CLS]=2 first and [SEP]=3 last", s, ids)
		}
		want := gen.Expected(ids)
		alone, err := bert.Embed(ctx, []string{s})
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(alone[0], want); d > 1e-5 {
			t.Errorf("%q alone: got max diff %g from the plain Go mean pooling, want <= 1e-5", s, d)
		}
		if d := maxAbsDiff(batch[i], want); d > 1e-5 {
			t.Errorf("%q in a padded batch: got max diff %g from the plain Go mean pooling, want <= 1e-5", s, d)
		}
	}
}

func TestBertTokenizer(t *testing.T) {
	bert, gen := bertEngine(t, 32)
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"lower-cases", "Check My GITHUB Notifications", []string{"[CLS]", "check", "my", "github", "notifications", "[SEP]"}},
		{"splits punctuation", "repo, now!", []string{"[CLS]", "repo", ",", "now", "!", "[SEP]"}},
		{"word pieces", "checking files", []string{"[CLS]", "check", "##ing", "files", "[SEP]"}},
		{"unknown word", "xyzzy", []string{"[CLS]", "[UNK]", "[SEP]"}},
		{"collapses whitespace", "  open \t\n file ", []string{"[CLS]", "open", "file", "[SEP]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, err := bert.Tokens(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			for _, w := range tc.want {
				id, ok := gen.Vocab[w]
				if !ok {
					t.Fatalf("%q is not in the generated vocab", w)
				}
				want = append(want, int64(id))
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("Tokens(%q): got %v, want %v (%v)", tc.text, ids, want, tc.want)
			}
		})
	}
}

// TestBatchingDoesNotChangeEmbeddings: alone, in a padded batch of mixed
// lengths spanning several model runs, and in other orders, every text gets
// the same vector.
// namedEngine is one engine under test.
type namedEngine struct {
	name string
	e    *Engine
}

// bothEngines is the real use-lite-en engine and the generated BERT-shaped
// one (chunks of maxTokens), for tests both must pass.
func bothEngines(t *testing.T, maxTokens int) []namedEngine {
	t.Helper()
	bert, _ := bertEngine(t, maxTokens)
	return []namedEngine{{"use-lite-en", realEngine(t)}, {"bert-shaped", bert}}
}

// embedEachAlone embeds every sentence in a call of its own.
func embedEachAlone(t *testing.T, e *Engine) [][]float32 {
	t.Helper()
	out := make([][]float32, len(sentences))
	for i, s := range sentences {
		v, err := e.Embed(context.Background(), []string{s})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v[0]
	}
	return out
}

func TestBatchingDoesNotChangeEmbeddings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range bothEngines(t, 32) {
		t.Run(tc.name, func(t *testing.T) {
			alone := embedEachAlone(t, tc.e)
			r := rand.New(rand.NewSource(1))
			orders := map[string][]int{"given": nil, "reversed": nil, "shuffled with repeats": nil}
			for i := range sentences {
				orders["given"] = append(orders["given"], i)
				orders["reversed"] = append(orders["reversed"], len(sentences)-1-i)
			}
			for range 2 * len(sentences) {
				orders["shuffled with repeats"] = append(orders["shuffled with repeats"], r.Intn(len(sentences)))
			}
			for name, order := range orders {
				texts := make([]string, len(order))
				for i, k := range order {
					texts[i] = sentences[k]
				}
				got, err := tc.e.Embed(ctx, texts)
				if err != nil {
					t.Fatal(err)
				}
				for i, k := range order {
					if d := maxAbsDiff(got[i], alone[k]); d > 1e-5 {
						t.Errorf("%s batch, %q: got max diff %g from embedding it alone, want <= 1e-5", name, sentences[k], d)
					}
				}
			}
		})
	}
}

// blockModel fills the engine's run semaphore so any model run would wait,
// runs f, and frees it again: f proves it never reaches the model by
// returning before its context's deadline.
func blockModel(e *Engine, f func()) {
	for range cap(e.sem) {
		e.sem <- struct{}{}
	}
	defer func() {
		for range cap(e.sem) {
			<-e.sem
		}
	}()
	f()
}

func TestEmptyTextRejected(t *testing.T) {
	blanks := []string{"", " ", "\t", "\n", "\t\n  \r\n", "\u00a0\u2003\u2028\u3000", "\v\f"}
	for _, tc := range bothEngines(t, 16) {
		t.Run(tc.name, func(t *testing.T) {
			blockModel(tc.e, func() {
				for _, s := range blanks {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, err := tc.e.Embed(ctx, []string{s})
					cancel()
					if !errors.Is(err, ErrEmptyText) {
						t.Errorf("Embed(%q): got %v, want ErrEmptyText before the model runs", s, err)
					}
					if _, err := tc.e.Tokens(s); !errors.Is(err, ErrEmptyText) {
						t.Errorf("Tokens(%q): got %v, want ErrEmptyText", s, err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := tc.e.Embed(ctx, []string{"fine", "also fine", " \t ", "fine again", ""})
				if !errors.Is(err, ErrEmptyText) || !strings.Contains(err.Error(), "text 2") {
					t.Errorf("mixed batch: got %v, want ErrEmptyText naming text 2", err)
				}
			})
			if _, err := tc.e.Embed(context.Background(), []string{"still works"}); err != nil {
				t.Fatalf("after rejecting blanks: got %v, want a vector", err)
			}
		})
	}
}

func TestTokenCap(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("please check the notifications of my repository ", 30)
	t.Run("use-lite-en", func(t *testing.T) {
		e := realEngine(t)
		max := e.Manifest().MaxTokens
		for _, text := range []string{long, strings.Repeat("café ", 60)} { // word cache and whole-text paths
			ids, err := e.Tokens(text)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != max {
				t.Fatalf("got %d tokens, want the cap %d", len(ids), max)
			}
			full, err := e.tokenize(e.man.NormalizeText(text))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, full[:max]) {
				t.Fatalf("got %v, want the first %d tokens %v", ids, max, full[:max])
			}
			v, err := e.Embed(ctx, []string{text})
			if err != nil {
				t.Fatal(err)
			}
			checkUnit(t, "long text", v[0], e.Dims())
		}
	})
	t.Run("bert keeps [SEP] last", func(t *testing.T) {
		bert, gen := bertEngine(t, 8)
		ids, err := bert.Tokens(long)
		if err != nil {
			t.Fatal(err)
		}
		words := strings.Fields(long)[:6]
		want := []int64{2}
		for _, w := range words {
			want = append(want, int64(gen.Vocab[w]))
		}
		want = append(want, 3)
		if !slices.Equal(ids, want) {
			t.Fatalf("got %v, want [CLS], the first 6 words %v, [SEP]: %v", ids, words, want)
		}
		v, err := bert.Embed(ctx, []string{long})
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(v[0], gen.Expected(ids)); d > 1e-5 {
			t.Fatalf("truncated text: got max diff %g from pooling the kept tokens, want <= 1e-5", d)
		}
		exact, err := bert.Tokens("check my github notifications now please") // 6 words + 2 specials
		if err != nil || len(exact) != 8 || exact[6] != int64(gen.Vocab["please"]) {
			t.Fatalf("text at the cap: got %v, %v; want it whole", exact, err)
		}
	})
}

func TestWhitespaceCollapsing(t *testing.T) {
	variants := []string{"a b c", "a  b\t\nc", "  a b c  ", "a\u00a0b\u2003c", "\ta\r\nb   c\n"}
	for _, tc := range bothEngines(t, 16) {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.e.Tokens(variants[0])
			if err != nil {
				t.Fatal(err)
			}
			vs, err := tc.e.Embed(context.Background(), variants)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range variants {
				ids, err := tc.e.Tokens(s)
				if err != nil || !slices.Equal(ids, want) {
					t.Errorf("Tokens(%q): got %v, %v; want %v", s, ids, err, want)
				}
				if d := maxAbsDiff(vs[i], vs[0]); d > 1e-6 {
					t.Errorf("%q: got max diff %g from %q, want identical", s, d, variants[0])
				}
			}
		})
	}
}

// TestUnicodeText covers text the tokenizer library mishandles on its own:
// inputs that made its NFKC panic, and decomposed accents it did not
// compose. Both must embed, as the model's reference tokenizer would.
func TestUnicodeText(t *testing.T) {
	ctx := context.Background()
	texts := []string{"ǆ", "jvkpǆ", "Ǆemal", "𪙹⑾ᨳޭۧ", "h᩹nk⅘ᾤ", "⩶庳뾿", "日本語のテキスト", "emoji 😀 ok", "ﬁle ½ x² ＡＢＣ"}
	for _, tc := range bothEngines(t, 16) {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range texts {
				v, err := tc.e.Embed(ctx, []string{s})
				if err != nil {
					t.Errorf("Embed(%q): got %v, want a vector", s, err)
					continue
				}
				checkUnit(t, fmt.Sprintf("%q", s), v[0], tc.e.Dims())
			}
		})
	}
	t.Run("composed and decomposed accents agree", func(t *testing.T) {
		e := realEngine(t)
		for _, pair := range [][2]string{{"café", "cafe\u0301"}, {"Zürich", "Zu\u0308rich"}, {"Å", "A\u030a"}} {
			a, err := e.Tokens(pair[0])
			if err != nil {
				t.Fatal(err)
			}
			b, err := e.Tokens(pair[1])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a, b) {
				t.Errorf("%q: got %v, %+q: got %v; want the same tokens", pair[0], a, pair[1], b)
			}
		}
	})
}

// TestConcurrentUse: 16 goroutines x 20 calls get exactly what sequential
// calls get (run with -race).
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	for _, tc := range bothEngines(t, 32) {
		t.Run(tc.name, func(t *testing.T) {
			want := embedEachAlone(t, tc.e)
			wantIDs := make([][]int64, len(sentences))
			for i, s := range sentences {
				var err error
				if wantIDs[i], err = tc.e.Tokens(s); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 20 {
						k := (g + i) % len(sentences)
						texts := []string{sentences[k]}
						if i%4 == 3 { // some calls batch with a neighbour
							texts = append(texts, sentences[(k+1)%len(sentences)])
						}
						got, err := tc.e.Embed(ctx, texts)
						if err != nil {
							errs <- err
							return
						}
						for j, v := range got {
							if d := maxAbsDiff(v, want[(k+j)%len(sentences)]); d > 1e-5 {
								errs <- fmt.Errorf("goroutine %d call %d: got max diff %g from the sequential result", g, i, d)
								return
							}
						}
						if ids, err := tc.e.Tokens(sentences[k]); err != nil || !slices.Equal(ids, wantIDs[k]) {
							errs <- fmt.Errorf("goroutine %d: Tokens got %v, %v; want %v", g, ids, err, wantIDs[k])
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// longBatch is n texts of about max_tokens tokens each.
func longBatch(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(sentences[i%len(sentences)]+" ", 12)
	}
	return out
}

func TestCancellation(t *testing.T) {
	e := realEngine(t)
	want, err := e.Embed(context.Background(), sentences[:2])
	if err != nil {
		t.Fatal(err)
	}
	stillWorks := func(t *testing.T, e *Engine) {
		t.Helper()
		got, err := e.Embed(context.Background(), sentences[:2])
		if err != nil {
			t.Fatalf("after cancellation: got %v, want vectors", err)
		}
		for i := range got {
			if d := maxAbsDiff(got[i], want[i]); d > 1e-5 {
				t.Fatalf("after cancellation: vector %d differs by %g", i, d)
			}
		}
	}

	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		_, err := e.Embed(ctx, longBatch(e.MaxBatch()))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Fatalf("took %v, want an immediate return", d)
		}
		stillWorks(t, e)
	})

	t.Run("deadline between runs", func(t *testing.T) {
		// ChunkSize 4: the batch is many model runs; the deadline lands
		// between or inside them.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := e.Embed(ctx, longBatch(200))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		stillWorks(t, e)
	})

	t.Run("cancel inside one model run", func(t *testing.T) {
		// One chunk of 64 long texts is a single ONNX Runtime call of
		// most of a second; only RunOptions.Terminate can end it early.
		big := useLiteEngine(t, Config{ChunkSize: 64, MaxConcurrent: 1})
		texts := longBatch(64)
		start := time.Now()
		if _, err := big.Embed(context.Background(), texts); err != nil {
			t.Fatal(err)
		}
		full := time.Since(start)

		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(full/10, cancel)
		defer timer.Stop()
		start = time.Now()
		_, err := big.Embed(ctx, texts)
		took := time.Since(start)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		t.Logf("full run %v, cancelled after %v returned after %v", full, full/10, took)
		if took > full/2 {
			t.Fatalf("cancelled run took %v of a %v run, want it terminated early", took, full)
		}
		stillWorks(t, big)
	})
}

func TestLimitsAndClose(t *testing.T) {
	dir, man, _ := writeBert(t, 16)
	e, err := Open(testRuntime(t), Config{ModelDir: dir, Manifest: man, MaxBatch: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx := context.Background()
	if got := e.MaxBatch(); got != 5 {
		t.Fatalf("MaxBatch: got %d, want 5", got)
	}
	if _, err := e.Embed(ctx, sentences[:5]); err != nil {
		t.Fatalf("batch at MaxBatch: got %v, want vectors", err)
	}
	if _, err := e.Embed(ctx, sentences[:6]); !errors.Is(err, ErrTooMany) {
		t.Fatalf("batch over MaxBatch: got %v, want ErrTooMany", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: got %v, want nil", err)
	}
	if _, err := e.Embed(ctx, []string{"x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Embed after Close: got %v, want ErrClosed", err)
	}
	if _, err := e.Infer(ctx, [][]int64{{2, 3}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Infer after Close: got %v, want ErrClosed", err)
	}
}

// TestCloseWhileEmbedding: Close waits for runs in flight; every call
// either completes or reports ErrClosed (run with -race).
func TestCloseWhileEmbedding(t *testing.T) {
	e, _ := bertEngine(t, 32)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := e.Embed(context.Background(), sentences)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Embed during Close: got %v, want vectors or ErrClosed", err)
	}
}

// TestLongTextTokens checks that handing the tokenizer only the first
// max_tokens words (firstWords) gives the tokens the whole text gives.
func TestLongTextTokens(t *testing.T) {
	text := strings.Repeat("Grüße aus 東京 😀 and more words, ", 80) // 480 words
	for _, e := range []*Engine{realEngine(t), sharedBert(t)} {
		t.Run(e.Manifest().Name, func(t *testing.T) {
			got, err := e.Tokens(text)
			if err != nil {
				t.Fatal(err)
			}
			in := text
			if e.bertClean {
				in = bertCleanText(in)
			}
			enc, err := e.encodeSingle(e.man.NormalizeText(in))
			if err != nil {
				t.Fatal(err)
			}
			full := make([]int64, 0, len(enc.GetIds()))
			for _, id := range enc.GetIds() {
				full = append(full, int64(id))
			}
			n := e.Manifest().MaxTokens
			if len(full) <= n {
				t.Fatalf("whole text gives %d tokens; the test needs more than %d", len(full), n)
			}
			want := full[:n]
			if e.Manifest().AddSpecialTokens {
				want = append(append([]int64(nil), full[:n-1]...), full[len(full)-1])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("tokens of the cut text differ from the whole text's first %d:\ngot  %v\nwant %v", n, got, want)
			}
		})
	}
}
