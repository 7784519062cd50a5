package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/classifierd/classifierd/models"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/internal/testdaemon"
	"github.com/classifierd/classifierd/internal/testenv"
	"github.com/classifierd/classifierd/internal/testproc"
)

// These tests build the real binaries and run them on a real socket with
// the real mirrored model: the acceptance path of the core issue.

// modelManifest is the manifest of the model the tests run (models.Resolve,
// as the daemon finds it).
func modelManifest(t testing.TB) *models.Manifest {
	t.Helper()
	m, err := models.Resolve(testenv.ModelDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// binaries are classifierd and gen-index, built once for these tests
// (testdaemon.Binary).
func binaries(t testing.TB) (daemon, genIndex string) {
	t.Helper()
	daemon, genIndex = testdaemon.Binary(t, "./cmd/classifierd"), testdaemon.Binary(t, "./tools/gen-index")
	testdaemon.RequireORT(t)
	return daemon, genIndex
}

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// genIndex builds an index for catalog into dir.
func genIndex(t testing.TB, catalog string, extra ...string) string {
	t.Helper()
	return testdaemon.GenIndex(t, catalog, extra...)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return testdaemon.FreeAddr(t)
}

// daemon is a classifierd process these tests started (testdaemon.Start):
// its stderr, and its exit on done (a reader puts it back).
type daemon struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	done   chan error
}

// syncBuffer holds a process's output while it runs.
type syncBuffer = testproc.Buffer

// startDaemon runs classifierd and waits until health reports SERVING;
// idx "" starts it without --index.
func startDaemon(t *testing.T, idx string, extra ...string) (*daemon, *grpc.ClientConn) {
	t.Helper()
	binaries(t)
	addr := freeAddr(t)
	args := append(testdaemon.Args(t, addr), extra...)
	if idx != "" { // "": the test passes --mcp-config instead
		args = append([]string{"--index", idx}, args...)
	}
	return serving(t, addr, testdaemon.Start(t, args...), 30*time.Second,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// serving dials the daemon p started on addr and waits up to timeout
// until a health check over that connection answers SERVING.
func serving(t *testing.T, addr string, p *testproc.Proc, timeout time.Duration, dial ...grpc.DialOption) (*daemon, *grpc.ClientConn) {
	t.Helper()
	d := &daemon{cmd: p.Cmd, addr: addr, stderr: p.Output, done: p.Done}
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	testdaemon.WaitServing(t, p, conn, timeout)
	return d, conn
}

func defaultCatalog(t testing.TB) string {
	return testdaemon.DefaultCatalog()
}

func TestDaemonServesDefaultCatalog(t *testing.T) {
	idx := genIndex(t, defaultCatalog(t))
	d, conn := startDaemon(t, idx)
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("route github first", func(t *testing.T) {
		resp, err := c.Route(ctx, &pb.RouteRequest{Query: "Check my GitHub notifications"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetServers()) == 0 || resp.GetServers()[0].GetId() != "github" {
			t.Fatalf("servers = %v, want github first", resp.GetServers())
		}
		if len(resp.GetTools()) == 0 || resp.GetTools()[0].GetServer() != "github" {
			t.Fatalf("tools = %v, want a github tool first", resp.GetTools())
		}
		st := resp.GetStats()
		if st.GetTotalTools() < 80 || st.GetSelectedTools() != int32(len(resp.GetTools())) || st.GetReductionPercent() <= 0 {
			t.Fatalf("stats = %v", st)
		}
		if resp.GetReasoning() == "" {
			t.Fatal("empty reasoning")
		}
	})
	t.Run("a pasted log routes by the question after it", func(t *testing.T) {
		q := "Post a short summary of this in the #ops channel on Slack so the on-call team sees it"
		prompt := pastedLog(200<<10) + "\n\n" + q
		for name, req := range map[string]*pb.RouteRequest{
			"query":    {Query: prompt},
			"messages": {Messages: []*pb.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: prompt}}},
		} {
			resp, err := c.Route(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(resp.GetServers()) == 0 || resp.GetServers()[0].GetId() != "slack" {
				t.Fatalf("%s: servers = %v, want slack first", name, resp.GetServers())
			}
		}
		a, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: prompt})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(a.GetCategories(), "communication") {
			t.Fatalf("AnalyzePrompt categories %v, want communication", a.GetCategories())
		}
	})
	t.Run("a request with two needs gets both servers", func(t *testing.T) {
		// The example: GitHub ranks well below the filesystem in the
		// whole prompt (the config.json pattern), but is the best of its
		// own part, so both pass the default threshold.
		for _, q := range []string{
			"read config.json and push it to my repo",
			// With all-MiniLM-L6-v2 "search the web for the latest postgres
			// release notes and create a jira ticket" loses the web search to
			// the postgres server, which the text names (+0.2): a lexical
			// weight set for use-lite-en's cosines, not yet fitted per model.
			"search the web for reviews of standing desks and create a jira ticket to buy one for the team",
		} {
			resp, err := c.Route(ctx, &pb.RouteRequest{Query: q})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range resp.GetServers() {
				ids = append(ids, s.GetId())
			}
			want := []string{"filesystem", "github"}
			if strings.Contains(q, "jira") {
				want = []string{"brave-search", "atlassian"}
			}
			for _, w := range want {
				if !slices.Contains(ids, w) {
					t.Errorf("%q: servers %v at the default threshold, want %v among them", q, ids, want)
				}
			}
		}
	})
	t.Run("no-match policies", func(t *testing.T) {
		for _, tc := range []struct {
			p       pb.NoMatchPolicy
			applied pb.NoMatchPolicy
			check   func([]*pb.ScoredTool) bool
		}{
			{pb.NoMatchPolicy_NO_MATCH_POLICY_UNSPECIFIED, pb.NoMatchPolicy_NO_MATCH_POLICY_NONE, func(ts []*pb.ScoredTool) bool { return len(ts) == 0 }},
			{pb.NoMatchPolicy_NO_MATCH_POLICY_NONE, pb.NoMatchPolicy_NO_MATCH_POLICY_NONE, func(ts []*pb.ScoredTool) bool { return len(ts) == 0 }},
			{pb.NoMatchPolicy_NO_MATCH_POLICY_META, pb.NoMatchPolicy_NO_MATCH_POLICY_META, func(ts []*pb.ScoredTool) bool {
				for _, x := range ts {
					if x.GetCategory() != "meta" {
						return false
					}
				}
				return len(ts) > 0
			}},
			{pb.NoMatchPolicy_NO_MATCH_POLICY_ALL, pb.NoMatchPolicy_NO_MATCH_POLICY_ALL, func(ts []*pb.ScoredTool) bool { return len(ts) == 139 }},
		} {
			resp, err := c.Route(ctx, &pb.RouteRequest{Query: "what's a good recipe for lasagna", OnNoMatch: tc.p})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.GetAbstained() || resp.GetAppliedPolicy() != tc.applied || resp.GetPolicyReason() == "" || !tc.check(resp.GetTools()) {
				t.Fatalf("%v: abstained=%v applied=%v reason=%q tools=%d", tc.p, resp.GetAbstained(), resp.GetAppliedPolicy(), resp.GetPolicyReason(), len(resp.GetTools()))
			}
			if int(resp.GetStats().GetSelectedTools()) != len(resp.GetTools()) {
				t.Fatalf("stats %v", resp.GetStats())
			}
		}
		if _, err := c.Route(ctx, &pb.RouteRequest{Query: "x", OnNoMatch: 42}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unknown policy: %v", err)
		}
	})
	t.Run("classify", func(t *testing.T) {
		resp, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "read the file config.json in my home directory", TopK: 3})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetAbstained() || resp.GetCategories()[0].GetId() != "filesystem" {
			t.Fatalf("got %v, want filesystem", resp)
		}
		c0 := resp.GetCategories()[0]
		if c0.GetConfidence() <= 0 || c0.GetConfidence() > 1 {
			t.Fatalf("confidence %v outside (0,1]", c0.GetConfidence())
		}
	})
	t.Run("embed", func(t *testing.T) {
		resp, err := c.Embed(ctx, &pb.EmbedRequest{Texts: []string{"hello", "world"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetVectors()) != 2 || len(resp.GetVectors()[0].GetValues()) != int(resp.GetDimensions()) || int(resp.GetDimensions()) != modelManifest(t).Dims {
			t.Fatalf("got %d vectors of %d dims", len(resp.GetVectors()), resp.GetDimensions())
		}
	})
	t.Run("index info", func(t *testing.T) {
		info, err := c.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		man := modelManifest(t)
		if info.GetModelName() != man.Name || int(info.GetDimensions()) != man.Dims || len(info.GetModelFingerprint()) != 64 ||
			info.GetCategories() != 17 || info.GetTools() < 80 || info.GetLimits().GetMaxTextBytes() != 256<<10 {
			t.Fatalf("info = %v", info)
		}
		// The default catalog has about one example per tool: too few to fit
		// the tool fusion weights, so the defaults apply and say so.
		if f := info.GetFusion(); f.GetFitted() || f.GetToolCentroid() != 0.5 || f.GetBm25() <= 0 || f.GetPattern() <= 0 {
			t.Fatalf("fusion = %v, want the default weights, not fitted", f)
		}
	})
	t.Run("reflection lists the service", func(t *testing.T) {
		rc, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		resp, err := rc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		if !strings.Contains(strings.Join(names, ","), "classifier.v1.ClassifierService") {
			t.Fatalf("services = %v", names)
		}
	})
	t.Run("terminal service is off without --terminal", func(t *testing.T) {
		_, err := terminalpb.NewTerminalServiceClient(conn).DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{Text: "Password: "})
		if got := status.Code(err); got != codes.Unimplemented {
			t.Fatalf("DetectInputPrompt: got %v (%v), want Unimplemented", got, err)
		}
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: terminalpb.TerminalService_ServiceDesc.ServiceName})
		if got := status.Code(err); got != codes.NotFound {
			t.Fatalf("health of TerminalService: got %v, want NotFound", got)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		long := strings.Repeat("a ", 150<<10) // 300 KiB
		minus := float32(-0.5)
		cases := []struct {
			name string
			call func() error
			want string
		}{
			{"empty classify", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: " \n\t"}); return err }, "empty"},
			{"oversized classify", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: long}); return err }, "limit 262144"},
			{"top_k out of range", func() error { _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "hi", TopK: 1000}); return err }, "top_k"},
			{"negative min_confidence", func() error {
				_, err := c.Classify(ctx, &pb.ClassifyRequest{Text: "hi", MinConfidence: &minus})
				return err
			}, "min_confidence"},
			{"route without query", func() error { _, err := c.Route(ctx, &pb.RouteRequest{}); return err }, "query"},
			{"unknown include", func() error {
				_, err := c.Route(ctx, &pb.RouteRequest{Query: "x", IncludeServers: []string{"nope"}})
				return err
			}, "nope"},
			{"unknown exclude", func() error {
				_, err := c.Route(ctx, &pb.RouteRequest{Query: "x", ExcludeServers: []string{"nope2"}})
				return err
			}, "nope2"},
			{"bad role", func() error {
				_, err := c.Route(ctx, &pb.RouteRequest{Messages: []*pb.Message{{Role: "wizard", Content: "hi"}}})
				return err
			}, "role"},
			{"oversized route", func() error { _, err := c.Route(ctx, &pb.RouteRequest{Query: long}); return err }, "limit 262144"},
			{"oversized message", func() error {
				_, err := c.Route(ctx, &pb.RouteRequest{Messages: []*pb.Message{{Role: "user", Content: long}}})
				return err
			}, "limit 262144"},
			{"oversized analyze", func() error { _, err := c.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: long}); return err }, "limit 262144"},
			{"empty embed", func() error { _, err := c.Embed(ctx, &pb.EmbedRequest{}); return err }, "empty"},
			{"blank embed text", func() error { _, err := c.Embed(ctx, &pb.EmbedRequest{Texts: []string{"ok", "  "}}); return err }, "texts[1]"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				if got := status.Code(err); got != codes.InvalidArgument {
					t.Fatalf("code = %v (%v), want InvalidArgument", got, err)
				}
				if !strings.Contains(status.Convert(err).Message(), tc.want) {
					t.Fatalf("message %q does not mention %q", status.Convert(err).Message(), tc.want)
				}
			})
		}
	})
	t.Run("prompt text never logged", func(t *testing.T) {
		secret := "hunter2-very-secret-prompt"
		if _, err := c.Classify(ctx, &pb.ClassifyRequest{Text: secret}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(d.stderr.String(), secret) {
			t.Fatal("prompt text appeared in the daemon log")
		}
	})
	t.Run("graceful shutdown on SIGTERM", func(t *testing.T) {
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-d.done:
			d.done <- err // for cleanup
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, d.stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatal("daemon did not stop within 20s of SIGTERM")
		}
		if !strings.Contains(d.stderr.String(), "stopped") {
			t.Fatalf("no shutdown log line:\n%s", d.stderr.String())
		}
	})
}

