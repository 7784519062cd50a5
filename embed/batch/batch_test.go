package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/classifierd/classifierd/embed/embederr"
)

// fake is a run function that doubles its items and records every batch.
// While gate is set, a run waits for it (or its context) before answering.
type fake struct {
	mu      sync.Mutex
	batches [][]int
	started chan []int    // receives each batch as it starts, if set
	gate    chan struct{} // runs wait for it to close, if set
	err     error
}

func (f *fake) run(ctx context.Context, items []int) ([]int, error) {
	f.mu.Lock()
	f.batches = append(f.batches, slices.Clone(items))
	started, gate, err := f.started, f.gate, f.err
	f.mu.Unlock()
	if started != nil {
		started <- slices.Clone(items)
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]int, len(items))
	for i, x := range items {
		out[i] = 2 * x
	}
	return out, nil
}

func (f *fake) seen() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []int
	for _, b := range f.batches {
		all = append(all, b...)
	}
	slices.Sort(all)
	return all
}

func newBatcher(t *testing.T, cfg Config, f *fake) *Batcher[int, int] {
	t.Helper()
	b, err := New(cfg, f.run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// doAsync runs b.Do in a goroutine and returns where its answer arrives.
type answer struct {
	out []int
	err error
}

func doAsync(ctx context.Context, b *Batcher[int, int], items ...int) chan answer {
	ch := make(chan answer, 1)
	go func() {
		out, err := b.Do(ctx, items)
		ch <- answer{out, err}
	}()
	return ch
}

// waitQueued waits until n items are queued.
func waitQueued(t *testing.T, b *Batcher[int, int], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b.Stats().Queued == n {
			return
		}
	}
	t.Fatalf("queued %d, want %d", b.Stats().Queued, n)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"ok", Config{MaxBatch: 1, MaxQueue: 1, Workers: 1}, true},
		{"window", Config{MaxBatch: 8, MaxQueue: 64, Workers: 2, Window: time.Millisecond}, true},
		{"no batch", Config{MaxQueue: 1, Workers: 1}, false},
		{"no queue", Config{MaxBatch: 1, Workers: 1}, false},
		{"no workers", Config{MaxBatch: 1, MaxQueue: 1}, false},
		{"negative window", Config{MaxBatch: 1, MaxQueue: 1, Workers: 1, Window: -time.Millisecond}, false},
		{"negative wait", Config{MaxBatch: 1, MaxQueue: 1, Workers: 1, MaxWait: -time.Millisecond}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, (&fake{}).run)
			if got := err == nil; got != tc.ok {
				t.Fatalf("New(%+v) error %v, want ok=%v", tc.cfg, err, tc.ok)
			}
		})
	}
	if _, err := New[int, int](Config{MaxBatch: 1, MaxQueue: 1, Workers: 1}, nil); err == nil {
		t.Fatal("New with a nil run function: no error")
	}
}

