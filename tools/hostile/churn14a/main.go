// churn14a: connection churn that the early-reset rule does not count: each
// connection (TLS, or plain with -tls=false) carries exactly one request with
// no token, answered, then is closed; HTTP/1.1 (401 is not counted on
// HTTP/1.1) or HTTP/2 (-h2) to a path answered without a token (the explain
// page: -path /). -conns loops for -hold. Prints connections/s and statuses.
package main

import (
	"bufio"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:43201", "listener")
	path := flag.String("path", "/classifier.v1.ClassifierService/Route", "request path")
	useTLS := flag.Bool("tls", true, "TLS")
	conns := flag.Int("conns", 4, "loops")
	hold := flag.Duration("hold", 10*time.Second, "how long")
	flag.Parse()
	var n, errs atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	deadline := time.Now().Add(*hold)
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				code, err := one(*addr, *path, *useTLS)
				if err != nil {
					errs.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				n.Add(1)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("churn14a: %d connections (%.0f/s), %d errors, statuses %v\n", n.Load(), float64(n.Load())/hold.Seconds(), errs.Load(), codes)
}

func one(addr, path string, useTLS bool) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if useTLS {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			return 0, err
		}
		c = tc
	}
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", path); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