// TestDaemonRefusesBadIndex checks the daemon exits non-zero with a one-line
// reason instead of serving from a damaged or mismatched index.
func TestDaemonRefusesBadIndex(t *testing.T) {
	bin, _ := binaries(t)
	good := genIndex(t, "testdata/mini.json")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-100] ^= 0xff
	// An index built for the same model run differently (another token cap)
	// has another fingerprint.
	man := filepath.Join(dir, "manifest.json")
	shorter := *modelManifest(t)
	shorter.MaxTokens /= 2
	manData, err := json.Marshal(shorter)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(man, manData, 0o644); err != nil {
		t.Fatal(err)
	}
	other := genIndex(t, "testdata/mini.json", "--manifest", man)
	cases := []struct {
		name, index, want string
	}{
		{"missing", filepath.Join(dir, "nope.idx"), "no such file"},
		{"truncated", write("trunc.idx", data[:len(data)/2]), "truncated"},
		{"corrupted", write("flip.idx", flipped), "corrupt"},
		{"not an index", write("junk.idx", []byte("hello world, not an index")), "bad magic"},
		{"other model", other, "different model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			cmd := exec.Command(bin, "--index", tc.index, "--model", testenv.ModelDir(), "--listen", freeAddr(t), "--ort-lib", testenv.ORTLib(),
				"--terminal-logs", filepath.Join(state, "terminal"), "--terminal-db", filepath.Join(state, "terminal.db"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatal("classifierd started on a bad index")
			}
			last := lastLine(stderr.String())
			if !strings.HasPrefix(last, "classifierd: ") || !strings.Contains(last, tc.want) {
				t.Fatalf("last stderr line %q does not explain %q", last, tc.want)
			}
		})
	}
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			last = sc.Text()
		}
	}
	return last
}

