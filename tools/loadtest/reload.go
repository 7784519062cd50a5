package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// runReload is the reload load test: --concurrency clients send
// --requests Route calls in all while the daemon reloads its index on a
// SIGHUP every --reload. Failed requests are counted, not fatal: the
// figure that matters is that there are none.
func runReload(ctx context.Context, c config, out io.Writer) error {
	addr, proc, stopDaemon, err := startDaemon(ctx, c)
	if err != nil {
		return err
	}
	defer stopDaemon()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	cl := pb.NewClassifierServiceClient(conn)
	info, err := cl.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if err != nil {
		return err
	}
	gen0 := info.GetLoad().GetGeneration()

	done := make(chan struct{})
	var sent int
	hupped := make(chan struct{})
	go func() {
		defer close(hupped)
		t := time.NewTicker(c.reload)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if proc.Signal(syscall.SIGHUP) == nil {
					sent++
				}
			}
		}
	}()

	var mu sync.Mutex
	var lat []time.Duration
	var failed int
	var firstErr error
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range c.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t0 := time.Now()
				_, err := cl.Route(rctx, &pb.RouteRequest{Query: prompts[i%len(prompts)]})
				d := time.Since(t0)
				cancel()
				mu.Lock()
				lat = append(lat, d)
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < c.requests && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	<-hupped
	// Let the last SIGHUP's reload land before reading the generation.
	time.Sleep(min(2*c.reload, time.Second))
	info, err = cl.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
	if err != nil {
		return err
	}
	l := summarize(lat)
	fmt.Fprintf(out, "reload mode: %d Route calls from %d clients in %v (%.0f req/s), SIGHUP every %v: %d sent, %d reloads (generation %d -> %d)\n",
		len(lat), c.concurrency, elapsed.Round(time.Millisecond), float64(len(lat))/elapsed.Seconds(), c.reload, sent,
		info.GetLoad().GetGeneration()-gen0, gen0, info.GetLoad().GetGeneration())
	fmt.Fprintf(out, "latency p50 %.3f ms, p99 %.3f ms, max %.3f ms; failed %d\n", ms(l.p50), ms(l.p99), ms(lat[len(lat)-1]), failed)
	if failed > 0 {
		return fmt.Errorf("%d of %d requests failed during reloads; first: %v", failed, len(lat), firstErr)
	}
	return nil
}
