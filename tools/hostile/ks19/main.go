// ks19: the nineteenth hostile pass's raw HTTP/1.1 flooder (plain TCP).
// Each of -conns workers writes -depth requests (the raw request read
// from -req, a file; "@TOKEN@" replaced by -token) on a kept-alive
// connection, reads their answers, and goes on; a connection the daemon
// closes is opened again (counted). -fresh: one new connection per
// request (an honest curl-per-call client). Prints statuses, connections
// opened, latency p50/p99 of each batch, the client's CPU and, with -pid,
// the daemon's CPU in the window.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:43001", "")
	reqf := flag.String("req", "", "raw request file")
	token := flag.String("token", "", "")
	conns := flag.Int("conns", 4, "")
	depth := flag.Int("depth", 1, "requests written before reading their answers")
	secs := flag.Float64("secs", 10, "")
	fresh := flag.Bool("fresh", false, "a new connection per request")
	every := flag.Duration("every", 0, "pause between batches")
	pid := flag.String("pid", "", "daemon pid")
	label := flag.String("label", "ks19", "")
	src := flag.String("src", "", "source address to bind")
	useTLS := flag.Bool("tls", false, "TLS (ALPN http/1.1, certificate not verified)")
	flag.Parse()
	raw, err := os.ReadFile(*reqf)
	if err != nil {
		panic(err)
	}
	raw = bytes.ReplaceAll(raw, []byte("@TOKEN@"), []byte(*token))
	raw = bytes.ReplaceAll(raw, []byte("@HOST@"), []byte(*addr))
	one := raw
	raw = bytes.Repeat(one, *depth)
	var mu sync.Mutex
	codes := map[string]int{}
	opened, closed := 0, 0
	var lat []float64
	c0, d0 := probe.CPUSeconds(""), probe.CPUSeconds(*pid)
	t0 := time.Now()
	end := t0.Add(time.Duration(*secs * float64(time.Second)))
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[string]int{}
			var ll []float64
			o, cl := 0, 0
			var c net.Conn
			var br *bufio.Reader
			for time.Now().Before(end) {
				if c == nil {
					var err error
					dl := &net.Dialer{Timeout: 10 * time.Second}
					if *src != "" {
						dl.LocalAddr = &net.TCPAddr{IP: net.ParseIP(*src)}
					}
					if *useTLS {
						c, err = tls.DialWithDialer(dl, "tcp", *addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
					} else {
						c, err = dl.Dial("tcp", *addr)
					}
					if err != nil {
						local["dial:"+err.Error()[:min(30, len(err.Error()))]]++
						time.Sleep(10 * time.Millisecond)
						continue
					}
					o++
					br = bufio.NewReaderSize(c, 64<<10)
				}
				s := time.Now()
				_ = c.SetDeadline(time.Now().Add(15 * time.Second))
				if _, err := c.Write(raw); err != nil {
					local["werr"]++
					c.Close()
					c = nil
					cl++
					continue
				}
				reset := false
				for j := 0; j < *depth; j++ {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						local["eof"]++
						reset = true
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					local[fmt.Sprint(resp.StatusCode)]++
					if resp.Close {
						reset = true
						break
					}
				}
				ll = append(ll, float64(time.Since(s).Microseconds())/1000)
				if reset || *fresh {
					c.Close()
					c = nil
					cl++
				}
				if *every > 0 {
					time.Sleep(*every)
				}
			}
			if c != nil {
				c.Close()
			}
			mu.Lock()
			for k, v := range local {
				codes[k] += v
			}
			opened += o
			closed += cl
			lat = append(lat, ll...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	sort.Float64s(lat)
	p := func(q float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(float64(len(lat)-1)*q)]
	}
	fmt.Printf("%s: %v in %.1fs, conns opened %d closed %d, batch p50 %.1f p99 %.1f ms, client CPU %.2fs, daemon CPU %.2fs, load %s\n",
		*label, codes, el, opened, closed, p(.5), p(.99), probe.CPUSeconds("")-c0, probe.CPUSeconds(*pid)-d0, probe.LoadAvg())
}
