package main

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"google.golang.org/protobuf/proto"
)

// A daemon told to shortlist even the default catalog (--shortlist-from 1)
// builds its inverted file after it starts, says so in its log, and then
// answers Route exactly as a daemon scoring every label: the default
// catalog is smaller than one probe, so the shortlist covers it.
func TestDaemonShortlistAnswersAsExact(t *testing.T) {
	idx := genIndex(t, defaultCatalog(t))
	_, exactConn := startDaemon(t, idx, "--shortlist-from", "0")
	d, shortConn := startDaemon(t, idx, "--shortlist-from", "1")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.stderr.String(), "shortlist ready") {
		if time.Now().After(deadline) {
			t.Fatalf("no \"shortlist ready\" in the log after 30s:\n%s", d.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exact, short := pb.NewClassifierServiceClient(exactConn), pb.NewClassifierServiceClient(shortConn)
	reqs := []*pb.RouteRequest{
		{Query: "Check my GitHub notifications"},
		{Query: "read the config json file and create a github issue about it"},
		{Query: "what's the weather in Paris tomorrow, and post it in #general on slack"},
		{Messages: []*pb.Message{{Role: "user", Content: "list the open pull requests"}, {Role: "assistant", Content: "There are three."}, {Role: "user", Content: "and the second one?"}}},
	}
	for _, r := range reqs {
		e, err := exact.Route(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		s, err := short.Route(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.GetServers()) == 0 {
			t.Fatalf("%v: the exact daemon returned no server", r)
		}
		// request_id names each answer for ReportUse: it differs by design.
		e.RequestId, s.RequestId = "", ""
		if !proto.Equal(e, s) {
			t.Fatalf("%v:\nexact       %v\nshortlisted %v", r, e, s)
		}
	}
}
