// refl20: an honest gRPC reflection client: one bidi ServerReflectionInfo stream, -n requests one after another
// (list services, then file_containing_symbol for each, round robin), then -unary Route calls on the same connection.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:47300", "")
	token := flag.String("token", "", "")
	n := flag.Int("n", 400, "reflection requests on one stream")
	streams := flag.Int("streams", 1, "reflection streams, one after another")
	sleep := flag.Duration("sleep", 0, "between requests")
	flag.Parse()
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}
	total := 0
	for s := 0; s < *streams; s++ {
		st, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
		if err != nil {
			fmt.Println("open:", err)
			return
		}
		var syms []string
		t0 := time.Now()
		for i := 0; i < *n; i++ {
			req := &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}}
			if len(syms) > 0 && i%2 == 1 {
				req = &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: syms[i%len(syms)]}}
			}
			if err := st.Send(req); err != nil {
				fmt.Printf("stream %d: send %d: %v (after %d total)\n", s, i, err, total)
				_, err2 := st.Recv()
				fmt.Println("  recv:", err2)
				return
			}
			resp, err := st.Recv()
			if err != nil {
				fmt.Printf("stream %d: recv %d: %v (after %d total)\n", s, i, err, total)
				return
			}
			if ls := resp.GetListServicesResponse(); ls != nil && syms == nil {
				for _, sv := range ls.Service {
					syms = append(syms, sv.Name)
				}
			}
			total++
			time.Sleep(*sleep)
		}
		st.CloseSend()
		fmt.Printf("stream %d: %d requests answered in %v (%d services)\n", s, *n, time.Since(t0), len(syms))
	}
	fmt.Println("total answered", total)
}
