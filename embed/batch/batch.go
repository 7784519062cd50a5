// Package batch is dynamic micro-batching for concurrent callers: each call
// enqueues its items, a collector takes queued items into one batch that
// runs when it is full (Config.MaxBatch) or when a short window
// (Config.Window) has passed since its oldest item was queued, and each
// item's result goes back to its caller in the caller's order.
//
// The queue is bounded (Config.MaxQueue items waiting, running ones not
// counted): a call that would overflow it fails at once with
// embederr.ErrQueueFull, before any work, so an overloaded daemon answers
// quickly instead of making every caller wait longer. A caller whose
// context ends gets its context's error at once; its items that have not
// started are dropped from the queue, and a batch that has started is
// cancelled only when every caller it serves has gone.
//
// Calls may belong to flows (WithFlow: the daemon's callers): when more
// than one flow has items waiting, a run takes the items of the flow that
// has had the least model time per weight so far (fair queuing by measured
// run time, first in first out within a flow), so one caller's long texts
// do not hold another's short ones behind them. And while more than one
// flow is active (calls under way, or one ended less than
// Config.ActiveFor ago), each has a share of the workers (Workers × its
// weight ÷ the active flows' weights, at least one): a flow at its share
// starts another run only on a worker not kept for another flow below
// its own, so a caller whose texts come one call at a time finds a worker
// free instead of waiting behind another's runs.
//
// The package is pure Go and knows nothing of models: embed uses it with
// tokenised texts as items and vectors as results, its tests with a fake
// run function.
package batch

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/embed/embederr"
)

// Config sizes a Batcher.
type Config struct {
	// MaxBatch is the most items in one run (at least 1; 1 runs every item
	// alone, for a model whose results depend on their batch).
	MaxBatch int
	// Window is how long a batch that is not full waits, from its oldest
	// item's arrival, for more items (0: run what is queued at once).
	Window time.Duration
	// MaxQueue is the most items waiting to run (at least 1). A call that
	// would take the queue past it fails with embederr.ErrQueueFull,
	// except into an empty queue, so one call larger than the bound still
	// runs when nothing else waits.
	MaxQueue int
	// Workers is how many batches run at the same time (at least 1).
	Workers int
	// MaxWait, when positive, also refuses a call (embederr.ErrQueueFull)
	// whose items would wait longer than this before starting, estimated
	// from the items ahead of them and the recent time per item of the
	// runs (an exponentially weighted mean). It bounds the queueing delay
	// of the calls that are admitted on a machine of any speed, where
	// MaxQueue bounds memory.
	MaxWait time.Duration
	// ActiveFor is how long a flow keeps its share of the workers after
	// its last call ended (0: not at all); see the package comment.
	ActiveFor time.Duration
	// OnRun, if set, is called as a run starts, once for each call with
	// items in it: with that call's context, how long its oldest item in
	// the run waited in the queue, and the run's item count. It must be
	// quick and must not block (embed records a trace event with it).
	OnRun func(ctx context.Context, waited time.Duration, items int)
}

// Validate reports a setting out of range.
func (c Config) Validate() error {
	switch {
	case c.MaxBatch < 1:
		return fmt.Errorf("batch: MaxBatch %d, want at least 1", c.MaxBatch)
	case c.MaxQueue < 1:
		return fmt.Errorf("batch: MaxQueue %d, want at least 1", c.MaxQueue)
	case c.Workers < 1:
		return fmt.Errorf("batch: Workers %d, want at least 1", c.Workers)
	case c.Window < 0:
		return fmt.Errorf("batch: Window %v, want 0 or more", c.Window)
	case c.MaxWait < 0:
		return fmt.Errorf("batch: MaxWait %v, want 0 or more", c.MaxWait)
	case c.ActiveFor < 0:
		return fmt.Errorf("batch: ActiveFor %v, want 0 or more", c.ActiveFor)
	}
	return nil
}

// RunFunc runs one batch and returns one result per item, in order. ctx
// ends only when every caller the batch serves has gone.
type RunFunc[In, Out any] func(ctx context.Context, items []In) ([]Out, error)

// flowKey is the context key of a call's flow.
type flowKey struct{}

// flowID names a flow and weighs it.
type flowID struct {
	key    string
	weight float64
}

