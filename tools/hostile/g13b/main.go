// Command g13b is the thirteenth hostile pass's (half B) victim and
// feature probe. Modes (-mode):
//
//	victim  -n small Routes as -token from source address -src (empty: any),
//	        -gap apart, on one connection made at start; codes and p50/p99.
//	wait    one new connection from -src, then a Route with WaitForReady and
//	        -deadline: how long until it succeeds (a legitimate client
//	        reconnecting while its address is penalized).
//	fresh   -n Routes each on a new connection from -src (fail-fast); codes.
//	big     requests of -vals repeated values of -vlen bytes, each
//	        kind -n times with -conc at once: Route include/exclude_servers
//	        and messages, UpdateExposure categories, ReportUse tools and
//	        servers, CreateSession and ListToolsForContext long strings;
//	        codes, time per call, the first error.
//	reportid  -token routes (alice), -token2 (m0, report scope) reports its
//	        request_id; then the first re-reports it: who may report
//	        another identity's request, and what the second report gets.
//	refl    one reflection stream as -token: -n FileContainingSymbol
//	        requests sent and not read for -hold, then read; how many
//	        answers and bytes came back, and how the stream ended.
//	watch   -n WatchExposure streams as -token over -conc connections, 8 per
//	        session (sessions created first), held for -hold; codes of the
//	        opens and of how the streams ended.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
)

var (
	addr  = flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	mode  = flag.String("mode", "victim", "victim, wait, fresh")
	token = flag.String("token", "", "bearer token")
	src   = flag.String("src", "", "source address")
	n     = flag.Int("n", 30, "calls")
	gap   = flag.Duration("gap", 50*time.Millisecond, "pause between calls")
	dl    = flag.Duration("deadline", 60*time.Second, "wait: the call's deadline")
	conc  = flag.Int("conc", 1, "big: calls at once")
	nvals = flag.Int("vals", 1_300_000, "big: repeated values per request")
	vlen  = flag.Int("vlen", 1, "big: bytes per value")
	hold  = flag.Duration("hold", 20*time.Second, "watch: how long")
	tok2  = flag.String("token2", "", "reportid: the other identity's token")
	kinds = flag.String("kinds", "include,exclude,messages,categories,tools,servers,sessid,context", "big: kinds")
)

func dial() *grpc.ClientConn {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if *src != "" {
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*src)}}
			return d.DialContext(ctx, "tcp", a)
		}))
	}
	cc, err := grpc.NewClient(*addr, opts...)
	if err != nil {
		panic(err)
	}
	return cc
}

func ctxTok() context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token)
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
		cc := dial()
		defer cc.Close()
		c := pb.NewClassifierServiceClient(cc)
		var lat []float64
		codes := map[string]int{}
		first := ""
		for i := range *n {
			ctx, cancel := context.WithTimeout(ctxTok(), 30*time.Second)
			t := time.Now()
			_, err := c.Route(ctx, &pb.RouteRequest{Query: fmt.Sprintf("list my open github pull requests %d", i)})
			lat = append(lat, float64(time.Since(t).Microseconds())/1000)
			cancel()
			codes[codeOf(err)]++
			if err != nil && first == "" {
				first = err.Error()
			}
			time.Sleep(*gap)
		}
		sort.Float64s(lat)
		fmt.Printf("victim(src %s): %v p50 %.1f ms p90 %.1f ms p99 %.1f ms max %.1f ms %s\n", *src, codes, lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)*99/100], lat[len(lat)-1], first)
	case "wait":
		t := time.Now()
		cc := dial()
		defer cc.Close()
		c := pb.NewClassifierServiceClient(cc)
		ctx, cancel := context.WithTimeout(ctxTok(), *dl)
		defer cancel()
		_, err := c.Route(ctx, &pb.RouteRequest{Query: "list my open github pull requests"}, grpc.WaitForReady(true))
		fmt.Printf("wait(src %s): %s after %.1f s %v\n", *src, codeOf(err), time.Since(t).Seconds(), err)
	case "big":
		big()
	case "watch":
		watch()
	case "reportid":
		reportid()
	case "refl":
		refl()
	case "fresh":
		codes := map[string]int{}
		for i := range *n {
			cc := dial()
			c := pb.NewClassifierServiceClient(cc)
			ctx, cancel := context.WithTimeout(ctxTok(), 5*time.Second)
			_, err := c.Route(ctx, &pb.RouteRequest{Query: fmt.Sprintf("list my open github pull requests %d", i)})
			cancel()
			cc.Close()
			codes[codeOf(err)]++
			time.Sleep(*gap)
		}
		fmt.Printf("fresh(src %s): %v\n", *src, codes)
	}
}

