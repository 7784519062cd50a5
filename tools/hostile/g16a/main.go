// Command g16a is the sixteenth hostile pass's (A) gRPC client over TLS
// (certificate not verified). Modes (-mode):
//
//	gzip   Routes as -token whose message is sent gzip-compressed
//	       (grpc-encoding gzip): a -size byte query of one letter, about
//	       1/1000 of it on the wire; -n calls, -conc at once; codes and the
//	       first error. The daemon must refuse before inflating.
//	utf8   Routes as -token with invalid UTF-8, NUL, lone surrogates and
//	       overlong forms in query, messages[].role/content and
//	       include_servers; the status and message of each.
//	hog    -conc loops of Routes of a -size byte query (unique text) as
//	       -token for -hold, statuses counted: a body just under the limits
//	       at high rate by one identity.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	gcodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"google.golang.org/grpc/mem"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr  = flag.String("addr", "127.0.0.1:47000", "gRPC listener (TLS)")
	mode  = flag.String("mode", "gzip", "gzip, utf8, hog")
	token = flag.String("token", "", "bearer token")
	n     = flag.Int("n", 20, "calls")
	conc  = flag.Int("conc", 4, "calls at once")
	size  = flag.Int("size", 3<<20, "query bytes")
	hold  = flag.Duration("hold", 10*time.Second, "hog: how long")
)

