// Command loadtest measures classifierd end to end: it starts the real
// daemon on a loopback port, drives it with the generated gRPC client, and
// in the same run times the bare ONNX Runtime call for the same texts, so
// the overhead ratio (end-to-end latency ÷ bare inference) is measured
// under identical conditions.
//
//	loadtest --daemon bin/classifierd --index var/default.idx --model DIR [--ort-lib PATH]
//
// With --saturation it instead drives Route at rising numbers of
// concurrent clients (--steps), prints throughput, p50/p99 of the answered
// calls and the refused (RESOURCE_EXHAUSTED) and failed calls per step,
// compares the peak with the bare engine's throughput on the same texts,
// and draws the curve (--png); `make loadtest` runs this mode.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/classifierd/classifierd/embed"
	pb "github.com/classifierd/classifierd/gen/classifier/v1"
	"github.com/classifierd/classifierd/models"
)

// prompts are realistic single-turn requests of varied length.
var prompts = []string{
	"Check my GitHub notifications",
	"read config.json and tell me what port the server uses",
	"list the running docker containers",
	"what's in PROJ-123?",
	"post a message to the #deploys channel that the release is out",
	"show me the last five commits on this branch",
	"search the web for the latest Go release notes",
	"create a new table called invoices in postgres",
	"remember that my favourite editor is vim",
	"open a pull request from feature/login into main with a short summary",
	"which tools do you have?",
	"find every TODO in the src directory",
}

type config struct {
	daemon, index, model, manifest, ortLib string
	requests, concurrency                  int
	jsonOut                                string
	reload                                 time.Duration
	daemonArgs                             []string
	label                                  string
	metricsAddr                            string // --metrics-listen of the daemon (empty: none)
}

