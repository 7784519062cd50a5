// Command g17a is the seventeenth hostile pass's (A) gRPC client over TLS
// (certificate not verified). Modes (-mode):
//
//	victim  an honest caller: a small Route as -token every -every (open
//	        loop, -conc at most in flight) with a deadline of -deadline (0:
//	        none) on one connection for -hold; prints codes, p50/p99 of the
//	        answered calls, how many ended UNAVAILABLE (its connection
//	        closed) and the first message of each code.
//	watch   -conc loops flooding WatchExposure of a session that does not
//	        exist (NOT_FOUND) as -token on -conns connections for -hold: a
//	        streaming call outside admission; codes, calls/s, client CPU.
//	health  -conc loops of health Checks (no token) on -conns connections
//	        for -hold: codes, calls/s, client CPU.
//	hprobe  a health Check on a new connection every -every for -hold, as a
//	        kubelet's or grpc_health_probe does (timeout -deadline): codes,
//	        latencies.
//	hlong   a long-lived balancer: one connection for -hold, a burst of
//	        -conc health Checks (a balancer checking its services) every
//	        -every: codes, and the connection's closes (UNAVAILABLE: the
//	        check in flight when it closed).
//	shared  one connection carrying two identities: -token2 (the attacker)
//	        sends -conc loops of Routes with a -deadline deadline (refused
//	        when the daemon is busy), -token (the victim) a small Route with
//	        no deadline every -every: the victim's codes.
//	hwatch  -conc health Watch streams (no token) on -conns connections
//	        from -src, held open for -hold; prints how many opened and the
//	        first refusal. Run from 16 loopback addresses (each its own peer
//	        of DefaultMaxHealthWatchesPerPeer 64) to fill the 1,024 of all.
//	hog     -conc loops of -size byte Routes as -token for -hold.
//	refl    -conc loops of reflection streams as -token on -conns
//	        connections for -hold, each stream sending 1,000 requests
//	        (file_containing_symbol of ClassifierService; under
//	        MaxReflectionRequests) while reading the answers, then a new
//	        stream: reflection is a stream, outside admission.
//
// -src binds the client's source address (a peer other than loopback).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/tools/hostile/internal/probe"
)

var (
	addr     = flag.String("addr", "127.0.0.1:47500", "gRPC listener (TLS)")
	mode     = flag.String("mode", "victim", "victim, watch, health, hprobe, hlong, shared, hog")
	token    = flag.String("token", "", "bearer token")
	token2   = flag.String("token2", "", "shared: the attacker's bearer token")
	conc     = flag.Int("conc", 4, "loops")
	conns    = flag.Int("conns", 1, "connections")
	size     = flag.Int("size", 40, "hog: query bytes")
	hold     = flag.Duration("hold", 10*time.Second, "how long")
	every    = flag.Duration("every", 20*time.Millisecond, "victim, hprobe, shared: interval")
	deadline = flag.Duration("deadline", 0, "victim, shared: the calls' deadline (0: none)")
	src      = flag.String("src", "", "source address to bind")
	label    = flag.String("label", "", "prefix of the printed line")
)

func dial() *grpc.ClientConn {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})), //nolint:gosec // self-signed test daemon
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20))}
	if *src != "" {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*src)}}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	}
	cc, err := grpc.NewClient(*addr, opts...)
	if err != nil {
		panic(err)
	}
	return cc
}

type tally struct {
	mu    sync.Mutex
	codes map[string]int
	first map[string]string
	lat   []time.Duration
}

func newTally() *tally { return &tally{codes: map[string]int{}, first: map[string]string{}} }

func (t *tally) note(err error, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := status.Convert(err)
	k := s.Code().String()
	t.codes[k]++
	if err == nil {
		t.lat = append(t.lat, d)
	} else if _, ok := t.first[k]; !ok {
		m := s.Message()
		if len(m) > 160 {
			m = m[:160]
		}
		t.first[k] = m
	}
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	slices.Sort(t.lat)
	q := func(p float64) float64 {
		if len(t.lat) == 0 {
			return 0
		}
		return float64(t.lat[min(len(t.lat)-1, int(p*float64(len(t.lat))))].Microseconds()) / 1000
	}
	return fmt.Sprintf("%v ok p50 %.1f p99 %.1f ms; first errors %q", t.codes, q(.5), q(.99), t.first)
}

