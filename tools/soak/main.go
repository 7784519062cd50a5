// Command soak drives a running classifierd with Classify calls made of
// words never seen before and prints the daemon's resident memory (from
// /proc/PID/status) as it goes: with caches bounded in bytes, RSS levels
// off instead of growing with the number of unique words.
//
//	soak --addr 127.0.0.1:50051 --pid PID --duration 10m
//
// It stops by itself after --duration (or --calls) and sends traffic only
// to --addr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:50051", "classifierd address (HOST:PORT or unix:///path)")
	pid := flag.Int("pid", 0, "classifierd's process id, for its RSS (required)")
	duration := flag.Duration("duration", 10*time.Minute, "how long to run")
	maxCalls := flag.Int64("calls", 0, "stop after this many calls (0: no limit)")
	workers := flag.Int("workers", 4, "concurrent callers")
	words := flag.Int("words", 20, "unique words per request")
	textBytes := flag.Int("text-bytes", 0, "make each request at least this long, in unique words (long pastes)")
	every := flag.Duration("every", 30*time.Second, "how often to print RSS")
	token := flag.String("token", "", "bearer token, if the daemon requires one")
	metricsURL := flag.String("metrics", "", "the daemon's /metrics URL, to print its Go heap beside RSS (native memory is RSS minus heap)")
	flag.Parse()
	if *pid <= 0 {
		return errors.New("--pid is required")
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	if *token != "" {
		ctx = withToken(ctx, *token)
	}
	var calls, failed, uniq atomic.Int64
	codes := sync.Map{}
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var sb strings.Builder
			for ctx.Err() == nil {
				if *maxCalls > 0 && calls.Load() >= *maxCalls {
					return
				}
				sb.Reset()
				for i := 0; i < *words || sb.Len() < *textBytes; i++ {
					if i > 0 {
						sb.WriteByte(' ')
					}
					sb.WriteString(uniqueWord(rng, uniq.Add(1)))
				}
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Classify(cctx, &pb.ClassifyRequest{Text: sb.String()})
				ccancel()
				calls.Add(1)
				if err != nil && ctx.Err() == nil {
					failed.Add(1)
					n, _ := codes.LoadOrStore(status.Code(err).String(), new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				}
			}
		})
	}
	start := time.Now()
	first, peak := rssKiB(*pid), int64(0)
	fmt.Printf("%8s %10s %12s %10s %14s\n", "elapsed", "calls", "unique_words", "rss_mib", "go_heap_mib")
	report := func() int64 {
		r := rssKiB(*pid)
		peak = max(peak, r)
		fmt.Printf("%8s %10d %12d %10.1f %14s\n", time.Since(start).Round(time.Second), calls.Load(), uniq.Load(), float64(r)/1024, goHeapMiB(*metricsURL))
		return r
	}
	report()
	t := time.NewTicker(*every)
	defer t.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case <-t.C:
			report()
		case <-done:
			loop = false
		}
	}
	last := report()
	fmt.Printf("calls %d failed %d unique words %d; RSS start %.1f MiB, peak %.1f MiB, end %.1f MiB\n",
		calls.Load(), failed.Load(), uniq.Load(), float64(first)/1024, float64(peak)/1024, float64(last)/1024)
	codes.Range(func(k, v any) bool {
		fmt.Printf("  %s: %d\n", k, v.(*atomic.Int64).Load())
		return true
	})
	return nil
}

// uniqueWord is a lower-case word of 4-40 letters that no other call
// produced: a random stem and the counter in base 26.
func uniqueWord(rng *rand.Rand, n int64) string {
	var b strings.Builder
	for range 2 + rng.IntN(28) {
		b.WriteByte(byte('a' + rng.IntN(26)))
	}
	for ; n > 0; n /= 26 {
		b.WriteByte(byte('a' + n%26))
	}
	return b.String()
}

func rssKiB(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// goHeapMiB reads go_memstats_heap_inuse_bytes from the daemon's metrics,
// or "-" without them.
func goHeapMiB(url string) string {
	if url == "" {
		return "-"
	}
	resp, err := http.Get(url)
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return "?"
			}
			return strconv.FormatFloat(f/(1<<20), 'f', 1, 64)
		}
	}
	return "?"
}