// WithFlow returns ctx marking the calls made with it as flow key's, of
// the given weight (at least a small positive one) in the fair sharing
// of model runs. Calls without a flow share the flow "".
func WithFlow(ctx context.Context, key string, weight float64) context.Context {
	return context.WithValue(ctx, flowKey{}, flowID{key: key, weight: max(weight, 1e-3)})
}

func flowOf(ctx context.Context) flowID {
	if f, ok := ctx.Value(flowKey{}).(flowID); ok {
		return f
	}
	return flowID{weight: 1}
}

// DefaultActiveFor is the Config.ActiveFor the daemon uses, for its
// model runs and its admission (server.DefaultAdmissionActiveFor): long
// enough for a client's next call after an answer, short enough that a
// caller who has gone keeps workers from a busy one only briefly.
const DefaultActiveFor = 250 * time.Millisecond

// maxIdleFlows bounds the flows kept active after their last call: past
// it the one idle longest is forgotten.
const maxIdleFlows = 4096

// flow is the model time an active flow has had, per weight
// (nanoseconds), how many of its calls are under way and how many runs
// hold its items.
type flow struct {
	key     string
	weight  float64
	vtime   float64
	calls   int
	running int
	// idleEl is its element of Batcher.idle while it has no call under
	// way and no run, idleAt when that began.
	idleEl *list.Element
	idleAt time.Time
}

func (f *flow) busy() bool { return f.calls > 0 || f.running > 0 }

// call is one Do: its items, where their results go, and how it ended.
type call[Out any] struct {
	flow    *flow // guarded by Batcher.mu
	ctx     context.Context
	results []Out
	left    int   // items not yet answered; guarded by Batcher.mu
	err     error // first failure; guarded by Batcher.mu
	done    chan struct{}
}

// task is one item of a call, queued.
type task[In, Out any] struct {
	c       *call[Out]
	pos     int
	in      In
	when    time.Time // when it was queued
	charged float64   // model time charged to its flow when it was taken
}

// Batcher collects items from concurrent calls into batches. It is safe for
// concurrent use; Close stops it.
type Batcher[In, Out any] struct {
	cfg Config
	run RunFunc[In, Out]

	mu    sync.Mutex
	queue []task[In, Out]
	// flows are the active flows: busy, or idle for less than
	// ActiveFor (those also in idle, oldest first).
	flows map[string]*flow
	idle  list.List
	// vnow is the model time per weight at which the latest item was
	// taken: a flow that becomes busy starts there at least.
	vnow float64
	// running is the runs in flight.
	running int
	closed  bool
	// wake is signalled (without blocking) when items arrive; only the one
	// collecting worker waits on it. quit is closed by Close.
	wake, quit chan struct{}
	// collect lets one worker at a time gather a batch, so a batch fills
	// before another worker starts the next one.
	collect sync.Mutex
	workers sync.WaitGroup

	runs, items, rejected atomic.Int64
	// perItem is the weighted mean run time per item, in nanoseconds
	// (0 until the first run); guarded by mu.
	perItem float64
}

// New starts cfg.Workers workers that run batches with run.
func New[In, Out any](cfg Config, run RunFunc[In, Out]) (*Batcher[In, Out], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if run == nil {
		return nil, errors.New("batch: nil run function")
	}
	b := &Batcher[In, Out]{cfg: cfg, run: run, flows: map[string]*flow{}, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	b.workers.Add(cfg.Workers)
	for range cfg.Workers {
		go b.work()
	}
	return b, nil
}

// Stats counts what a Batcher has done since New.
type Stats struct {
	// Runs is the number of batches run, Items the items they held.
	Runs, Items int64
	// Rejected is the number of calls refused with embederr.ErrQueueFull.
	Rejected int64
	// Queued is the number of items waiting now.
	Queued int
}

// Stats returns the counters.
func (b *Batcher[In, Out]) Stats() Stats {
	b.mu.Lock()
	q := len(b.queue)
	b.mu.Unlock()
	return Stats{Runs: b.runs.Load(), Items: b.items.Load(), Rejected: b.rejected.Load(), Queued: q}
}

// Do queues items and returns their results in order once every one has
// run. It fails at once with embederr.ErrQueueFull when the queue has no
// room, with embederr.ErrClosed after Close, and with ctx's error as soon
// as ctx ends. If the batch holding any of its items fails, Do returns
// that error.
func (b *Batcher[In, Out]) Do(ctx context.Context, items []In) ([]Out, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call[Out]{ctx: ctx, results: make([]Out, len(items)), left: len(items), done: make(chan struct{})}
	now := time.Now()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, embederr.ErrClosed
	}
	if err := b.admitLocked(len(items)); err != nil {
		b.mu.Unlock()
		b.rejected.Add(1)
		return nil, err
	}
	c.flow = b.joinLocked(flowOf(ctx))
	for i, in := range items {
		b.queue = append(b.queue, task[In, Out]{c: c, pos: i, in: in, when: now})
	}
	b.mu.Unlock()
	b.signal()
	defer b.leave(c.flow)

	select {
	case <-c.done:
		b.mu.Lock()
		err := c.err
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return c.results, nil
	case <-ctx.Done():
		b.drop(c)
		return nil, ctx.Err()
	}
}

