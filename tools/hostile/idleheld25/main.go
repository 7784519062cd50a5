// idleheld25 (twenty-fifth pass, finding 5): Go's net/http HTTP/2 server keeps a connection that closed with
// a stream open in memory until its IdleTimeout: serverConn.serve's deferred idleTimer.Stop runs before the
// deferred closeAllStreamsOnConnClose, whose closeStream re-arms the idle timer (Reset(IdleTimeout)) when the
// last stream goes, and the timer's sc.onIdleTimer holds the connection. Stdlib only: a TLS httptest server
// whose accepted connections carry 1 MiB of ballast, 200 connections each closed by the client with a POST
// body still open, then the live heap every 5 s. -idle 20s: ~200 MB for 20 s, then 0; -idle 0: 0 at once.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"time"
)

type fat struct {
	net.Conn
	ballast []byte
}

type lis struct{ net.Listener }

func (l lis) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &fat{Conn: c, ballast: make([]byte, 1<<20)}, nil
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc >> 20
}

var idle = flag.Duration("idle", 20*time.Second, "the server's IdleTimeout")

func main() {
	flag.Parse()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv.Listener = lis{srv.Listener}
	srv.EnableHTTP2 = true
	srv.Config.IdleTimeout = *idle
	srv.StartTLS()
	var mu sync.Mutex
	var conns []net.Conn
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true,
		DialTLSContext: func(ctx context.Context, n, a string) (net.Conn, error) {
			c, err := tls.Dial(n, a, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			return c, err
		}}
	for i := 0; i < 200; i++ {
		pr, _ := io.Pipe() // a body that never ends: the stream stays open
		req, _ := http.NewRequest("POST", srv.URL, pr)
		go func() { _, _ = tr.RoundTrip(req) }()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		c := conns[len(conns)-1]
		mu.Unlock()
		tr.CloseIdleConnections()
		_ = c.Close() // the connection closed with the stream open
		tr = tr.Clone()
	}
	fmt.Println("closed 200 connections with a stream open each (1 MiB ballast per server conn)")
	for i := 0; i < 6; i++ {
		fmt.Printf("+%ds heap %d MB\n", i*5, heap())
		time.Sleep(5 * time.Second)
	}
}
