// Command conn5 is the fifth hostile pass's connection flood. It only
// connects to -addr, with no token.
//
//	hold   open -conns TCP connections spread over -srcs source addresses
//	       (127.0.0.1, 127.0.0.2, ...), -rate a second (0: as fast as it
//	       can), each sending -send ("": nothing; tls: 5 bytes of a TLS
//	       record header; head: part of an HTTP request head; h2: the HTTP/2
//	       preface; get: a whole keep-alive GET /metrics), then hold them for
//	       -hold; every 2 s prints how many are open, reset, or closed by the
//	       server
//	churn  -conns workers connect and close at once (reset) as fast as they
//	       can for -hold, from -srcs addresses; prints connections a second
//	       and how many were refused (reset before a byte)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	addr  = flag.String("addr", "127.0.0.1:50051", "listener")
	mode  = flag.String("mode", "hold", "hold or churn")
	conns = flag.Int("conns", 1000, "connections (hold) or workers (churn)")
	srcs  = flag.Int("srcs", 1, "source addresses 127.0.0.1 .. 127.0.0.N")
	first = flag.Int("first", 1, "last byte of the first source address")
	send  = flag.String("send", "", `what each connection sends: "", tls, head, h2, get`)
	hold  = flag.Duration("hold", 20*time.Second, "how long to hold (hold) or run (churn)")
	rate  = flag.Int("rate", 0, "connections a second (hold; 0: as fast as possible)")
)

func src(i int) *net.TCPAddr {
	n := *first + i%*srcs
	return &net.TCPAddr{IP: net.IPv4(127, byte(n>>16), byte(n>>8), byte(n))}
}

func payload() []byte {
	switch *send {
	case "tls":
		return []byte{0x16, 0x03, 0x01, 0x40, 0x00}
	case "head":
		return []byte("POST /classifier.v1.ClassifierService/Route HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")
	case "h2":
		return []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	case "get":
		return []byte("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	}
	return nil
}

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if *mode == "churn" {
		churn()
		return
	}
	var open, dialErr, reset, closed atomic.Int64
	p := payload()
	var mu sync.Mutex
	var cs []net.Conn
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for i := range *conns {
		if *rate > 0 {
			if d := time.Duration(i)*time.Second/time.Duration(*rate) - time.Since(start); d > 0 {
				time.Sleep(d)
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: src(i), Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", *addr)
			<-sem
			if err != nil {
				dialErr.Add(1)
				return
			}
			open.Add(1)
			mu.Lock()
			cs = append(cs, c)
			mu.Unlock()
			if p != nil {
				_, _ = c.Write(p)
			}
			buf := make([]byte, 4096)
			for {
				_, err := c.Read(buf)
				if err == nil {
					continue
				}
				open.Add(-1)
				if errors.Is(err, syscall.ECONNRESET) {
					reset.Add(1)
				} else if errors.Is(err, io.EOF) {
					closed.Add(1)
				}
				return
			}
		}()
	}
	log.Printf("dialled %d in %v", *conns, time.Since(start).Round(time.Millisecond))
	for t := time.Now(); time.Since(t) < *hold; time.Sleep(2 * time.Second) {
		log.Printf("open %d reset %d closed %d dial errors %d", open.Load(), reset.Load(), closed.Load(), dialErr.Load())
	}
	mu.Lock()
	for _, c := range cs {
		_ = c.Close()
	}
	mu.Unlock()
	log.Printf("closed all: open %d reset %d closed %d dial errors %d", open.Load(), reset.Load(), closed.Load(), dialErr.Load())
}

func churn() {
	var ok, refused, dialErr atomic.Int64
	deadline := time.Now().Add(*hold)
	var wg sync.WaitGroup
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1)
			for i := w; time.Now().Before(deadline); i += *conns {
				d := net.Dialer{LocalAddr: src(i), Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", *addr)
				if err != nil {
					dialErr.Add(1)
					continue
				}
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
				if _, err := c.Read(buf); errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) {
					refused.Add(1)
				} else {
					ok.Add(1)
				}
				_ = c.(*net.TCPConn).SetLinger(0)
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(os.Stdout, "churn %v: %d kept a moment, %d refused, %d dial errors: %.0f connections/s\n", *hold, ok.Load(), refused.Load(), dialErr.Load(),
		float64(ok.Load()+refused.Load())/hold.Seconds())
}