// Admit reports whether a call of n items would be admitted now: a
// cheap early check for callers with work to do before Do (Do checks
// again). It returns nil or an error wrapping embederr.ErrQueueFull, and
// counts a refusal in Stats.
func (b *Batcher[In, Out]) Admit(n int) error {
	b.mu.Lock()
	err := b.admitLocked(n)
	b.mu.Unlock()
	if err != nil {
		b.rejected.Add(1)
	}
	return err
}

// admitLocked applies the queue bounds to a call of n items. An empty
// queue admits any call.
func (b *Batcher[In, Out]) admitLocked(n int) error {
	q := len(b.queue)
	if q == 0 {
		return nil
	}
	if q+n > b.cfg.MaxQueue {
		return queueFull(fmt.Sprintf("%d waiting, limit %d", q, b.cfg.MaxQueue))
	}
	if b.cfg.MaxWait > 0 && b.perItem > 0 {
		wait := time.Duration(b.perItem * float64(q) / float64(b.cfg.Workers))
		if wait > b.cfg.MaxWait {
			return queueFull(fmt.Sprintf("about %v of work waiting, limit %v", wait.Round(time.Millisecond), b.cfg.MaxWait))
		}
	}
	return nil
}

// joinLocked counts a call of flow id under way; a flow that was idle
// starts at the least model time of the busy flows at least, so idling
// earns it no credit.
func (b *Batcher[In, Out]) joinLocked(id flowID) *flow {
	b.forgetLocked(time.Now())
	f := b.flows[id.key]
	if f == nil || !f.busy() {
		if f == nil {
			f = &flow{key: id.key, weight: id.weight, vtime: b.vnow}
			b.flows[id.key] = f
		} else {
			if f.idleEl != nil {
				b.idle.Remove(f.idleEl)
				f.idleEl = nil
			}
			f.weight, f.vtime = id.weight, max(f.vtime, b.vnow)
		}
	}
	f.calls++
	return f
}

// leave counts a call of f as over.
func (b *Batcher[In, Out]) leave(f *flow) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f.calls--
	b.idleLocked(f, time.Now())
}

// idleLocked marks f idle at now once it has no call under way and no
// run: it stays active for ActiveFor.
func (b *Batcher[In, Out]) idleLocked(f *flow, now time.Time) {
	if f.busy() || f.idleEl != nil || b.flows[f.key] != f {
		return
	}
	if b.cfg.ActiveFor <= 0 {
		delete(b.flows, f.key)
		return
	}
	f.idleAt = now
	f.idleEl = b.idle.PushBack(f)
	b.forgetLocked(now)
}

// forgetLocked forgets the flows idle for ActiveFor or longer, and the
// longest idle past maxIdleFlows.
func (b *Batcher[In, Out]) forgetLocked(now time.Time) {
	for el := b.idle.Front(); el != nil; el = b.idle.Front() {
		f := el.Value.(*flow)
		if b.idle.Len() <= maxIdleFlows && now.Sub(f.idleAt) < b.cfg.ActiveFor {
			return
		}
		b.idle.Remove(el)
		f.idleEl = nil
		delete(b.flows, f.key)
	}
}

