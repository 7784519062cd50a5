// h2tiny19: the nineteenth hostile pass's HTTP/2 counterpart of a chunked
// body in 1-byte chunks: over TLS (ALPN h2, certificate not verified) each
// of -conns connections opens streams one after another, each a POST of
// -path (with -token, or none) whose body is -size bytes sent as DATA
// frames of -frame bytes (all written at once, within the peer's windows),
// then reads frames until the stream ends. Prints statuses, streams, the
// client's CPU and, with -pid, the daemon's in the window.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:43011", "")
	path := flag.String("path", "/classifier.v1.ClassifierService/Route", "")
	ctype := flag.String("ctype", "application/json", "")
	token := flag.String("token", "", "")
	conns := flag.Int("conns", 4, "")
	size := flag.Int("size", 64<<10, "body bytes")
	frame := flag.Int("frame", 1, "bytes per DATA frame")
	secs := flag.Float64("secs", 10, "")
	pid := flag.String("pid", "", "")
	flag.Parse()
	var mu sync.Mutex
	codes := map[string]int{}
	c0, d0 := probe.CPUSeconds(""), probe.CPUSeconds(*pid)
	t0 := time.Now()
	end := t0.Add(time.Duration(*secs * float64(time.Second)))
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[string]int{}
			defer func() {
				mu.Lock()
				for k, v := range local {
					codes[k] += v
				}
				mu.Unlock()
			}()
			for time.Now().Before(end) {
				c, err := probe.DialTLS(nil, *addr)
				if err != nil {
					local["dial"]++
					time.Sleep(50 * time.Millisecond)
					continue
				}
				local["conns"]++
				var out bytes.Buffer
				out.WriteString(http2.ClientPreface)
				fr := http2.NewFramer(&out, c)
				fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
				fr.WriteWindowUpdate(0, 1<<30)
				c.Write(out.Bytes())
				out.Reset()
				var hb bytes.Buffer
				enc := hpack.NewEncoder(&hb)
				body := bytes.Repeat([]byte(" "), *frame)
				sid := uint32(1)
				for time.Now().Before(end) {
					hb.Reset()
					for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", *addr}, {":path", *path}, {"content-type", *ctype}, {"te", "trailers"}} {
						enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
					}
					probe.WriteFields(enc, probe.Bearer(*token))
					fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: hb.Bytes(), EndHeaders: true})
					for n := 0; n < *size; n += *frame {
						fr.WriteData(sid, n+*frame >= *size, body)
					}
					c.SetDeadline(time.Now().Add(15 * time.Second))
					if _, err := c.Write(out.Bytes()); err != nil {
						local["werr"]++
						break
					}
					out.Reset()
					rf := http2.NewFramer(nil, c)
					rf.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
					done := false
					for !done {
						f, err := rf.ReadFrame()
						if err != nil {
							local["rerr"]++
							break
						}
						switch f := f.(type) {
						case *http2.MetaHeadersFrame:
							if f.StreamID == sid {
								for _, h := range f.Fields {
									if h.Name == ":status" {
										local[h.Value]++
									}
								}
								if f.StreamEnded() {
									done = true
								}
							}
						case *http2.DataFrame:
							if f.StreamID == sid && f.StreamEnded() {
								done = true
							}
						case *http2.RSTStreamFrame:
							if f.StreamID == sid {
								local["rst:"+f.ErrCode.String()]++
								done = true
							}
						case *http2.GoAwayFrame:
							local["goaway"]++
							done = true
						case *http2.SettingsFrame:
							if !f.IsAck() {
								fr.WriteSettingsAck()
								c.Write(out.Bytes())
								out.Reset()
							}
						case *http2.PingFrame:
							if !f.IsAck() {
								fr.WritePing(true, f.Data)
								c.Write(out.Bytes())
								out.Reset()
							}
						}
					}
					if !done {
						break
					}
					sid += 2
				}
				c.Close()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("h2tiny19 size %d frame %d: %v in %.1fs, client CPU %.2fs, daemon CPU %.2fs, load %s\n",
		*size, *frame, codes, time.Since(t0).Seconds(), probe.CPUSeconds("")-c0, probe.CPUSeconds(*pid)-d0, probe.LoadAvg())
}
