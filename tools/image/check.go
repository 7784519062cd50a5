package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// checkConfig says where the running image listens and what its answer
// must hold.
type checkConfig struct {
	grpcAddr, metricsAddr string
	query, wantServer     string
	wait                  time.Duration
}

func runCheck(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	var c checkConfig
	fs.StringVar(&c.grpcAddr, "grpc", "127.0.0.1:50051", "the image's gRPC listener")
	fs.StringVar(&c.metricsAddr, "metrics", "127.0.0.1:9090", "the image's --metrics-listen")
	fs.StringVar(&c.query, "query", "Check my GitHub notifications", "the Route query")
	fs.StringVar(&c.wantServer, "want-server", "github", "the server Route must answer first")
	fs.DurationVar(&c.wait, "wait", 60*time.Second, "how long to wait for the daemon to serve")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.wait+30*time.Second)
	defer cancel()
	return check(ctx, c, stdout)
}

// check waits for the daemon's health to say SERVING, routes one query
// and reads the metrics endpoint, which must count that Route.
func check(ctx context.Context, c checkConfig, w io.Writer) error {
	conn, err := grpc.NewClient(c.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(c.wait)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		res, err := health.Check(cctx, &healthpb.HealthCheckRequest{Service: "classifier.v1.ClassifierService"})
		cancel()
		if err == nil && res.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("health: not SERVING after %s (last: %v, %v)", c.wait, res.GetStatus(), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Fprintf(w, "health: SERVING\n")

	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	route, err := pb.NewClassifierServiceClient(conn).Route(rctx, &pb.RouteRequest{Query: c.query})
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if len(route.GetServers()) == 0 {
		return fmt.Errorf("route %q: no servers", c.query)
	}
	top := route.GetServers()[0]
	if top.GetId() != c.wantServer {
		return fmt.Errorf("route %q: first server %q, want %q", c.query, top.GetId(), c.wantServer)
	}
	fmt.Fprintf(w, "route: %q -> %s (confidence %.2f)\n", c.query, top.GetId(), top.GetConfidence())

	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(mctx, http.MethodGet, "http://"+c.metricsAddr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	line := routeCount(string(body))
	if line == "" {
		return errors.New("metrics: no classifierd_rpc_requests_total series for Route")
	}
	fmt.Fprintf(w, "metrics: %s\n", line)
	return nil
}

// routeCount is the metrics line counting OK Route calls, if any.
func routeCount(exposition string) string {
	for _, line := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(line, "classifierd_rpc_requests_total{") && strings.Contains(line, `method="/classifier.v1.ClassifierService/Route"`) &&
			strings.Contains(line, `code="OK"`) && !strings.HasSuffix(line, " 0") {
			return line
		}
	}
	return ""
}