// eligibleLocked returns which flows may start a run now: a flow below
// its share of the workers, or any while the free workers outnumber
// those kept for the flows below theirs.
func (b *Batcher[In, Out]) eligibleLocked() func(*flow) bool {
	b.forgetLocked(time.Now())
	var weights float64
	for _, f := range b.flows {
		weights += f.weight
	}
	share := func(f *flow) int {
		return max(1, int(math.Floor(float64(b.cfg.Workers)*f.weight/weights+1e-9)))
	}
	kept := 0
	for _, f := range b.flows {
		kept += max(0, share(f)-f.running)
	}
	free := b.cfg.Workers - b.running
	return func(f *flow) bool { return free > 0 && (f.running < share(f) || free > kept) }
}

// takeLocked takes up to k items off the queue for one run, of the
// flows that may start one (eligibleLocked): the oldest ones while they
// belong to one flow, else, item by item, the oldest of the flow with
// the least model time per weight, charging each flow the expected time
// of its items. It takes none when no flow with items waiting may start
// a run; each flow in the run counts it as running.
func (b *Batcher[In, Out]) takeLocked(k int) []task[In, Out] {
	tasks := b.pickLocked(k)
	seen := map[*flow]bool{}
	for _, t := range tasks {
		if f := t.c.flow; !seen[f] {
			seen[f] = true
			f.running++
		}
	}
	if len(tasks) > 0 {
		b.running++
	}
	return tasks
}

func (b *Batcher[In, Out]) pickLocked(k int) []task[In, Out] {
	est := b.perItem
	if est == 0 {
		est = 1
	}
	may := b.eligibleLocked()
	one := true
	for _, t := range b.queue[1:] {
		if t.c.flow != b.queue[0].c.flow {
			one = false
			break
		}
	}
	tasks := make([]task[In, Out], 0, k)
	if one {
		if !may(b.queue[0].c.flow) {
			return nil
		}
		tasks = append(tasks, b.queue[:k]...)
		clear(b.queue[:k])
		b.queue = b.queue[k:]
	} else {
		taken := make([]bool, len(b.queue))
		allowed := map[*flow]bool{}
		for _, t := range b.queue {
			if _, ok := allowed[t.c.flow]; !ok {
				allowed[t.c.flow] = may(t.c.flow)
			}
		}
		for len(tasks) < k {
			best := -1
			for i, t := range b.queue {
				if !taken[i] && allowed[t.c.flow] && (best < 0 || t.c.flow.vtime < b.queue[best].c.flow.vtime) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			taken[best] = true
			tasks = append(tasks, b.queue[best])
			f := b.queue[best].c.flow
			b.vnow = max(b.vnow, f.vtime) // the item's start tag
			f.vtime += est / f.weight
		}
		if len(tasks) == 0 {
			return nil
		}
		kept := b.queue[:0]
		for i, t := range b.queue {
			if !taken[i] {
				kept = append(kept, t)
			}
		}
		clear(b.queue[len(kept):])
		b.queue = kept
		for i := range tasks {
			tasks[i].charged = est
		}
		return tasks
	}
	for i := range tasks {
		tasks[i].charged = est
		f := tasks[i].c.flow
		b.vnow = max(b.vnow, f.vtime)
		f.vtime += est / f.weight
	}
	return tasks
}

// queueFull is a refusal: it is embederr.ErrQueueFull (errors.Is), says
// why, and names its kind ("overloaded") for callers that report what
// kind of failure they fell back from, as AnalyzePrompt's keyword answer
// does.
type queueFull string

func (e queueFull) Error() string { return embederr.ErrQueueFull.Error() + ": " + string(e) }
func (e queueFull) Unwrap() error { return embederr.ErrQueueFull }

// Kind names the failure.
func (queueFull) Kind() string { return "overloaded" }

// signal wakes the collecting worker without blocking.
func (b *Batcher[In, Out]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// drop removes c's items that have not started from the queue.
func (b *Batcher[In, Out]) drop(c *call[Out]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.queue[:0]
	for _, t := range b.queue {
		if t.c != c {
			kept = append(kept, t)
		}
	}
	clear(b.queue[len(kept):])
	b.queue = kept
}

// finish records one item's outcome; the last one closes the call.
// Called with b.mu held.
func (c *call[Out]) finish(n int, err error) {
	if c.left <= 0 {
		return
	}
	if err != nil && c.err == nil {
		c.err = err
		c.left = 0 // the call has its answer; its other items are moot
		close(c.done)
		return
	}
	c.left -= n
	if c.left <= 0 {
		close(c.done)
	}
}

// work runs batches until Close.
func (b *Batcher[In, Out]) work() {
	defer b.workers.Done()
	for {
		b.collect.Lock()
		tasks := b.gather()
		b.collect.Unlock()
		if tasks == nil {
			return // closed
		}
		b.runBatch(tasks)
	}
}

// gather waits for items and takes up to MaxBatch of them once the batch
// is full, its window has passed, or the batcher closes. It returns nil
// when the batcher is closed.
func (b *Batcher[In, Out]) gather() []task[In, Out] {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil
		}
		b.pruneLocked()
		var wait time.Duration
		if n := len(b.queue); n > 0 {
			wait = b.cfg.Window - time.Since(b.queue[0].when)
			if n >= b.cfg.MaxBatch || wait <= 0 {
				tasks := b.takeLocked(min(n, b.cfg.MaxBatch))
				if len(tasks) > 0 {
					more := len(b.queue) > 0
					b.mu.Unlock()
					if more {
						b.signal() // the next collector need not wait for an arrival
					}
					return tasks
				}
				wait = 0 // every waiting flow is at its share: wait for a run to end
			}
		}
		b.mu.Unlock()
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-b.wake:
			case <-timer.C:
			case <-b.quit:
			}
		} else {
			select {
			case <-b.wake:
			case <-b.quit:
			}
		}
	}
}