// Each caller gets its own results in its own order, whatever batches its
// items landed in.
func TestOrderAcrossConcurrentCalls(t *testing.T) {
	f := &fake{}
	b := newBatcher(t, Config{MaxBatch: 5, Window: 200 * time.Microsecond, MaxQueue: 10_000, Workers: 3}, f)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	want := 0
	for c := range 100 {
		want += 1 + c%7
		wg.Add(1)
		go func() {
			defer wg.Done()
			items := make([]int, 1+c%7)
			for i := range items {
				items[i] = c*100 + i
			}
			out, err := b.Do(context.Background(), items)
			if err != nil {
				errs <- err
				return
			}
			for i, x := range items {
				if out[i] != 2*x {
					errs <- fmt.Errorf("call %d item %d: got %d, want %d", c, i, out[i], 2*x)
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
	st := b.Stats()
	if st.Items != int64(want) || st.Queued != 0 {
		t.Fatalf("stats %+v: want %d items run, none queued", st, want)
	}
	for _, batch := range f.batches {
		if len(batch) > 5 {
			t.Fatalf("a batch of %d items, MaxBatch 5", len(batch))
		}
	}
}

// Items of different calls share a run: four single-item calls with a
// window that never passes run as one full batch.
func TestFullBatchRunsWithoutWaitingForWindow(t *testing.T) {
	f := &fake{}
	b := newBatcher(t, Config{MaxBatch: 4, Window: time.Hour, MaxQueue: 16, Workers: 1}, f)
	var chans []chan answer
	for i := range 4 {
		chans = append(chans, doAsync(context.Background(), b, i))
	}
	for i, ch := range chans {
		a := <-ch
		if a.err != nil || len(a.out) != 1 || a.out[0] != 2*i {
			t.Fatalf("call %d: got %v, %v; want [%d]", i, a.out, a.err, 2*i)
		}
	}
	if st := b.Stats(); st.Runs != 1 || st.Items != 4 {
		t.Fatalf("stats %+v: want one run of 4 items", st)
	}
}

// A batch that is not full runs once its window has passed, not before.
func TestWindowFlushesPartialBatch(t *testing.T) {
	for _, window := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(window.String(), func(t *testing.T) {
			f := &fake{}
			b := newBatcher(t, Config{MaxBatch: 100, Window: window, MaxQueue: 100, Workers: 1}, f)
			start := time.Now()
			out, err := b.Do(context.Background(), []int{1, 2})
			if err != nil || !slices.Equal(out, []int{2, 4}) {
				t.Fatalf("got %v, %v; want [2 4]", out, err)
			}
			if waited := time.Since(start); waited < window {
				t.Fatalf("ran after %v, before the %v window", waited, window)
			}
		})
	}
}

// The queue bound refuses a call at once, counts waiting items only, and
// always admits a call into an empty queue.
func TestQueueBound(t *testing.T) {
	f := &fake{started: make(chan []int, 10), gate: make(chan struct{})}
	b := newBatcher(t, Config{MaxBatch: 1, MaxQueue: 2, Workers: 1}, f)
	a := doAsync(context.Background(), b, 1)
	<-f.started // item 1 runs and holds the only worker
	bc := doAsync(context.Background(), b, 2, 3)
	waitQueued(t, b, 2)
	if _, err := b.Do(context.Background(), []int{4}); !errors.Is(err, embederr.ErrQueueFull) {
		t.Fatalf("Do into a full queue: %v, want ErrQueueFull", err)
	}
	if st := b.Stats(); st.Rejected != 1 {
		t.Fatalf("rejected %d, want 1", st.Rejected)
	}
	var kind interface{ Kind() string }
	if err := b.Admit(1); !errors.As(err, &kind) || kind.Kind() != "overloaded" {
		t.Fatalf("refusal %v: want an error whose Kind is overloaded", err)
	}
	close(f.gate)
	if got := <-a; got.err != nil || !slices.Equal(got.out, []int{2}) {
		t.Fatalf("first call: %v, %v", got.out, got.err)
	}
	if got := <-bc; got.err != nil || !slices.Equal(got.out, []int{4, 6}) {
		t.Fatalf("second call: %v, %v", got.out, got.err)
	}
	// Larger than the bound, into an empty queue: admitted.
	f.mu.Lock()
	f.started = nil
	f.mu.Unlock()
	out, err := b.Do(context.Background(), []int{1, 2, 3, 4, 5})
	if err != nil || !slices.Equal(out, []int{2, 4, 6, 8, 10}) {
		t.Fatalf("large call into an empty queue: %v, %v", out, err)
	}
}

// A caller that gives up before its items start gets its context's error
// at once, and its items never run.
func TestCancelledCallerDroppedBeforeRun(t *testing.T) {
	f := &fake{started: make(chan []int, 10), gate: make(chan struct{})}
	b := newBatcher(t, Config{MaxBatch: 4, MaxQueue: 16, Workers: 1}, f)
	first := doAsync(context.Background(), b, 1)
	<-f.started
	ctx, cancel := context.WithCancel(context.Background())
	gone := doAsync(ctx, b, 50, 51)
	stays := doAsync(context.Background(), b, 7)
	waitQueued(t, b, 3)
	cancel()
	if got := <-gone; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("cancelled call: %v, %v; want context.Canceled", got.out, got.err)
	}
	waitQueued(t, b, 1)
	close(f.gate)
	if got := <-first; got.err != nil {
		t.Fatal(got.err)
	}
	if got := <-stays; got.err != nil || !slices.Equal(got.out, []int{14}) {
		t.Fatalf("call queued behind the cancelled one: %v, %v", got.out, got.err)
	}
	if seen := f.seen(); !slices.Equal(seen, []int{1, 7}) {
		t.Fatalf("items run %v, want [1 7]: a cancelled caller's items ran", seen)
	}
}

// A running batch is cancelled only when every caller it serves is gone.
func TestRunningBatchOutlivesOneCaller(t *testing.T) {
	f := &fake{started: make(chan []int, 10), gate: make(chan struct{})}
	b := newBatcher(t, Config{MaxBatch: 2, Window: time.Hour, MaxQueue: 16, Workers: 1}, f)
	ctxA, cancelA := context.WithCancel(context.Background())
	a := doAsync(ctxA, b, 1)
	other := doAsync(context.Background(), b, 2)
	if got := <-f.started; len(got) != 2 {
		t.Fatalf("batch %v, want both items", got)
	}
	cancelA()
	if got := <-a; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", got.err)
	}
	close(f.gate) // the run was not cancelled: it answers the other caller
	if got := <-other; got.err != nil || !slices.Equal(got.out, []int{4}) {
		t.Fatalf("remaining caller: %v, %v", got.out, got.err)
	}

	// Every caller gone: the run's context ends.
	f2 := &fake{started: make(chan []int, 10), gate: make(chan struct{})}
	b2 := newBatcher(t, Config{MaxBatch: 2, Window: time.Hour, MaxQueue: 16, Workers: 1}, f2)
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	c1, c2 := doAsync(ctx1, b2, 1), doAsync(ctx2, b2, 2)
	<-f2.started
	cancel1()
	cancel2()
	<-c1
	<-c2
	// The run returns ctx.Err() only if its context ended (the gate stays
	// shut); Close waits for it, so a run left blocked would hang here.
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRunErrorReachesEveryCallerOfTheBatch(t *testing.T) {
	boom := errors.New("boom")
	f := &fake{err: boom}
	b := newBatcher(t, Config{MaxBatch: 3, Window: time.Hour, MaxQueue: 16, Workers: 1}, f)
	a, c := doAsync(context.Background(), b, 1, 2), doAsync(context.Background(), b, 3)
	for _, ch := range []chan answer{a, c} {
		if got := <-ch; !errors.Is(got.err, boom) {
			t.Fatalf("got %v, want the run's error", got.err)
		}
	}
	// A run answering the wrong number of results is an error, not a panic.
	short, err := New(Config{MaxBatch: 1, MaxQueue: 1, Workers: 1}, func(context.Context, []int) ([]int, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if _, err := short.Do(context.Background(), []int{1}); err == nil {
		t.Fatal("run with no results: no error")
	}
}

func TestClose(t *testing.T) {
	f := &fake{started: make(chan []int, 10), gate: make(chan struct{})}
	b, err := New(Config{MaxBatch: 1, MaxQueue: 16, Workers: 1}, f.run)
	if err != nil {
		t.Fatal(err)
	}
	running := doAsync(context.Background(), b, 1)
	<-f.started
	queued := doAsync(context.Background(), b, 2)
	waitQueued(t, b, 1)
	closed := make(chan error)
	go func() { closed <- b.Close() }()
	if got := <-queued; !errors.Is(got.err, embederr.ErrClosed) {
		t.Fatalf("queued call at Close: %v, want ErrClosed", got.err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(f.gate)
	if got := <-running; got.err != nil || !slices.Equal(got.out, []int{2}) {
		t.Fatalf("running call at Close: %v, %v; want it answered", got.out, got.err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := b.Do(context.Background(), []int{3}); !errors.Is(err, embederr.ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDoEdgeCases(t *testing.T) {
	b := newBatcher(t, Config{MaxBatch: 2, MaxQueue: 4, Workers: 1}, &fake{})
	if out, err := b.Do(context.Background(), nil); out != nil || err != nil {
		t.Fatalf("no items: %v, %v", out, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Do(ctx, []int{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before the call: %v", err)
	}
	if st := b.Stats(); st.Runs != 0 {
		t.Fatalf("%d runs for calls that should not run", st.Runs)
	}
}

// Many callers, random cancellations, a small queue: every call ends with
// its results, its context's error or ErrQueueFull, and nothing leaks
// (run with -race).
func TestStress(t *testing.T) {
	f := &fake{}
	b := newBatcher(t, Config{MaxBatch: 8, Window: 100 * time.Microsecond, MaxQueue: 32, Workers: 2}, f)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+i)%5 == 0 {
					cancel()
				} else if (g+i)%7 == 0 {
					time.AfterFunc(50*time.Microsecond, cancel)
				}
				items := []int{g, i, g + i}
				out, err := b.Do(ctx, items)
				cancel()
				switch {
				case err == nil:
					if !slices.Equal(out, []int{2 * g, 2 * i, 2 * (g + i)}) {
						t.Errorf("got %v for %v", out, items)
						return
					}
				case errors.Is(err, context.Canceled), errors.Is(err, embederr.ErrQueueFull):
				default:
					t.Errorf("unexpected error %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := b.Stats(); st.Queued != 0 {
		t.Fatalf("%d items left queued", st.Queued)
	}
}

// MaxWait refuses a call once the work ahead of it, at the measured time
// per item, exceeds the bound; an empty queue still admits.
func TestMaxWait(t *testing.T) {
	f := &fake{started: make(chan []int, 10)}
	slow := func(ctx context.Context, items []int) ([]int, error) {
		time.Sleep(time.Millisecond)
		return f.run(ctx, items)
	}
	b, err := New(Config{MaxBatch: 1, MaxQueue: 100, Workers: 1, MaxWait: time.Microsecond}, slow)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// No run measured yet: only MaxQueue applies.
	f.gate = make(chan struct{})
	first := doAsync(context.Background(), b, 1)
	<-f.started
	second := doAsync(context.Background(), b, 2)
	waitQueued(t, b, 1)
	if err := b.Admit(1); err != nil {
		t.Fatalf("before any run was timed: %v, want admitted", err)
	}
	close(f.gate)
	<-first
	<-second
	<-f.started
	// Runs now take at least 1 ms an item: one item waiting is too much.
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
	running := doAsync(context.Background(), b, 3)
	<-f.started
	if err := b.Admit(1); err != nil {
		t.Fatalf("empty queue: %v, want admitted", err)
	}
	queued := doAsync(context.Background(), b, 4)
	waitQueued(t, b, 1)
	if _, err := b.Do(context.Background(), []int{5}); !errors.Is(err, embederr.ErrQueueFull) {
		t.Fatalf("behind 1 ms of work with MaxWait 1µs: %v, want ErrQueueFull", err)
	}
	if err := b.Admit(1); !errors.Is(err, embederr.ErrQueueFull) {
		t.Fatalf("Admit: %v, want ErrQueueFull", err)
	}
	close(f.gate)
	<-running
	<-queued
	if st := b.Stats(); st.Rejected != 2 {
		t.Fatalf("rejected %d, want 2", st.Rejected)
	}
}

func TestOnRunReportsEachCallOnce(t *testing.T) {
	type key struct{}
	var mu sync.Mutex
	got := map[string][]int{} // call -> run sizes
	b, err := New(Config{MaxBatch: 4, Window: 20 * time.Millisecond, MaxQueue: 16, Workers: 1,
		OnRun: func(ctx context.Context, waited time.Duration, items int) {
			if waited < 0 {
				t.Errorf("waited %v", waited)
			}
			mu.Lock()
			got[ctx.Value(key{}).(string)] = append(got[ctx.Value(key{}).(string)], items)
			mu.Unlock()
		}}, func(_ context.Context, in []int) ([]int, error) { return in, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Go(func() {
			ctx := context.WithValue(context.Background(), key{}, name)
			if _, err := b.Do(ctx, []int{1, 2, 3}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	total := 0
	for name, runs := range got {
		for _, n := range runs {
			if n < 1 || n > 4 {
				t.Errorf("call %s: run of %d items, want 1 to 4", name, n)
			}
			total++
		}
	}
	// 6 items in runs of at most 4: at least 2 runs, each call in 1 or 2.
	if len(got) != 2 || len(got["a"]) < 1 || len(got["a"]) > 2 || len(got["b"]) < 1 || len(got["b"]) > 2 || total < 3 {
		t.Fatalf("OnRun calls by call: %v, want each call once per run it is in", got)
	}
}

// Items of two flows: the later flow's item runs after the run under
// way, not behind every item the first flow queued before it; within a
// flow, first in first out.
func TestFlowsShareRuns(t *testing.T) {
	f := &fake{started: make(chan []int, 20), gate: make(chan struct{})}
	b := newBatcher(t, Config{MaxBatch: 1, MaxQueue: 100, Workers: 1}, f)
	released := false
	t.Cleanup(func() { // before Close, which waits for the runs
		if !released {
			close(f.gate)
		}
	})
	ctx := context.Background()
	hog := doAsync(WithFlow(ctx, "hog", 1), b, 1, 2, 3, 4, 5, 6)
	if got := <-f.started; got[0] != 1 {
		t.Fatalf("first run %v, want [1]", got)
	}
	waitQueued(t, b, 5)
	small := doAsync(WithFlow(ctx, "small", 1), b, 100, 101)
	waitQueued(t, b, 7)
	var order []int
	for range 8 {
		f.gate <- struct{}{} // the run under way answers
		if len(order) < 7 {
			order = append(order, (<-f.started)[0])
		}
	}
	// Each of the hog's runs charges it a run's time: the small flow's
	// two items go before the hog's second run and right after it.
	if order[0] != 100 || !slices.Contains(order[:3], 101) {
		t.Fatalf("runs after the hog's first: %v, want 100 first and 101 among the next two", order)
	}
	var hogOrder []int
	for _, x := range order {
		if x < 100 {
			hogOrder = append(hogOrder, x)
		}
	}
	released = true
	close(f.gate)
	if !slices.Equal(hogOrder, []int{2, 3, 4, 5, 6}) {
		t.Fatalf("hog's items ran in order %v, want first in first out", hogOrder)
	}
	for _, ch := range []chan answer{hog, small} {
		if got := <-ch; got.err != nil {
			t.Fatal(got.err)
		}
	}
	b.mu.Lock()
	n := len(b.flows)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d flows held after every call ended, want 0", n)
	}
}

// gated is a run function of one item at a time that waits until that
// item is let go (or its context ends).
type gated struct {
	mu      sync.Mutex
	gates   map[int]chan struct{}
	started chan int
}

func newGated() *gated { return &gated{gates: map[int]chan struct{}{}, started: make(chan int, 100)} }

func (g *gated) gate(x int) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates[x] == nil {
		g.gates[x] = make(chan struct{})
	}
	return g.gates[x]
}

func (g *gated) run(ctx context.Context, items []int) ([]int, error) {
	g.started <- items[0]
	select {
	case <-g.gate(items[0]):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []int{2 * items[0]}, nil
}

// A flow that was active less than ActiveFor ago keeps its share of the
// workers: with two workers, a hog with many items runs one at a time
// while a small flow is active, so the small flow's next item starts at
// once beside the hog's run instead of waiting for it; without
// ActiveFor the hog takes both workers; once the small flow has been idle
// for ActiveFor the hog takes both again.
func TestActiveFlowKeepsItsWorker(t *testing.T) {
	for _, active := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(fmt.Sprint(active), func(t *testing.T) {
			g := newGated()
			b, err := New(Config{MaxBatch: 1, MaxQueue: 100, Workers: 2, ActiveFor: active}, g.run)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for x := range 200 {
					select {
					case <-g.gate(x):
					default:
						close(g.gate(x))
					}
				}
				_ = b.Close()
			})
			ctx := context.Background()
			small := WithFlow(ctx, "small", 1)
			first := doAsync(small, b, 100)
			<-g.started
			close(g.gate(100))
			if got := <-first; got.err != nil {
				t.Fatal(got.err)
			}
			hog := doAsync(WithFlow(ctx, "hog", 1), b, 1, 2, 3, 4)
			if got := <-g.started; got != 1 {
				t.Fatalf("hog's first run [%d], want [1]", got)
			}
			if active == 0 {
				// Nothing keeps the second worker: the hog takes it.
				if got := <-g.started; got != 2 {
					t.Fatalf("hog's second run [%d], want [2]", got)
				}
				return
			}
			waitQueued(t, b, 3)
			next := doAsync(small, b, 101)
			// The small flow's item starts while the hog's run still holds
			// its worker: the other worker was kept for it.
			if got := <-g.started; got != 101 {
				t.Fatalf("run beside the hog's: [%d], want the small flow's [101]", got)
			}
			close(g.gate(101))
			if got := <-next; got.err != nil {
				t.Fatal(got.err)
			}
			close(g.gate(1)) // the hog's next item takes its one worker
			if got := <-g.started; got != 2 {
				t.Fatalf("hog's next run [%d], want [2]", got)
			}
			b.mu.Lock()
			running := b.flows["hog"].running
			b.mu.Unlock()
			if running != 1 {
				t.Fatalf("hog has %d runs while the small flow is active, want its share, 1", running)
			}
			// Once the small flow has been idle for ActiveFor, the hog's
			// next run end lets it take both workers.
			time.Sleep(active)
			close(g.gate(2))
			a, c := <-g.started, <-g.started
			if a == c || a < 3 || c < 3 {
				t.Fatalf("runs after the small flow left: [%d] and [%d], want the hog's 3 and 4", a, c)
			}
			close(g.gate(3))
			close(g.gate(4))
			if got := <-hog; got.err != nil || !slices.Equal(got.out, []int{2, 4, 6, 8}) {
				t.Fatalf("hog's answer %v, %v", got.out, got.err)
			}
		})
	}
}

// The flows kept active after their calls are bounded: past
// maxIdleFlows the one idle longest is forgotten.
func TestIdleFlowsBounded(t *testing.T) {
	f := &fake{}
	b := newBatcher(t, Config{MaxBatch: 1, MaxQueue: 10, Workers: 1, ActiveFor: time.Hour}, f)
	ctx := context.Background()
	for i := range maxIdleFlows + 100 {
		if _, err := b.Do(WithFlow(ctx, fmt.Sprint(i), 1), []int{i}); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	n := len(b.flows)
	b.mu.Unlock()
	if n > maxIdleFlows {
		t.Fatalf("%d flows kept, bound %d", n, maxIdleFlows)
	}
}