func manyStrings(n int, f func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func big() {
	cc := dial()
	defer cc.Close()
	c := pb.NewClassifierServiceClient(cc)
	many := *nvals
	short := func(i int) string { return fmt.Sprintf("%0*d", *vlen, i) }
	for _, k := range strings.Split(*kinds, ",") {
		var call func(ctx context.Context) error
		switch k {
		case "include":
			v := manyStrings(many, short)
			call = func(ctx context.Context) error {
				_, err := c.Route(ctx, &pb.RouteRequest{Query: "list my pull requests", IncludeServers: v})
				return err
			}
		case "exclude":
			v := manyStrings(many, short)
			call = func(ctx context.Context) error {
				_, err := c.Route(ctx, &pb.RouteRequest{Query: "list my pull requests", ExcludeServers: v})
				return err
			}
		case "messages":
			m := make([]*pb.Message, many)
			for i := range m {
				m[i] = &pb.Message{Role: "user", Content: short(i)}
			}
			call = func(ctx context.Context) error {
				_, err := c.Route(ctx, &pb.RouteRequest{Query: "list my pull requests", Messages: m})
				return err
			}
		case "categories":
			v := manyStrings(many, short)
			call = func(ctx context.Context) error {
				_, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: "big13b", Categories: v, Mode: "add"})
				return err
			}
		case "tools":
			t := make([]*pb.ToolRef, many)
			for i := range t {
				t[i] = &pb.ToolRef{Server: short(i), Name: short(i + 1)}
			}
			call = func(ctx context.Context) error {
				_, err := c.ReportUse(ctx, &pb.ReportUseRequest{Query: "list my pull requests", Tools: t})
				return err
			}
		case "servers":
			v := manyStrings(many, short)
			call = func(ctx context.Context) error {
				_, err := c.ReportUse(ctx, &pb.ReportUseRequest{Query: "list my pull requests", Servers: v})
				return err
			}
		case "sessid":
			call = func(ctx context.Context) error {
				_, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: strings.Repeat("s", 4_000_000)})
				return err
			}
		case "context":
			call = func(ctx context.Context) error {
				_, err := c.ListToolsForContext(ctx, &pb.ListToolsForContextRequest{Context: strings.Repeat("github pull ", 330_000)})
				return err
			}
		default:
			panic(k)
		}
		var mu sync.Mutex
		codes := map[string]int{}
		first := ""
		var lat []float64
		var wg sync.WaitGroup
		for g := range *conc {
			wg.Go(func() {
				for i := g; i < *n; i += *conc {
					ctx, cancel := context.WithTimeout(ctxTok(), 60*time.Second)
					t := time.Now()
					err := call(ctx)
					d := float64(time.Since(t).Milliseconds())
					cancel()
					mu.Lock()
					codes[codeOf(err)]++
					lat = append(lat, d)
					if err != nil && first == "" {
						first = err.Error()
						if len(first) > 160 {
							first = first[:160]
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		sort.Float64s(lat)
		fmt.Printf("big %s: %v p50 %.0f ms max %.0f ms %s\n", k, codes, lat[len(lat)/2], lat[len(lat)-1], first)
	}
}

func watch() {
	ccs := make([]*grpc.ClientConn, *conc)
	for i := range ccs {
		ccs[i] = dial()
		defer ccs[i].Close()
	}
	c0 := pb.NewClassifierServiceClient(ccs[0])
	codes := map[string]int{}
	var mu sync.Mutex
	nsess := (*n + 7) / 8
	for i := range nsess {
		ctx, cancel := context.WithTimeout(ctxTok(), 10*time.Second)
		_, err := c0.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: fmt.Sprintf("w13b-%d", i)})
		cancel()
		codes["create "+codeOf(err)]++
	}
	ctx, cancel := context.WithTimeout(ctxTok(), *hold)
	defer cancel()
	var wg sync.WaitGroup
	for i := range *n {
		c := pb.NewClassifierServiceClient(ccs[i%len(ccs)])
		wg.Go(func() {
			st, err := c.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: fmt.Sprintf("w13b-%d", i/8)})
			if err == nil {
				_, err = st.Recv()
				for err == nil {
					_, err = st.Recv()
				}
			}
			mu.Lock()
			codes["watch "+codeOf(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Printf("watch: %v\n", codes)
}

func reportid() {
	cc := dial()
	defer cc.Close()
	c := pb.NewClassifierServiceClient(cc)
	ctx, cancel := context.WithTimeout(ctxTok(), 10*time.Second)
	defer cancel()
	r, err := c.Route(ctx, &pb.RouteRequest{Query: "open a pull request on github"})
	if err != nil {
		fmt.Println("route:", err)
		return
	}
	id := r.GetRequestId()
	fmt.Printf("route: request_id %q (%d bytes)\n", id, len(id))
	other := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*tok2)
	other, cancel2 := context.WithTimeout(other, 10*time.Second)
	defer cancel2()
	srv := "github"
	if len(r.GetServers()) > 0 {
		srv = r.GetServers()[0].GetId()
	}
	rr, err := c.ReportUse(other, &pb.ReportUseRequest{RequestId: id, Servers: []string{srv}})
	fmt.Printf("other identity reports it: %s %v\n", codeOf(err), rr)
	rr, err = c.ReportUse(ctx, &pb.ReportUseRequest{RequestId: id, Servers: []string{srv}})
	fmt.Printf("owner reports it after: %s %v\n", codeOf(err), rr)
	_, err = c.ReportUse(other, &pb.ReportUseRequest{RequestId: id + "x", Servers: []string{srv}})
	fmt.Printf("other identity, unknown id: %s %v\n", codeOf(err), err)
}

func refl() {
	cc := dial()
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctxTok(), *hold+30*time.Second)
	defer cancel()
	st, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		fmt.Println("open:", codeOf(err), err)
		return
	}
	sent := 0
	go func() {
		for range *n {
			if st.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "classifier.v1.ClassifierService"}}) != nil {
				return
			}
			sent++
		}
		_ = st.CloseSend()
	}()
	time.Sleep(*hold)
	got, bytes := 0, 0
	for {
		r, err := st.Recv()
		if err != nil {
			fmt.Printf("refl: sent %d, got %d answers, %d bytes; end %s %v\n", sent, got, bytes, codeOf(err), err)
			return
		}
		got++
		bytes += proto.Size(r)
	}
}
