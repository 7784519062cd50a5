// h1body26: hostile HTTP/1.1 client of the twenty-sixth pass (branch pass26): -conns keep-alive TLS
// connections (net/http with HTTP/2 off), each POSTing -bodyfile's bytes to -path with -ctype and the
// token, one request after another, until -secs. For bodies answered with a status the refused-bodies rate
// does not charge (application/grpc over HTTP/1.1: 505 from grpc-go after the guard read the body).
// Prints statuses, connections dialed, client CPU and the daemon's CPU (-pid), and their ratio.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:48401", "")
	path := flag.String("path", "/classifier.v1.ClassifierService/Route", "")
	ctype := flag.String("ctype", "application/grpc", "")
	token := flag.String("token", "", "")
	bodyFile := flag.String("bodyfile", "", "")
	conns := flag.Int("conns", 16, "")
	secs := flag.Float64("secs", 10, "")
	pid := flag.String("pid", "", "")
	flag.Parse()
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var dials atomic.Int64
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed test daemon
		ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns,
		DialContext: func(ctx context.Context, n, a string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, n, a)
		},
	}
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var mu sync.Mutex
	codes := map[string]int{}
	meter := probe.Measure(*pid)
	end := meter.End(*secs)
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				req, _ := http.NewRequest(http.MethodPost, "https://"+*addr+*path, bytes.NewReader(body))
				req.Header.Set("Content-Type", *ctype)
				if *token != "" {
					req.Header.Set("Authorization", "Bearer "+*token)
				}
				k := "err"
				if resp, err := cl.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					k = fmt.Sprint(resp.StatusCode)
				}
				mu.Lock()
				codes[k]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el, cc, dc, ratio := meter.Figures()
	fmt.Printf("h1body26 %s %s: %v dials %d in %.1fs, client CPU %.2fs, daemon CPU %.2fs (%.2fx), load %s\n",
		*ctype, *path, codes, dials.Load(), el, cc, dc, ratio, probe.LoadAvg())
}
