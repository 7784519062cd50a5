package embed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

// queuedVectors embeds every sentence from its own goroutine, several times
// over, through e's queue, and returns the vectors of each sentence.
func queuedVectors(t *testing.T, e *Engine, rounds int) [][][]float32 {
	t.Helper()
	got := make([][][]float32, len(sentences))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r := 0; r < rounds; r++ {
		for i, s := range sentences {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := e.Embed(context.Background(), []string{s})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[i] = append(got[i], v[0])
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return got
}

// TestQueueBatchesMatchSingleRuns: with the queue on, texts of concurrent
// callers share model runs (use-lite-en is not batch-dependent), and each
// vector equals the one the text gets alone within 1e-5.
func TestQueueBatchesMatchSingleRuns(t *testing.T) {
	alone := realEngine(t)
	e := useLiteEngine(t, Config{MaxQueue: 256, BatchWindow: 5 * time.Millisecond, ChunkSize: 16, MaxConcurrent: 1})
	got := queuedVectors(t, e, 4)
	st := e.QueueStats()
	if st.Items != int64(4*len(sentences)) {
		t.Fatalf("queue ran %d texts, want %d", st.Items, 4*len(sentences))
	}
	if st.Runs >= st.Items {
		t.Fatalf("%d runs for %d texts: concurrent texts did not share runs", st.Runs, st.Items)
	}
	for i, s := range sentences {
		want, err := alone.Embed(context.Background(), []string{s})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range got[i] {
			if d := maxAbsDiff(v, want[0]); d > 1e-5 {
				t.Errorf("%q: batched vector differs from its single run by %g (tolerance 1e-5)", s, d)
			}
		}
	}
}

// TestQueueKeepsBatchDependentModelExact: the default int8 model's vectors
// depend on their batch, so the queue runs its texts alone, and a vector
// from a busy queue is bit-identical to the text's own run.
func TestQueueKeepsBatchDependentModelExact(t *testing.T) {
	dir := testenv.ModelDir()
	man, err := models.ReadManifest(dir)
	if err != nil {
		t.Fatalf("%v\nrun `make model` to build the default model", err)
	}
	if !man.BatchDependent {
		t.Fatalf("%s: manifest says batch_dependent false; this test is about the int8 model", man.Name)
	}
	rt := testRuntime(t)
	direct, err := Open(rt, Config{ModelDir: dir, Manifest: man})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	e, err := Open(rt, Config{ModelDir: dir, Manifest: man, MaxQueue: 256, BatchWindow: 5 * time.Millisecond, ChunkSize: 16, MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	got := queuedVectors(t, e, 3)
	if st := e.QueueStats(); st.Runs != st.Items {
		t.Fatalf("%d runs for %d texts: a batch-dependent model's texts shared a run", st.Runs, st.Items)
	}
	for i, s := range sentences {
		want, err := direct.Embed(context.Background(), []string{s})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range got[i] {
			if d := maxAbsDiff(v, want[0]); d != 0 {
				t.Errorf("%q: queued vector differs from its single run by %g", s, d)
			}
		}
	}
	// And the reason: run together in one batch, the same texts do differ.
	toks := make([][]int64, len(sentences))
	for i, s := range sentences {
		if toks[i], err = direct.Tokens(s); err != nil {
			t.Fatal(err)
		}
	}
	together, err := direct.Infer(context.Background(), toks)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := range sentences {
		one, err := direct.Infer(context.Background(), toks[i:i+1])
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(together[i], one[0]))
	}
	if worst < 1e-4 {
		t.Fatalf("int8 vectors in one batch differ from single runs by only %g: batch_dependent may no longer be needed (docs/models.md)", worst)
	}
	t.Logf("int8 model: a padded batch of %d changes vectors by up to %.3g", len(sentences), worst)
}

// TestQueueFull: a call that finds the queue full fails at once with
// ErrQueueFull; the engine still answers once the queue drains.
func TestQueueFull(t *testing.T) {
	e := useLiteEngine(t, Config{MaxQueue: 1, ChunkSize: 1, MaxConcurrent: 1})
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused, answered := 0, 0
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Embed(context.Background(), sentences[:2])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				answered++
			case errors.Is(err, ErrQueueFull):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if answered == 0 || refused == 0 || int64(refused) != e.QueueStats().Rejected {
		t.Fatalf("answered %d, refused %d (stats %+v): want both, counted", answered, refused, e.QueueStats())
	}
	if _, err := e.Embed(context.Background(), sentences); err != nil {
		t.Fatalf("after the burst: %v", err)
	}
}

// TestQueueCancelledCaller: a caller whose context ends while its texts
// wait gets its context's error, and Close after it does not hang.
func TestQueueCancelledCaller(t *testing.T) {
	e := useLiteEngine(t, Config{MaxQueue: 64, ChunkSize: 1, MaxConcurrent: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
	defer cancel()
	long := make([]string, 40)
	for i := range long {
		long[i] = sentences[i%len(sentences)]
	}
	if _, err := e.Embed(ctx, long); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(context.Background(), sentences[:1]); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