func main() {
	flag.Parse()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token)
	t := newTally()
	c0, t0 := probe.CPUSeconds(""), time.Now()
	end := t0.Add(*hold)
	var wg sync.WaitGroup
	var ccs []*grpc.ClientConn
	for range *conns {
		ccs = append(ccs, dial())
	}
	call := func(cctx context.Context, f func(context.Context) error) {
		if *deadline > 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(cctx, *deadline)
			defer cancel()
		}
		s := time.Now()
		t.note(f(cctx), time.Since(s))
	}
	switch *mode {
	case "victim", "shared":
		c := pb.NewClassifierServiceClient(ccs[0])
		if *mode == "shared" {
			actx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*token2)
			at := newTally()
			adl := *deadline
			for range *conc {
				wg.Go(func() {
					for time.Now().Before(end) {
						cctx, cancel := context.WithTimeout(actx, adl)
						_, err := c.Route(cctx, &pb.RouteRequest{Query: "open a pull request on github"})
						cancel()
						at.note(err, 0)
					}
				})
			}
			defer func() { fmt.Printf("%sshared attacker: %s\n", *label, at) }()
			*deadline = 0
		}
		sem := make(chan struct{}, max(*conc, 1))
		tick := time.NewTicker(*every)
		for time.Now().Before(end) {
			<-tick.C
			select {
			case sem <- struct{}{}:
			default:
				t.note(status.Error(99, "skipped: -conc in flight"), 0)
				continue
			}
			wg.Go(func() {
				defer func() { <-sem }()
				call(ctx, func(c2 context.Context) error {
					_, err := c.Route(c2, &pb.RouteRequest{Query: "open a pull request on github"})
					return err
				})
			})
		}
	case "watch":
		for i := range *conc {
			c := pb.NewClassifierServiceClient(ccs[i%len(ccs)])
			wg.Go(func() {
				for time.Now().Before(end) {
					call(ctx, func(c2 context.Context) error {
						w, err := c.WatchExposure(c2, &pb.WatchExposureRequest{SessionId: "no-such-session-17a"})
						if err != nil {
							return err
						}
						_, err = w.Recv()
						return err
					})
				}
			})
		}
	case "health":
		for i := range *conc {
			c := healthpb.NewHealthClient(ccs[i%len(ccs)])
			wg.Go(func() {
				for time.Now().Before(end) {
					call(context.Background(), func(c2 context.Context) error {
						_, err := c.Check(c2, &healthpb.HealthCheckRequest{})
						return err
					})
				}
			})
		}
	case "hprobe":
		for _, cc := range ccs {
			cc.Close()
		}
		if *deadline == 0 {
			*deadline = time.Second
		}
		for time.Now().Before(end) {
			cc := dial()
			call(context.Background(), func(c2 context.Context) error {
				_, err := healthpb.NewHealthClient(cc).Check(c2, &healthpb.HealthCheckRequest{Service: "classifier.v1.ClassifierService"})
				return err
			})
			cc.Close()
			time.Sleep(*every)
		}
	case "hlong":
		for _, cc := range ccs[1:] {
			cc.Close()
		}
		if *deadline == 0 {
			*deadline = time.Second
		}
		hc := healthpb.NewHealthClient(ccs[0])
		closes := 0
		for time.Now().Before(end) {
			for range *conc {
				call(context.Background(), func(c2 context.Context) error {
					_, err := hc.Check(c2, &healthpb.HealthCheckRequest{Service: "classifier.v1.ClassifierService"})
					if status.Code(err) == codes.Unavailable || err != nil && strings.Contains(err.Error(), "it is closed") {
						closes++
					}
					return err
				})
			}
			time.Sleep(*every)
		}
		fmt.Printf("%sconnection closed for refusals: %d times\n", *label, closes)
	case "refl":
		var bytes, answers int64
		var bmu sync.Mutex
		for i := range *conc {
			c := reflpb.NewServerReflectionClient(ccs[i%len(ccs)])
			wg.Go(func() {
				for time.Now().Before(end) {
					s := time.Now()
					st, err := c.ServerReflectionInfo(ctx)
					if err != nil {
						t.note(err, 0)
						continue
					}
					go func() {
						for k := 0; k < 1000 && time.Now().Before(end); k++ {
							if st.Send(&reflpb.ServerReflectionRequest{MessageRequest: &reflpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "classifier.v1.ClassifierService"}}) != nil {
								break
							}
						}
						_ = st.CloseSend()
					}()
					var n, b int64
					for {
						m, err := st.Recv()
						if err != nil {
							if err.Error() != "EOF" {
								t.note(err, 0)
							}
							break
						}
						n++
						for _, f := range m.GetFileDescriptorResponse().GetFileDescriptorProto() {
							b += int64(len(f))
						}
					}
					t.note(nil, time.Since(s))
					bmu.Lock()
					bytes += b
					answers += n
					bmu.Unlock()
				}
			})
		}
		defer func() { fmt.Printf("%srefl: %d answers, %d descriptor bytes\n", *label, answers, bytes) }()
	case "hwatch":
		for i := range *conc {
			c := healthpb.NewHealthClient(ccs[i%len(ccs)])
			wg.Go(func() {
				wctx, cancel := context.WithDeadline(context.Background(), end)
				defer cancel()
				s := time.Now()
				w, err := c.Watch(wctx, &healthpb.HealthCheckRequest{})
				if err == nil {
					_, err = w.Recv()
				}
				t.note(err, time.Since(s))
				if err == nil {
					<-wctx.Done()
				}
			})
		}
	case "hog":
		c := pb.NewClassifierServiceClient(ccs[0])
		for range *conc {
			wg.Go(func() {
				for time.Now().Before(end) {
					q := probe.UniqueQuery(*size)
					call(ctx, func(c2 context.Context) error {
						_, err := c.Route(c2, &pb.RouteRequest{Query: q})
						return err
					})
				}
			})
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode")
		os.Exit(2)
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	n := 0
	for _, v := range t.codes {
		n += v
	}
	fmt.Printf("%s%s: %d calls in %.1fs (%.0f/s), client CPU %.2fs: %s\n", *label, *mode, n, el, float64(n)/el, probe.CPUSeconds("")-c0, t)
}
