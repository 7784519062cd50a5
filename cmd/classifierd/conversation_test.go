package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/internal/testenv"
)

type conversationCase struct {
	Name     string `json:"name"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ExpectServers []string `json:"expect_servers"`
	ForbidServers []string `json:"forbid_servers"`
	Kind          string   `json:"kind"`
}

// TestConversations runs data/catalogs/conversations.json through the real
// daemon: follow-ups keep the conversation's server, topic changes move
// away from it.
func TestConversations(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "data", "catalogs", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []conversationCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("%d conversation cases, want at least 20", len(cases))
	}
	idx := genIndex(t, defaultCatalog(t))
	_, conn := startDaemon(t, idx)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range cases {
		t.Run(tc.Kind+"/"+tc.Name, func(t *testing.T) {
			req := &pb.RouteRequest{}
			for _, m := range tc.Messages {
				req.Messages = append(req.Messages, &pb.Message{Role: m.Role, Content: m.Content})
			}
			resp, err := c.Route(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range resp.GetServers() {
				got = append(got, s.GetId())
			}
			if len(got) == 0 || !slices.Contains(tc.ExpectServers, got[0]) {
				t.Fatalf("servers %v, want one of %v first (%s)", got, tc.ExpectServers, resp.GetReasoning())
			}
			for _, f := range tc.ForbidServers {
				if slices.Contains(got, f) {
					t.Fatalf("servers %v still include %s after the topic changed", got, f)
				}
			}
		})
	}
}