// pruneLocked drops queued items of calls that already have their answer
// (an item of theirs failed) or whose caller has gone.
func (b *Batcher[In, Out]) pruneLocked() {
	kept := b.queue[:0]
	for _, t := range b.queue {
		if t.c.left > 0 && t.c.ctx.Err() == nil {
			kept = append(kept, t)
		}
	}
	clear(b.queue[len(kept):])
	b.queue = kept
}

// runBatch runs one batch and hands each result to its call. The run's
// context ends when every caller in the batch has gone.
func (b *Batcher[In, Out]) runBatch(tasks []task[In, Out]) {
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int64
	seen := map[*call[Out]]bool{}
	for _, t := range tasks {
		if seen[t.c] {
			continue
		}
		seen[t.c] = true
		if b.cfg.OnRun != nil {
			b.cfg.OnRun(t.c.ctx, time.Since(t.when), len(tasks)) // tasks are in queue order: t is the call's oldest
		}
		waiting.Add(1)
		stop := context.AfterFunc(t.c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	ins := make([]In, len(tasks))
	for i, t := range tasks {
		ins[i] = t.in
	}
	b.runs.Add(1)
	b.items.Add(int64(len(tasks)))
	began := time.Now()
	outs, err := b.run(runCtx, ins)
	took := time.Since(began)
	if err == nil && len(outs) != len(ins) {
		err = fmt.Errorf("batch: run returned %d results for %d items", len(outs), len(ins))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.signal() // a worker is free: a flow at its share may run again
	b.running--
	ended := map[*flow]bool{}
	now := time.Now()
	for _, t := range tasks { // each flow pays the run's time its items took
		f := t.c.flow
		f.vtime += (float64(took)/float64(len(tasks)) - t.charged) / f.weight
		if !ended[f] {
			ended[f] = true
			f.running--
			b.idleLocked(f, now)
		}
	}
	if err == nil {
		per := float64(took) / float64(len(ins))
		if b.perItem == 0 {
			b.perItem = per
		} else {
			b.perItem += 0.1 * (per - b.perItem)
		}
	}
	for i, t := range tasks {
		if t.c.left <= 0 {
			continue // gone or failed already: nobody reads results
		}
		if err != nil {
			t.c.finish(1, err)
			continue
		}
		t.c.results[t.pos] = outs[i]
		t.c.finish(1, nil)
	}
}

// Close stops the workers after the batches that are running, fails the
// items still queued with embederr.ErrClosed, and waits for the workers.
// It is idempotent.
func (b *Batcher[In, Out]) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for _, t := range b.queue {
		t.c.finish(1, embederr.ErrClosed)
	}
	clear(b.queue)
	b.queue = nil
	b.mu.Unlock()
	close(b.quit)
	b.workers.Wait()
	return nil
}
