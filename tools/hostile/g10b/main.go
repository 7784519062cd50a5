// Command g10b is the tenth hostile pass's (half B) native gRPC probe.
// Modes (-mode):
//
//	victim    -n small Routes one after another as -token, each with
//	          -deadline (0: none), -gap apart; prints codes and p50/p99.
//	hog       -conc calls at once in a closed loop for -hold as each of
//	          -tokens (comma-separated), -kind route|embed|track|history,
//	          -size bytes, each with -deadline (0: none), -attempts forged
//	          grpc-previous-rpc-attempts (0: none); prints the codes.
//	sessions  -n CreateSession of fresh ids as -token; prints codes.
//	track     -n TrackInputEvent as -token into -sessions distinct session
//	          ids with -size byte prompts; prints codes.
//	embed     one Embed of -n texts of -size bytes; prints code and time.
package main

import (
	"context"
	"flag"
	"fmt"
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
	tpb "github.com/classifierd/classifierd/gen/terminal/v1"
)

var (
	addr     = flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	mode     = flag.String("mode", "victim", "victim, hog, sessions, track, embed")
	kind     = flag.String("kind", "route", "hog: route, embed, track, history")
	conc     = flag.Int("conc", 16, "hog: calls at once per token")
	conns    = flag.Int("conns", 1, "hog: connections per token")
	hold     = flag.Duration("hold", 20*time.Second, "hog: how long")
	token    = flag.String("token", "", "bearer token")
	tokens   = flag.String("tokens", "", "hog: tokens, comma-separated")
	n        = flag.Int("n", 40, "calls")
	size     = flag.Int("size", 64, "bytes")
	nsess    = flag.Int("sessions", 1, "track: session ids")
	dl       = flag.Duration("deadline", 0, "each call's deadline (0: none)")
	gap      = flag.Duration("gap", 50*time.Millisecond, "victim: pause between calls")
	attempts = flag.Int("attempts", 0, "hog: forged grpc-previous-rpc-attempts")
	prefix   = flag.String("prefix", "p", "ids' prefix")
)

func text(seed, size int) string {
	b := make([]byte, 0, size+20)
	for k := 0; len(b) < size; k++ {
		b = fmt.Appendf(b, "%x ", (seed*1000003+k*31)*2654435761%(1<<40))
	}
	return string(b[:size])
}

func dial() *grpc.ClientConn {
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		panic(err)
	}
	return cc
}

func cctx(tok string, extra ...string) (context.Context, context.CancelFunc) {
	ctx := context.Background()
	if tok != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	if len(extra) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, extra...)
	}
	if *dl > 0 {
		return context.WithTimeout(ctx, *dl)
	}
	return context.WithCancel(ctx)
}

func codeOf(err error) string {
	if err == nil {
		return "OK"
	}
	return status.Code(err).String()
}

func main() {
	flag.Parse()
	switch *mode {
	case "victim":
		victim()
	case "hog":
		hog()
	case "sessions":
		sessions()
	case "track":
		track()
	case "embed":
		embed()
	default:
		panic(*mode)
	}
}

func victim() {
	cc := dial()
	c := pb.NewClassifierServiceClient(cc)
	var lat []float64
	codes := map[string]int{}
	var firstErr string
	for i := range *n {
		ctx, cancel := cctx(*token)
		t := time.Now()
		_, err := c.Route(ctx, &pb.RouteRequest{Query: fmt.Sprintf("list my open github pull requests %d", i)})
		lat = append(lat, float64(time.Since(t).Microseconds())/1000)
		cancel()
		codes[codeOf(err)]++
		if err != nil && firstErr == "" {
			firstErr = err.Error()
		}
		time.Sleep(*gap)
	}
	sort.Float64s(lat)
	fmt.Printf("victim: %v p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms %s\n", codes, lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)*99/100], lat[len(lat)-1], firstErr)
}