func main() {
	if os.Getenv(busyEnv) != "" { // the CPU hog of the +hog scenarios
		busyLoop()
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.StringVar(&c.daemon, "daemon", "bin/classifierd", "classifierd binary")
	fs.StringVar(&c.index, "index", "var/default.idx", "index file")
	fs.StringVar(&c.model, "model", os.Getenv("MODEL_DIR"), "model directory")
	fs.StringVar(&c.manifest, "manifest", "", "model manifest")
	fs.StringVar(&c.ortLib, "ort-lib", os.Getenv("ORT_LIB"), "ONNX Runtime library")
	fs.IntVar(&c.requests, "requests", 2000, "requests per measurement (bounded load)")
	fs.IntVar(&c.concurrency, "concurrency", 8, "concurrent clients in the throughput test")
	fs.StringVar(&c.jsonOut, "json", "", "also write the figures as JSON to this file")
	fs.DurationVar(&c.reload, "reload", 0, "reload mode: only Route from --concurrency clients, while the daemon gets a SIGHUP (an index reload) this often; counts failed requests")
	daemonArgs := fs.String("daemon-args", "", "extra daemon flags, space-separated (e.g. \"--max-queue 64 --batch-window 2ms\")")
	fs.StringVar(&c.label, "label", "", "what to call this machine or setting in the chart's title")
	saturation := fs.Bool("saturation", false, "measure the saturation curve of Route instead (see --steps)")
	var sc satConfig
	steps := fs.String("steps", "1,2,4,8,16,64,256,1000,2000", "with --saturation: concurrent clients at each step")
	fs.DurationVar(&sc.stepTime, "step-time", 5*time.Second, "with --saturation: measured time per step (and for the bare engine)")
	fs.DurationVar(&sc.warmup, "warmup", time.Second, "with --saturation: unmeasured time at the start of each step")
	fs.DurationVar(&sc.callTimeout, "call-timeout", 5*time.Second, "with --saturation: deadline of each call of the curve (the client's own: see --send-deadline)")
	fs.BoolVar(&sc.sendDeadline, "send-deadline", false, "with --saturation: tell the daemon the curve's --call-timeout (grpc-timeout), so it may admit calls to wait up to --deadline-share of it; by default it is not told and bounds their waiting by --max-waiting-time, as when issue 17's targets were set")
	fs.DurationVar(&sc.backoff, "backoff", 20*time.Millisecond, "with --saturation: a client's first pause after RESOURCE_EXHAUSTED, doubling per refusal in a row up to 1s (jitter: uniform in [b/2, 3b/2])")
	fs.IntVar(&sc.conns, "conns", 8, "with --saturation: gRPC connections the clients share, at least (a step gets more when its clients would otherwise wait in the client for a stream: 48 clients to a connection, under the daemon's 64 streams)")
	fs.StringVar(&sc.queries, "queries", "", "with --saturation: JSON-lines file whose \"text\" fields are the prompts (default: the built-in ones)")
	fs.StringVar(&sc.png, "png", "", "with --saturation: write the curve as a PNG chart")
	replotFrom := fs.String("replot", "", "redraw the chart (--png) from the --json file of an earlier --saturation run, and exit")
	scenarios := fs.String("scenarios", "", "with --saturation: after the curve, run these scenarios of issues 25 and 27 against a daemon with a token file (comma-separated: closed8, retry400, hog, short2000, mix, fair; or all)")
	fs.IntVar(&sc.scenarioCalls, "scenario-calls", 3000, "with --scenarios: Route calls of the closed8 and retry400 scenarios")
	fs.IntVar(&sc.bareWorkers, "bare-workers", 2, "with --saturation: concurrent runs of the bare engine (the daemon's --concurrency)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.daemonArgs = strings.Fields(*daemonArgs)
	if *replotFrom != "" {
		if sc.png == "" {
			return errors.New("--replot needs --png")
		}
		return replot(*replotFrom, sc.png, chartTitle(c.label))
	}
	if *saturation {
		var err error
		if *steps != "none" {
			if sc.steps, err = parseSteps(*steps); err != nil {
				return err
			}
		}
		sc.scenarios = splitComma(*scenarios)
		if sc.stepTime <= 0 || sc.warmup < 0 || sc.callTimeout <= 0 || sc.backoff <= 0 || sc.conns < 1 || sc.bareWorkers < 1 || c.requests < 10 {
			return errors.New("--step-time, --call-timeout, --backoff must be positive, --warmup not negative, --conns and --bare-workers at least 1, --requests at least 10")
		}
		return runSaturation(ctx, c, sc, out)
	}
	if c.requests < 10 || c.requests > 1_000_000 || c.concurrency < 1 || c.concurrency > 256 {
		return errors.New("--requests must be 10..1000000 and --concurrency 1..256")
	}

	if c.reload > 0 {
		return runReload(ctx, c, out)
	}
	// The bare ONNX Runtime call for the same texts, tokenised beforehand.
	bareCall, closeBare, err := openBare(ctx, c)
	if err != nil {
		return err
	}
	defer closeBare()
	bare, err := sequential(ctx, c.requests, bareCall)
	if err != nil {
		return err
	}

	addr, _, stopDaemon, err := startDaemon(ctx, c)
	if err != nil {
		return err
	}
	defer stopDaemon()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	cl := pb.NewClassifierServiceClient(conn)
	sess, err := cl.CreateSession(ctx, &pb.CreateSessionRequest{DefaultExposure: "minimal"})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if _, err := cl.UpdateExposure(ctx, &pb.UpdateExposureRequest{SessionId: sess.GetSession().GetId(), Categories: []string{"github", "filesystem"}}); err != nil {
		return fmt.Errorf("update exposure: %w", err)
	}
	sid := sess.GetSession().GetId()

	calls := map[string]func(ctx context.Context, i int) error{
		"Route": func(ctx context.Context, i int) error {
			_, err := cl.Route(ctx, &pb.RouteRequest{Query: prompts[i%len(prompts)]})
			return err
		},
		"Classify": func(ctx context.Context, i int) error {
			_, err := cl.Classify(ctx, &pb.ClassifyRequest{Text: prompts[i%len(prompts)]})
			return err
		},
		"AnalyzePrompt": func(ctx context.Context, i int) error {
			_, err := cl.AnalyzePrompt(ctx, &pb.AnalyzePromptRequest{Prompt: prompts[i%len(prompts)]})
			return err
		},
		"GetIndexInfo": func(ctx context.Context, i int) error {
			_, err := cl.GetIndexInfo(ctx, &pb.GetIndexInfoRequest{})
			return err
		},
		"ListTools": func(ctx context.Context, i int) error {
			_, err := cl.ListTools(ctx, &pb.ListToolsRequest{SessionId: sid})
			return err
		},
	}
	names := []string{"Route", "Classify", "AnalyzePrompt", "ListTools", "GetIndexInfo"}
	res := map[string]any{"bare_ort_p50_ms": ms(bare.p50), "bare_ort_p99_ms": ms(bare.p99)}
	fmt.Fprintf(out, "%-22s %9s %9s %12s\n", "measurement", "p50 ms", "p99 ms", "req/s")
	fmt.Fprintf(out, "%-22s %9.3f %9.3f %12s\n", "bare ORT run", ms(bare.p50), ms(bare.p99), "-")
	var routeP50 time.Duration
	for _, name := range names {
		call := calls[name]
		if err := call(ctx, 0); err != nil { // warm-up; also checks the RPC exists
			fmt.Fprintf(out, "%-22s skipped: %v\n", name, err)
			continue
		}
		lat, err := sequential(ctx, c.requests, call)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rps, err := concurrent(ctx, c.requests, c.concurrency, call)
		if err != nil {
			return fmt.Errorf("%s concurrent: %w", name, err)
		}
		fmt.Fprintf(out, "%-22s %9.3f %9.3f %12.0f\n", name+" (1 client)", ms(lat.p50), ms(lat.p99), 1/lat.mean.Seconds())
		fmt.Fprintf(out, "%-22s %9s %9s %12.0f\n", fmt.Sprintf("%s (%d clients)", name, c.concurrency), "", "", rps)
		res[name+"_p50_ms"], res[name+"_p99_ms"], res[name+"_rps_concurrent"] = ms(lat.p50), ms(lat.p99), rps
		if name == "Route" {
			routeP50 = lat.p50
		}
	}
	res["Route_separate_ratio"] = float64(routeP50) / float64(bare.p50)
	// The ratio proper: bare runs and Route calls interleaved one for one,
	// so both see the same machine state (load, caches, clock) and a
	// quiet or busy moment cannot favour either side.
	pb50, pr50, err := paired(ctx, c.requests, bareCall, calls["Route"])
	if err != nil {
		return fmt.Errorf("paired: %w", err)
	}
	ratio := float64(pr50) / float64(pb50)
	res["paired_bare_p50_ms"], res["paired_route_p50_ms"] = ms(pb50), ms(pr50)
	res["overhead_ratio_route_over_bare_p50"] = ratio
	fmt.Fprintf(out, "interleaved, same texts: bare ORT p50 %.3f ms, Route p50 %.3f ms\n", ms(pb50), ms(pr50))
	fmt.Fprintf(out, "overhead ratio (Route p50 / bare ORT p50, interleaved in one run): %.2f\n", ratio)
	if p, ok := res["GetIndexInfo_p50_ms"].(float64); ok {
		fmt.Fprintf(out, "of which a bare gRPC round trip (GetIndexInfo p50): %.3f ms\n", p)
	}
	if c.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

type latency struct{ p50, p99, mean time.Duration }

func summarize(d []time.Duration) latency {
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return latency{p50: d[len(d)/2], p99: d[len(d)*99/100], mean: sum / time.Duration(len(d))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// openBare opens the model in this process, with the daemon's
// single-threaded settings, and returns one bare ONNX Runtime run of the
// i-th prompt's tokens (tokenised beforehand).
func openBare(ctx context.Context, c config) (func(context.Context, int) error, func(), error) {
	return openBareTexts(ctx, c, prompts, 1)
}

// openBareTexts is openBare over texts, allowing workers concurrent runs.
func openBareTexts(ctx context.Context, c config, texts []string, workers int) (func(context.Context, int) error, func(), error) {
	man, err := models.Resolve(c.model, c.manifest)
	if err != nil {
		return nil, nil, err
	}
	rt, err := embed.InitRuntime(c.ortLib)
	if err != nil {
		return nil, nil, err
	}
	eng, err := embed.Open(rt, embed.Config{ModelDir: c.model, Manifest: man, IntraOpThreads: 1, MaxConcurrent: workers})
	if err != nil {
		_ = rt.Close()
		return nil, nil, err
	}
	closeAll := func() { _ = eng.Close(); _ = rt.Close() }
	toks := make([][]int64, len(texts))
	for i, p := range texts {
		if toks[i], err = eng.Tokens(p); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	call := func(ctx context.Context, i int) error {
		_, err := eng.Infer(ctx, toks[i%len(toks):i%len(toks)+1])
		return err
	}
	if err := call(ctx, 0); err != nil {
		closeAll()
		return nil, nil, err
	}
	return call, closeAll, nil
}

// paired times a and b alternately on the same i and returns both p50s.
func paired(ctx context.Context, n int, a, b func(context.Context, int) error) (time.Duration, time.Duration, error) {
	da, db := make([]time.Duration, n), make([]time.Duration, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := a(ctx, i); err != nil {
			return 0, 0, err
		}
		mid := time.Now()
		if err := b(ctx, i); err != nil {
			return 0, 0, err
		}
		da[i], db[i] = mid.Sub(start), time.Since(mid)
	}
	return summarize(da).p50, summarize(db).p50, nil
}

func sequential(ctx context.Context, n int, call func(context.Context, int) error) (latency, error) {
	d := make([]time.Duration, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := call(ctx, i); err != nil {
			return latency{}, err
		}
		d[i] = time.Since(start)
	}
	return summarize(d), nil
}

func concurrent(ctx context.Context, n, workers int, call func(context.Context, int) error) (float64, error) {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := call(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			return 0, err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// startDaemon starts classifierd and waits until it serves; it returns
// its address, its process (for signals) and how to stop it.
func startDaemon(ctx context.Context, c config) (string, *os.Process, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, nil, err
	}
	state, err := os.MkdirTemp("", "loadtest-")
	if err != nil {
		return "", nil, nil, err
	}
	cmd := exec.CommandContext(ctx, c.daemon, "--index", c.index, "--model", c.model, "--listen", addr,
		"--ort-lib", c.ortLib, "--log-level", "warn",
		"--terminal-logs", filepath.Join(state, "terminal"), "--terminal-db", filepath.Join(state, "terminal.db"))
	if c.manifest != "" {
		cmd.Args = append(cmd.Args, "--manifest", c.manifest)
	}
	if c.metricsAddr != "" {
		cmd.Args = append(cmd.Args, "--metrics-listen", c.metricsAddr)
	}
	cmd.Args = append(cmd.Args, c.daemonArgs...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(state)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return addr, cmd.Process, stop, nil
		}
	}
	stop()
	return "", nil, nil, errors.New("daemon did not become healthy in 60s")
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
