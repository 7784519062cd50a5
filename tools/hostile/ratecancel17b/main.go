// Command ratecancel17b shows what mcpsrc.Isolated's start turns (one
// rate.Limiter, 2 a second after a burst of 8) give back when a waiting
// call is cancelled: a reservation that is not the last gives nothing, so
// a caller alternating two waiting calls, cancelling the older each time,
// uses up starts no one makes (the seventeenth hostile pass, part B).
package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

func main() {
	lim := rate.NewLimiter(2, 8)
	for i := 0; i < 8; i++ { // the burst, taken by real starts
		_ = lim.Wait(context.Background())
	}
	start := time.Now()
	var prev context.CancelFunc
	for n := 0; n < 200; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		go func() { _ = lim.Wait(ctx) }()
		time.Sleep(5 * time.Millisecond)
		if prev != nil {
			prev()
		}
		prev = cancel
	}
	prev()
	time.Sleep(10 * time.Millisecond)
	r := lim.Reserve()
	fmt.Printf("after 200 cancelled waits in %v, a new start waits %v (without them: 500ms)\n", time.Since(start).Round(time.Millisecond), r.Delay().Round(time.Millisecond))
	r.Cancel()
}
