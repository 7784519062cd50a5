// Command fair8 is the admission4 probe of issue 27's deadline finding
// (adapted from hostile6's evict6): a hog identity loading the daemon and
// a victim identity's small Routes with a deadline of their own.
//
//	hog     -conc calls at once in a closed loop for -hold, token -token:
//	        -kind embed (Embed of 64 texts × 4 KB) or route (250 KB Route);
//	        prints the codes.
//	victim  -n small Routes one after another, each with -deadline, over
//	        gRPC (-http "") or HTTP/JSON (-http host:port, the deadline as
//	        Connect-Timeout-Ms); prints the codes and p50/p99.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

var (
	addr  = flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	httpA = flag.String("http", "", "victim: HTTP/JSON listener (host:port) instead of gRPC")
	mode  = flag.String("mode", "victim", "hog or victim")
	kind  = flag.String("kind", "embed", "hog: embed or route")
	conc  = flag.Int("conc", 16, "hog: calls at once")
	hold  = flag.Duration("hold", 20*time.Second, "hog: how long")
	token = flag.String("token", "", "bearer token")
	n     = flag.Int("n", 40, "victim: calls")
	dl    = flag.Duration("deadline", 200*time.Millisecond, "victim: each call's deadline (0: none)")
	gap   = flag.Duration("gap", 50*time.Millisecond, "victim: pause between calls")
)

func main() {
	flag.Parse()
	if *mode == "hog" {
		hog()
		return
	}
	victim()
}

func text(seed, size int) string {
	b := make([]byte, 0, size+20)
	for k := 0; len(b) < size; k++ {
		b = fmt.Appendf(b, "%x ", (seed*1000003+k*31)*2654435761%(1<<40))
	}
	return string(b)
}

func hog() {
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20), grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		panic(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token)
	c := pb.NewClassifierServiceClient(cc)
	deadline := time.Now().Add(*hold)
	var calls atomic.Int64
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for g := range *conc {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				var err error
				if *kind == "route" {
					_, err = c.Route(ctx, &pb.RouteRequest{Query: text(g*7919+i, 250_000)})
				} else {
					texts := make([]string, 64)
					for j := range texts {
						texts[j] = text(g*7919+i*64+j, 4000)
					}
					_, err = c.Embed(ctx, &pb.EmbedRequest{Texts: texts})
				}
				calls.Add(1)
				mu.Lock()
				codes[status.Code(err).String()]++
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("hog %s ×%d: %d calls %v\n", *kind, *conc, calls.Load(), codes)
}

func victim() {
	var lat []time.Duration
	codes := map[string]int{}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token)
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	c := pb.NewClassifierServiceClient(cc)
	hc := &http.Client{Timeout: 10 * time.Second}
	var lastErr string
	for i := 0; i < *n; i++ {
		time.Sleep(*gap)
		s := time.Now()
		code := ""
		if *httpA == "" {
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if *dl > 0 {
				cctx, cancel = context.WithTimeout(ctx, *dl)
			}
			_, err := c.Route(cctx, &pb.RouteRequest{Query: "open a pull request on github"})
			cancel()
			code = status.Code(err).String()
			if err != nil {
				lastErr = err.Error()
			}
		} else {
			req, _ := http.NewRequest("POST", "http://"+*httpA+"/classifier.v1.ClassifierService/Route",
				bytes.NewReader([]byte(`{"query":"open a pull request on github"}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Connect-Protocol-Version", "1")
			req.Header.Set("Authorization", "Bearer "+*token)
			if *dl > 0 {
				req.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(dl.Milliseconds(), 10))
			}
			resp, err := hc.Do(req)
			if err != nil {
				code, lastErr = "transport", err.Error()
			} else {
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				resp.Body.Close()
				code = strconv.Itoa(resp.StatusCode)
				if resp.StatusCode != 200 {
					lastErr = strings.TrimSpace(buf.String())
				}
			}
		}
		lat = append(lat, time.Since(s))
		codes[code]++
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("victim %d calls deadline %v http=%v: %v p50 %v p99 %v max %v\n", *n, *dl, *httpA != "", codes,
		lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*99/100].Round(100*time.Microsecond), lat[len(lat)-1].Round(time.Millisecond))
	if lastErr != "" {
		fmt.Println("  last error:", lastErr)
	}
}