func hog() {
	toks := strings.Split(*tokens, ",")
	deadline := time.Now().Add(*hold)
	var calls atomic.Int64
	var mu sync.Mutex
	codes := map[string]int{}
	msgs := map[string]string{}
	var wg sync.WaitGroup
	var extra []string
	if *attempts > 0 {
		extra = []string{"grpc-previous-rpc-attempts", strconv.Itoa(*attempts)}
	}
	for ti, tok := range toks {
		ccs := make([]*grpc.ClientConn, *conns)
		for i := range ccs {
			ccs[i] = dial()
		}
		for g := range *conc {
			cc := ccs[g%len(ccs)]
			c := pb.NewClassifierServiceClient(cc)
			tc := tpb.NewTerminalServiceClient(cc)
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline); i++ {
					ctx, cancel := cctx(tok, extra...)
					seed := ti*1000000 + g*10000 + i
					var err error
					switch *kind {
					case "route":
						_, err = c.Route(ctx, &pb.RouteRequest{Query: text(seed, *size)})
					case "embed":
						ts := make([]string, 64)
						for k := range ts {
							ts[k] = text(seed*64+k, *size)
						}
						_, err = c.Embed(ctx, &pb.EmbedRequest{Texts: ts})
					case "track":
						_, err = tc.TrackInputEvent(ctx, &tpb.TrackInputEventRequest{SessionId: fmt.Sprintf("%s-%d-%d", *prefix, ti, g), PromptText: text(seed, *size) + " Continue? [y/N] ", InputText: "y", Success: true, InputSource: "user_typed"})
					case "history":
						_, err = tc.GetSessionHistory(ctx, &tpb.GetSessionHistoryRequest{SessionId: fmt.Sprintf("%s-%d-%d", *prefix, ti, g), Limit: 1000})
					}
					cancel()
					calls.Add(1)
					mu.Lock()
					codes[codeOf(err)]++
					if err != nil {
						msgs[codeOf(err)] = err.Error()
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	fmt.Printf("hog %s x%d tokens: %d calls %v\n", *kind, len(toks), calls.Load(), codes)
	for k, v := range msgs {
		if len(v) > 300 {
			v = v[:300]
		}
		fmt.Printf("  %s: %s\n", k, v)
	}
}

func sessions() {
	cc := dial()
	c := pb.NewClassifierServiceClient(cc)
	codes := map[string]int{}
	var last string
	for i := range *n {
		ctx, cancel := cctx(*token)
		_, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: fmt.Sprintf("%s-%d", *prefix, i)})
		cancel()
		codes[codeOf(err)]++
		if err != nil {
			last = err.Error()
		}
	}
	fmt.Println("sessions:", codes, last)
}

func track() {
	cc := dial()
	tc := tpb.NewTerminalServiceClient(cc)
	codes := map[string]int{}
	var last string
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range *conc {
		wg.Go(func() {
			for i := g; i < *n; i += *conc {
				ctx, cancel := cctx(*token)
				_, err := tc.TrackInputEvent(ctx, &tpb.TrackInputEventRequest{SessionId: fmt.Sprintf("%s-%d", *prefix, i%*nsess), PromptText: text(i, *size) + " Continue? [y/N] ", InputText: "y", Success: true, InputSource: "user_typed"})
				cancel()
				mu.Lock()
				codes[codeOf(err)]++
				if err != nil {
					last = err.Error()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println("track:", codes, last)
}

func embed() {
	cc := dial()
	c := pb.NewClassifierServiceClient(cc)
	ts := make([]string, *n)
	for k := range ts {
		ts[k] = text(k+int(time.Now().UnixNano()%100000)*1000, *size)
	}
	ctx, cancel := cctx(*token)
	defer cancel()
	t := time.Now()
	r, err := c.Embed(ctx, &pb.EmbedRequest{Texts: ts})
	fmt.Printf("embed %d x %d: %s in %v, %d vectors\n", *n, *size, err, time.Since(t), len(r.GetVectors()))
}
