// Command grpc3 is the third hostile pass's gRPC probe: with the tokens of
// a token file (NAME SCOPES TOKEN lines) it checks WatchExposure across
// identities and its bounds, and holds many idle connections, printing
// each answer's status. It sends traffic only to -addr.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "gRPC listener")
	tokens := flag.String("tokens", "var/h3/tokens", "token file")
	mode := flag.String("mode", "watch", "watch or idle")
	n := flag.Int("n", 2000, "watches (watch) or connections (idle) to open")
	hold := flag.Duration("hold", 20*time.Second, "how long to hold (idle)")
	flag.Parse()
	tok := readTokens(*tokens)
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	cl := pb.NewClassifierServiceClient(conn)
	as := func(who string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok[who])
	}
	switch *mode {
	case "watch":
		sid := fmt.Sprintf("w3-%d", time.Now().UnixNano())
		_, err := cl.CreateSession(as("alice"), &pb.CreateSessionRequest{SessionId: sid})
		fmt.Println("alice CreateSession:", status.Code(err))
		for _, who := range []string{"bob", "carol", "term"} {
			st, err := cl.WatchExposure(as(who), &pb.WatchExposureRequest{SessionId: sid})
			if err == nil {
				_, err = st.Recv()
			}
			fmt.Printf("%s WatchExposure(alice's %s): %v\n", who, sid, status.Convert(err).Message())
		}
		ctx, cancel := context.WithCancel(as("alice"))
		defer cancel()
		codes := map[string]int{}
		for i := 0; i < *n; i++ {
			st, err := cl.WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: sid})
			if err == nil {
				errc := make(chan error, 1)
				go func() { _, err := st.Recv(); errc <- err }()
				select {
				case err = <-errc:
				case <-time.After(300 * time.Millisecond):
				}
			}
			if err != nil {
				codes[status.Convert(err).Code().String()+": "+status.Convert(err).Message()]++
				continue
			}
			codes["OK"]++
		}
		fmt.Println("alice's", *n, "watches of one session:", codes)
		t0 := time.Now()
		_, err = cl.UpdateExposure(as("alice"), &pb.UpdateExposureRequest{SessionId: sid, Categories: []string{"github"}})
		fmt.Println("UpdateExposure with them open:", status.Code(err), time.Since(t0))
	case "idle":
		var conns []*grpc.ClientConn
		for i := 0; i < *n; i++ {
			c, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				log.Fatal(err)
			}
			c.Connect()
			conns = append(conns, c)
		}
		time.Sleep(*hold)
		states := map[string]int{}
		for _, c := range conns {
			states[c.GetState().String()]++
			c.Close()
		}
		fmt.Println(*n, "idle connections after", *hold, states)
	}
}

func readTokens(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 {
			m[f[0]] = f[2]
		}
	}
	return m
}