// TestGenIndexRejectsMalformedCatalog checks gen-index names the bad entry.
func TestGenIndexRejectsMalformedCatalog(t *testing.T) {
	_, gi := binaries(t)
	cases := []struct{ name, catalog, want string }{
		{"duplicate category", `{"categories":[{"id":"a","description":"x"},{"id":"a","description":"y"}]}`, `categories[1] "a": duplicate`},
		{"tool without name", `{"servers":[{"id":"s","description":"d","tools":[{"description":"x"}]}]}`, `servers[0] "s" tools[0]`},
		{"empty description", `{"categories":[{"id":"a","description":""}]}`, `categories[0] "a": empty description`},
		{"missing tools_file", `{"servers":[{"id":"s","description":"d","tools_file":"nope.json"}]}`, `servers[0] "s": tools_file nope.json`},
		{"not json", `{"categories": [`, "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cat.json")
			if err := os.WriteFile(p, []byte(tc.catalog), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(gi, "--catalog", p, "--model", testenv.ModelDir(), "--out", filepath.Join(t.TempDir(), "x.idx"), "--ort-lib", testenv.ORTLib())
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatal("gen-index accepted a malformed catalog")
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output %q does not name %q", out, tc.want)
			}
		})
	}
}

// TestGenIndexEvalResults runs gen-index eval on the default catalog with a
// few labelled queries and checks the per-query results file agrees with
// the JSON report.
func TestGenIndexEvalResults(t *testing.T) {
	_, gi := binaries(t)
	dir := t.TempDir()
	queries := filepath.Join(dir, "q.jsonl")
	lines := `{"text":"open a pull request for my branch","servers":["github"],"tools":["github/create_pull_request"],"kind":"single"}
{"text":"read the config.json file","servers":["filesystem"],"tools":["filesystem/read_file"],"kind":"single"}
{"text":"bake a chocolate cake","kind":"oos"}
`
	if err := os.WriteFile(queries, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	res, rep := filepath.Join(dir, "results.jsonl"), filepath.Join(dir, "report.json")
	cmd := exec.Command(gi, "eval", "--catalog", filepath.Join(testenv.RepoRoot(), "data", "catalogs", "default.json"), "--queries", queries,
		"--model", testenv.ModelDir(), "--ort-lib", testenv.ORTLib(), "--quiet", "--results", res, "--json", rep)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-index eval: %v\n%s", err, out)
	}
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Text  string   `json:"text"`
		Gold  []string `json:"gold"`
		Tools []string `json:"tools"`
		Right bool     `json:"right"`
		Ranks []int    `json:"gold_ranks"`
	}
	var rows []row
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("results line %q: %v", l, err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 3 {
		t.Fatalf("results: got %d lines, want one per query (3)", len(rows))
	}
	var report struct {
		Routing struct {
			ToolTop1 float64 `json:"tool_top1"`
		} `json:"routing"`
	}
	rb, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rb, &report); err != nil {
		t.Fatal(err)
	}
	right := 0
	for _, r := range rows[:2] {
		if len(r.Tools) == 0 {
			t.Fatalf("%q: no tools in the results", r.Text)
		}
		if r.Right != (r.Tools[0] == r.Gold[0]) {
			t.Errorf("%q: right=%v but top tool %q, gold %q", r.Text, r.Right, r.Tools[0], r.Gold[0])
		}
		if r.Right {
			right++
		}
		// The gold rank comes from a deeper call; within the top 5 it must
		// agree with the returned list.
		if len(r.Ranks) != len(r.Gold) {
			t.Fatalf("%q: gold_ranks %v for gold %v", r.Text, r.Ranks, r.Gold)
		}
		if i := slices.Index(r.Tools, r.Gold[0]); i >= 0 && r.Ranks[0] != i+1 {
			t.Errorf("%q: gold rank %d, but it is tool %d of %v", r.Text, r.Ranks[0], i+1, r.Tools)
		} else if i < 0 && r.Ranks[0] >= 1 && r.Ranks[0] <= len(r.Tools) {
			t.Errorf("%q: gold rank %d, but it is not in %v", r.Text, r.Ranks[0], r.Tools)
		}
	}
	if want := float64(right) / 2; report.Routing.ToolTop1 != want {
		t.Errorf("report tool_top1 %v, results say %v", report.Routing.ToolTop1, want)
	}
}