func main() {
	flag.Parse()
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})), //nolint:gosec // self-signed test daemon
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		panic(err)
	}
	c := pb.NewClassifierServiceClient(cc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token)
	var mu sync.Mutex
	codes := map[string]int{}
	first := ""
	note := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		s := status.Convert(err)
		codes[s.Code().String()]++
		if err != nil && first == "" {
			first = s.Message()
			if len(first) > 200 {
				first = first[:200] + fmt.Sprintf("... (%d bytes)", len(s.Message()))
			}
		}
	}
	switch *mode {
	case "gzip":
		q := strings.Repeat("a", *size)
		var wg sync.WaitGroup
		sem := make(chan struct{}, *conc)
		t0 := time.Now()
		for range *n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				_, err := c.Route(ctx, &pb.RouteRequest{Query: q}, grpc.UseCompressor(gzip.Name))
				note(err)
			})
		}
		wg.Wait()
		fmt.Printf("gzip: %d calls of a %d-byte query in %v: %v; first error: %s\n", *n, *size, time.Since(t0).Round(time.Millisecond), codes, first)
	case "utf8":
		bad := map[string]string{"invalid": "open \xff\xfe pull", "nul": "open\x00pull", "surrogate": "open \xed\xa0\x80 pull",
			"overlong": "open \xc0\xaf pull", "bidi": "open \u202e pull", "cont": "\x80\x80\x80"}
		for k, v := range bad {
			for _, where := range []string{"query", "role", "content", "include"} {
				r := &pb.RouteRequest{Query: "open a pull request"}
				switch where {
				case "query":
					r.Query = v
				case "role":
					r.Messages = []*pb.Message{{Role: v, Content: "hi"}}
				case "content":
					r.Messages = []*pb.Message{{Role: "user", Content: v}}
				case "include":
					r.IncludeServers = []string{v}
				}
				_, err := c.Route(ctx, r)
				s := status.Convert(err)
				m := s.Message()
				if len(m) > 120 {
					m = m[:120]
				}
				fmt.Printf("%-9s %-8s %-16s %q\n", k, where, s.Code(), m)
			}
		}
	case "rawutf8": // the utf8 cases written as raw protobuf bytes (the Go client refuses to marshal them)
		for k, v := range map[string]string{"invalid": "open \xff\xfe pull", "surrogate": "open \xed\xa0\x80 pull", "overlong": "open \xc0\xaf pull", "cont": "\x80\x80\x80"} {
			fld := func(tag byte, b []byte) []byte { return append([]byte{tag, byte(len(b))}, b...) }
			for _, where := range []string{"query", "role", "content", "include"} {
				var msg []byte
				switch where {
				case "query":
					msg = fld(0x0a, []byte(v))
				case "role":
					msg = append(fld(0x0a, []byte("hi")), fld(0x12, append(fld(0x0a, []byte(v)), fld(0x12, []byte("hi"))...))...)
				case "content":
					msg = append(fld(0x0a, []byte("hi")), fld(0x12, append(fld(0x0a, []byte("user")), fld(0x12, []byte(v))...))...)
				case "include":
					msg = append(fld(0x0a, []byte("hi")), fld(0x32, []byte(v))...)
				}
				out := new(rawMsg)
				err := cc.Invoke(ctx, "/classifier.v1.ClassifierService/Route", &rawMsg{b: msg}, out, grpc.ForceCodecV2(rawCodec{}))
				s := status.Convert(err)
				m := s.Message()
				if len(m) > 120 {
					m = m[:120]
				}
				fmt.Printf("%-9s %-8s %-16s %q\n", k, where, s.Code(), m)
			}
		}
	case "watch": // -n watches as -token, 8 a session, on -conc connections, never read; updates as fast as 8 loops go for -hold
		all := []string{"agile", "communication", "database", "docker", "documents", "filesystem", "git", "github", "jira", "memory", "meta", "notes", "python", "search", "users", "vertex_ai", "web"}
		nsess := (*n + 7) / 8
		for i := range nsess {
			_, err := c.CreateSession(ctx, &pb.CreateSessionRequest{SessionId: fmt.Sprintf("w16-%d", i), DefaultExposure: "all"})
			if err != nil && status.Code(err) != gcodes.AlreadyExists {
				note(err)
			}
		}
		var held []grpc.ServerStreamingClient[pb.WatchExposureResponse]
		ccs := []*grpc.ClientConn{}
		for range *conc {
			x, _ := grpc.NewClient(*addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))) //nolint:gosec // self-signed test daemon
			ccs = append(ccs, x)
		}
		for i := range *n {
			w, err := pb.NewClassifierServiceClient(ccs[i%len(ccs)]).WatchExposure(ctx, &pb.WatchExposureRequest{SessionId: fmt.Sprintf("w16-%d", i/8)})
			if err != nil {
				note(err)
				continue
			}
			if _, err := w.Header(); err != nil {
				note(err)
				continue
			}
			held = append(held, w)
		}
		fmt.Printf("watch: %d watches open on %d sessions, %d connections; %v\n", len(held), nsess, len(ccs), codes)
		var wg sync.WaitGroup
		end := time.Now().Add(*hold)
		var ups int
		for k := range 8 {
			wg.Go(func() {
				for i := k; time.Now().Before(end); i++ {
					cats := all
					if i%2 == 0 {
						cats = []string{"meta"}
					}
					_, err := c.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: fmt.Sprintf("w16-%d", i%nsess), Categories: cats, Mode: "replacement"})
					note(err)
					mu.Lock()
					ups++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		fmt.Printf("watch: %d updates in %v: %v; first error: %s; holding the watches unread 20 s more\n", ups, *hold, codes, first)
		time.Sleep(20 * time.Second)
	case "hog":
		var wg sync.WaitGroup
		end := time.Now().Add(*hold)
		var calls int
		for range *conc {
			wg.Go(func() {
				for time.Now().Before(end) {
					q := probe.UniqueQuery(*size)
					_, err := c.Route(ctx, &pb.RouteRequest{Query: q})
					note(err)
					mu.Lock()
					calls++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		fmt.Printf("hog: %d Routes of %d bytes in %v: %v; first error: %s\n", calls, *size, *hold, codes, first)
	}
}

type rawMsg struct{ b []byte }

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*rawMsg).b)}, nil
}

func (rawCodec) Unmarshal(d mem.BufferSlice, v any) error {
	v.(*rawMsg).b = d.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
