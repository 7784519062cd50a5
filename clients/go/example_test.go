package client_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	client "github.com/classifierd/classifierd/clients/go"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// stubDaemon stands in for classifierd so the example runs anywhere.
type stubDaemon struct {
	pb.UnimplementedClassifierServiceServer
}

func (stubDaemon) Route(context.Context, *pb.RouteRequest) (*pb.RouteResponse, error) {
	return &pb.RouteResponse{
		Servers:   []*pb.ScoredLabel{{Id: "github", Confidence: 0.97}},
		Tools:     []*pb.ScoredTool{{Name: "list_notifications", Server: "github", Confidence: 0.15}},
		Reasoning: "github 0.97: names \"github\"",
	}, nil
}

func dialStub() *grpc.ClientConn {
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	pb.RegisterClassifierServiceServer(s, stubDaemon{})
	go s.Serve(lis)
	conn, _ := grpc.NewClient("passthrough:///stub",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	return conn
}

func ExampleRouter_FilterTools() {
	// In an agent: conn, _ := grpc.NewClient("localhost:50051", grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn := dialStub()
	defer conn.Close()

	r := client.New(conn, client.Config{
		OnEvent: func(e client.Event) {
			if e.Kind == "end" {
				fmt.Printf("routed %d of %d tools, servers %v\n", e.FilteredTools, e.TotalTools, e.RelevantServers)
			}
		},
	})
	var tools []client.Tool
	for _, server := range []string{"github", "filesystem", "slack", "docker", "postgres", "memory"} {
		for _, name := range []string{"list_notifications", "read", "write", "search", "delete", "describe"} {
			tools = append(tools, client.Tool{Server: server, Name: name})
		}
	}
	conv := []client.Message{{Role: "user", Content: "Check my GitHub notifications"}}
	res, err := r.FilterTools(context.Background(), "conversation-1", conv, tools)
	if err != nil {
		panic(err)
	}
	for _, t := range res.Tools {
		fmt.Println(t.Server + "/" + t.Name)
	}
	// The next turn of the same conversation reuses the answer.
	res, _ = r.FilterTools(context.Background(), "conversation-1", append(conv, client.Message{Role: "user", Content: "thanks"}), tools)
	fmt.Println("cached:", res.Cached)
	// Output:
	// routed 1 of 36 tools, servers [github]
	// github/list_notifications
	// cached: true
}

func ExampleConfigFromEnv() {
	// An agent's environment, as set today:
	//   ENABLE_SMART_ROUTING=true SMART_ROUTING_MAX_TOOLS=50 (SMART_ROUTING_MAX_SERVERS unset: 4)
	os.Setenv(client.EnvEnableSmartRouting, "true")
	os.Setenv(client.EnvMaxTools, "50")
	os.Unsetenv(client.EnvMaxServers)
	defer os.Unsetenv(client.EnvEnableSmartRouting)
	defer os.Unsetenv(client.EnvMaxTools)

	cfg, err := client.ConfigFromEnv(client.WithMaxServers(2)) // options override the environment
	if err != nil {
		panic(err) // names the bad variable, e.g. SMART_ROUTING_MAX_TOOLS="many"
	}
	fmt.Println(!cfg.Disabled, cfg.MaxTools, cfg.MaxServers)
	// In an agent: router := client.New(conn, cfg)
	// Output: true 50 2
}
