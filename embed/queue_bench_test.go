package embed

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/models"
)

// BenchmarkQueue measures what micro-batching gains: texts per second
// through the queue from 8 concurrent callers of one text each, at run
// sizes 1, 8 and 32, with two workers (the daemon's defaults). The model
// is $BENCH_MODEL_DIR, else the default model; a batch-dependent model
// always runs texts alone, whatever the run size, so compare a float
// model (e.g. BENCH_MODEL_DIR=.cache/models/all-MiniLM-L6-v2):
//
//	go test -run '^$' -bench BenchmarkQueue -benchtime 3s ./embed/
func BenchmarkQueue(b *testing.B) {
	dir := os.Getenv("BENCH_MODEL_DIR")
	if dir == "" {
		dir = testenv.ModelDir()
	}
	man, err := models.Resolve(dir, "")
	if err != nil {
		b.Fatal(err)
	}
	rt := testRuntime(b)
	for _, size := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("%s/run=%d", man.Name, size), func(b *testing.B) {
			e, err := Open(rt, Config{ModelDir: dir, Manifest: man, ChunkSize: size, MaxQueue: 1024,
				BatchWindow: time.Millisecond, MaxConcurrent: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			const callers = 8
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						if _, err := e.Embed(context.Background(), []string{sentences[i%int64(len(sentences))]}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "texts/s")
			// CPU time per text depends much less than wall time on what
			// else the machine runs: cores ÷ this is the ceiling on a
			// quiet machine.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/text")
			st := e.QueueStats()
			if st.Runs > 0 {
				b.ReportMetric(float64(st.Items)/float64(st.Runs), "texts/run")
			}
		})
	}
}

// cpuTime is this process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
