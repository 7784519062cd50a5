package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// satConfig is the saturation mode's part of the command line.
type satConfig struct {
	steps       []int
	stepTime    time.Duration
	warmup      time.Duration
	callTimeout time.Duration
	// sendDeadline sends callTimeout to the daemon as the calls' own
	// deadline; by default the curve's clients keep it to themselves
	// (see curveCall).
	sendDeadline  bool
	backoff       time.Duration
	conns         int
	queries       string
	png           string
	bareWorkers   int
	scenarios     []string
	scenarioCalls int
}

// step is what one concurrency level measured.
type step struct {
	Clients    int            `json:"clients"`
	Seconds    float64        `json:"seconds"`
	OK         int            `json:"ok"`
	RPS        float64        `json:"route_per_s"`
	P50ms      float64        `json:"p50_ms"`
	P99ms      float64        `json:"p99_ms"`
	MaxMs      float64        `json:"max_ms"`
	Rejected   int            `json:"rejected"`
	Errors     map[string]int `json:"errors,omitempty"`
	RejectRate float64        `json:"rejected_share"`
	// DaemonCPUms is the daemon's CPU time (user + system) per answered
	// call, refusals' cost included: on a quiet machine, cores ÷ this is
	// the most Route/s it can answer.
	DaemonCPUms float64 `json:"daemon_cpu_ms_per_route"`
	// MachineBusy is the share of all CPUs busy during the step (daemon,
	// this load generator and anything else running).
	MachineBusy float64 `json:"machine_busy_share"`
	// ClientCores is the CPU this load generator used, in cores: taken
	// from the daemon when both run on one machine.
	ClientCores float64 `json:"client_cores"`
	// SrvP99ms is the p99 of the admitted calls' time in the daemon, from
	// arrival at admission to the answer (its
	// classifierd_admitted_call_seconds histogram over the measured time,
	// interpolated within a bucket): the latency without the network and
	// this load generator's own scheduling. WaitP99ms is the p99 of their
	// wait for a place (classifierd_admission_wait_seconds). 0 when the
	// daemon does not export them.
	SrvP99ms  float64 `json:"server_p99_ms,omitempty"`
	WaitP99ms float64 `json:"admission_wait_p99_ms,omitempty"`
}

// Histograms the daemon exports about admitted calls.
const (
	admittedHist = "classifierd_admitted_call_seconds"
	waitHist     = "classifierd_admission_wait_seconds"
)

// procCPU is a process's user plus system CPU time (/proc/PID/stat).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// machineCPU is the busy and total jiffies of all CPUs (/proc/stat).
func machineCPU() (busy, total int64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	for i, x := range f[1:min(len(f), 9)] { // user .. steal; guest is inside user
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

func parseSteps(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10_000 {
			return nil, fmt.Errorf("--steps: %q is not a client count in 1..10000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// loadQueries reads the "text" of each line of a JSON-lines file (the
// eval format of data/catalogs), so the load covers many distinct prompts.
func loadQueries(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var q struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if strings.TrimSpace(q.Text) != "" {
			out = append(out, q.Text)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}

// bareThroughput runs the embed engine alone in this process on texts,
// from workers goroutines, for d: texts per second with nothing else
// (no gRPC, no tokenising, no ranking), the ceiling Route/s is compared to.
func bareThroughput(ctx context.Context, d time.Duration, workers, n int, call func(context.Context, int) error) (float64, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, next := 0, 0
	var firstErr error
	deadline := time.Now().Add(d)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if err := call(ctx, i%n); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done) / time.Since(start).Seconds(), nil
}

// saturate drives Route at each concurrency step: every client calls in a
// closed loop (next call as soon as the last answered) and, after a
// RESOURCE_EXHAUSTED, backs off exponentially with jitter as gRPC's retry
// policy does (sc.backoff, doubling per refusal in a row, at most 1 s;
// without it refused clients would spin and the refusals alone would fill
// the machine); only calls started after the step's warm-up count.
func saturate(ctx context.Context, addr, metricsAddr string, pid int, sc satConfig, queries []string, out io.Writer) ([]step, error) {
	// At least --conns connections, and enough that no step's clients
	// wait in the client for one of a connection's streams (connsFor): the
	// daemon allows --max-concurrent-streams (64) calls per connection,
	// and 2,000 clients on 8 connections had 1,488 of them queued in the
	// load generator, where the daemon can neither see nor answer them,
	// and the curve measured that queue (docs/loadtest.md, "Tenth pass").
	// A step's clients share the first max(--conns, connsFor(clients)).
	most := sc.conns
	for _, n := range sc.steps {
		most = max(most, connsFor(n))
	}
	conns := make([]*grpc.ClientConn, most)
	clients := make([]pb.ClassifierServiceClient, most)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i], clients[i] = c, pb.NewClassifierServiceClient(c)
	}
	fmt.Fprintf(out, "%8s %10s %9s %9s %9s %9s %9s %9s %9s %12s %8s %8s  %s\n", "clients", "Route/s", "p50 ms", "p99 ms", "max ms", "srv p99", "wait p99", "ok", "refused", "daemon cpu", "client", "machine", "errors")
	var steps []step
	for _, n := range sc.steps {
		if err := ctx.Err(); err != nil {
			return steps, err
		}
		cpu0, cpuErr := procCPU(pid)
		self0, selfErr := procCPU(os.Getpid())
		busy0, total0, statErr := machineCPU()
		began := time.Now()
		st := runStep(ctx, clients[:max(sc.conns, connsFor(n))], n, sc, queries, metricsAddr)
		cpu1, cpuErr1 := procCPU(pid)
		self1, selfErr1 := procCPU(os.Getpid())
		busy1, total1, statErr1 := machineCPU()
		if selfErr == nil && selfErr1 == nil {
			st.ClientCores = float64(self1-self0) / float64(time.Since(began))
		}
		if cpuErr == nil && cpuErr1 == nil && st.OK > 0 {
			// Over the warm-up and the measured time: per answered call of
			// the measured time, scaled to the whole step.
			st.DaemonCPUms = ms(cpu1-cpu0) / (float64(st.OK) * float64(sc.warmup+sc.stepTime) / float64(sc.stepTime))
		}
		if statErr == nil && statErr1 == nil && total1 > total0 {
			st.MachineBusy = float64(busy1-busy0) / float64(total1-total0)
		}
		steps = append(steps, st)
		var errs []string
		for k, v := range st.Errors {
			errs = append(errs, fmt.Sprintf("%s:%d", k, v))
		}
		slices.Sort(errs)
		fmt.Fprintf(out, "%8d %10.0f %9.2f %9.2f %9.2f %9s %9s %9d %9d %9.2f ms %5.2f cr %7.0f%%  %s\n", st.Clients, st.RPS, st.P50ms, st.P99ms, st.MaxMs,
			msOrDash(st.SrvP99ms), msOrDash(st.WaitP99ms), st.OK, st.Rejected, st.DaemonCPUms, st.ClientCores, 100*st.MachineBusy, strings.Join(errs, " "))
	}
	return steps, nil
}

func runStep(ctx context.Context, clients []pb.ClassifierServiceClient, n int, sc satConfig, queries []string, metricsAddr string) step {
	stepCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	measureFrom := start.Add(sc.warmup)
	measureTo := measureFrom.Add(sc.stepTime)
	// The daemon's own histograms, read when the measured time starts and
	// when it ends.
	var hists [2]map[string]histogram
	var scrapes sync.WaitGroup
	if metricsAddr != "" {
		scrapes.Go(func() {
			for i, at := range []time.Time{measureFrom, measureTo} {
				select {
				case <-time.After(time.Until(at)):
				case <-stepCtx.Done():
					return
				}
				h, err := scrapeHistograms(stepCtx, metricsAddr, admittedHist, waitHist)
				if err != nil {
					return
				}
				hists[i] = h
			}
		})
	}
	type tally struct {
		lat      []time.Duration
		rejected int
		errs     map[string]int
	}
	tallies := make([]tally, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[w%len(clients)]
			rng := rand.New(rand.NewPCG(uint64(w), uint64(n)))
			t := &tallies[w]
			t.errs = map[string]int{}
			backoff := sc.backoff
			for i := w; ; i += n {
				began := time.Now()
				if !began.Before(measureTo) || stepCtx.Err() != nil {
					return
				}
				cctx, cancel := curveCall(stepCtx, sc.callTimeout, sc.sendDeadline)
				_, err := cl.Route(cctx, &pb.RouteRequest{Query: queries[i%len(queries)]})
				cancel()
				took := time.Since(began)
				counted := !began.Before(measureFrom)
				switch code := status.Code(err); {
				case err == nil:
					backoff = sc.backoff
					if counted {
						t.lat = append(t.lat, took)
					}
				case code == codes.ResourceExhausted:
					if counted {
						t.rejected++
					}
					pause := backoff/2 + time.Duration(rng.Int64N(int64(backoff)+1))
					backoff = min(2*backoff, time.Second)
					select {
					case <-time.After(pause):
					case <-stepCtx.Done():
						return
					}
				default:
					if stepCtx.Err() != nil {
						return
					}
					if counted {
						t.errs[code.String()]++
					}
				}
			}
		}()
	}
	wg.Wait()
	scrapes.Wait()
	st := step{Clients: n, Seconds: sc.stepTime.Seconds(), Errors: map[string]int{}}
	if hists[0] != nil && hists[1] != nil {
		st.SrvP99ms = histP99ms(hists[1][admittedHist], hists[0][admittedHist])
		st.WaitP99ms = histP99ms(hists[1][waitHist], hists[0][waitHist])
	}
	var all []time.Duration
	for _, t := range tallies {
		all = append(all, t.lat...)
		st.Rejected += t.rejected
		for k, v := range t.errs {
			st.Errors[k] += v
		}
	}
	st.OK = len(all)
	st.RPS = float64(st.OK) / sc.stepTime.Seconds()
	if total := st.OK + st.Rejected; total > 0 {
		st.RejectRate = float64(st.Rejected) / float64(total)
	}
	if len(all) > 0 {
		slices.Sort(all)
		st.P50ms = ms(all[len(all)/2])
		st.P99ms = ms(all[min(len(all)-1, len(all)*99/100)])
		st.MaxMs = ms(all[len(all)-1])
	}
	if len(st.Errors) == 0 {
		st.Errors = nil
	}
	return st
}

// replot redraws the chart of a run from its --json file.
func replot(jsonPath, pngPath, title string) error {
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var res struct {
		Bare      float64    `json:"bare_texts_per_s"`
		Steps     []step     `json:"steps"`
		Scenarios []scenario `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}
	if len(res.Steps) == 0 {
		return fmt.Errorf("%s: no steps", jsonPath)
	}
	return writeSaturationPNG(pngPath, title, res.Steps, res.Bare, res.Scenarios)
}

// curveCall is the context of one call of the curve: it ends after d,
// but unless send the daemon is not told (no grpc-timeout), so the
// daemon bounds the call's waiting by its --max-waiting-time, as it did
// for every call when issue 17's targets were set (p99 of admitted calls
// at 2,000 clients ≤ 50 ms). A call that tells the daemon a 5 s deadline
// may be admitted to wait up to --deadline-share of it (issue 25): its
// latency then measures the caller's patience, not load shedding, and is
// what --scenarios measures.
func curveCall(ctx context.Context, d time.Duration, send bool) (context.Context, context.CancelFunc) {
	if send {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(d, cancel)
	return ctx, func() { t.Stop(); cancel() }
}

// runSaturation is the --saturation mode: the bare engine's throughput and
// the paired latency ratio, then Route at each concurrency step, printed,
// charted (--png) and optionally written as JSON.
func runSaturation(ctx context.Context, c config, sc satConfig, out io.Writer) error {
	queries := prompts
	if sc.queries != "" {
		q, err := loadQueries(sc.queries)
		if err != nil {
			return err
		}
		queries = q
	}
	bareCall, closeBare, err := openBareTexts(ctx, c, queries, sc.bareWorkers)
	if err != nil {
		return err
	}
	bareRate, err := bareThroughput(ctx, sc.stepTime, sc.bareWorkers, len(queries), bareCall)
	if err != nil {
		closeBare()
		return fmt.Errorf("bare: %w", err)
	}
	if c.metricsAddr, err = freeAddr(); err != nil {
		closeBare()
		return err
	}
	addr, pid, stopDaemon, err := startDaemon(ctx, c)
	if err != nil {
		closeBare()
		return err
	}
	defer stopDaemon()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		closeBare()
		return err
	}
	cl := pb.NewClassifierServiceClient(conn)
	route := func(ctx context.Context, i int) error {
		_, err := cl.Route(ctx, &pb.RouteRequest{Query: queries[i%len(queries)]})
		return err
	}
	if err := route(ctx, 0); err != nil {
		conn.Close()
		closeBare()
		return fmt.Errorf("first Route: %w", err)
	}
	// The latency ratio with bare runs and Route calls interleaved one for
	// one, then the bare engine is closed so it holds no threads while the
	// daemon is loaded.
	pb50, pr50, err := paired(ctx, min(c.requests, 2000), bareCall, route)
	conn.Close()
	closeBare()
	if err != nil {
		return fmt.Errorf("paired: %w", err)
	}
	fmt.Fprintf(out, "queries: %d distinct (%s); daemon: %s\n", len(queries), orDefault(sc.queries, "built-in prompts"), c.daemon)
	fmt.Fprintf(out, "bare ONNX Runtime (embed engine alone, same texts, %d workers): %.0f texts/s\n", sc.bareWorkers, bareRate)
	fmt.Fprintf(out, "one client, interleaved: bare p50 %.3f ms, Route p50 %.3f ms, ratio %.2f\n", ms(pb50), ms(pr50), float64(pr50)/float64(pb50))

	steps, err := saturate(ctx, addr, c.metricsAddr, pid.Pid, sc, queries, out)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	stopDaemon() // the scenarios start their own, with a token file
	var scens []scenario
	if len(sc.scenarios) > 0 {
		if scens, err = runScenarios(ctx, c, sc.scenarios, sc.scenarioCalls, queries, out); err != nil {
			return fmt.Errorf("scenarios: %w", err)
		}
	}
	done := append(curveDoneWhen(steps, sc.sendDeadline), doneWhen(scens)...)
	fmt.Fprintf(out, "\ndone when (issues 17, 25, 27), load average now %s (figures from a machine with a load average well above 1 are noisy):\n", loadavg())
	for _, l := range done {
		fmt.Fprintln(out, "  "+l)
	}
	var best step
	for _, s := range steps {
		if s.RPS > best.RPS {
			best = s
		}
	}
	if best.RPS > 0 {
		fmt.Fprintf(out, "peak %.0f Route/s at %d clients = %.2f × the bare engine's %.0f texts/s\n", best.RPS, best.Clients, best.RPS/bareRate, bareRate)
	}
	for _, s := range steps {
		if s.Clients == 8 && s.DaemonCPUms > 0 {
			fmt.Fprintf(out, "at 8 clients the daemon spent %.2f ms of CPU per answered Route: %d cores could answer at most %.0f Route/s with nothing else running (the machine was %.0f%% busy)\n",
				s.DaemonCPUms, runtime.NumCPU(), float64(runtime.NumCPU())*1000/s.DaemonCPUms, 100*s.MachineBusy)
		}
	}
	if sc.png != "" {
		if err := writeSaturationPNG(sc.png, chartTitle(c.label), steps, bareRate, scens); err != nil {
			return fmt.Errorf("png: %w", err)
		}
		fmt.Fprintf(out, "wrote %s\n", sc.png)
	}
	if c.jsonOut != "" {
		res := map[string]any{
			"bare_texts_per_s": bareRate, "paired_bare_p50_ms": ms(pb50), "paired_route_p50_ms": ms(pr50),
			"route_over_bare_p50": float64(pr50) / float64(pb50), "steps": steps, "queries": len(queries),
			"scenarios": scens, "done_when": done, "curve_sends_deadline": sc.sendDeadline,
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(c.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func chartTitle(label string) string {
	return fmt.Sprintf("classifierd Route saturation (%s)", orDefault(label, "this machine"))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// histP99ms is the p99 in milliseconds of the observations between two
// readings of a histogram; 0 if either is missing.
func histP99ms(later, earlier histogram) float64 {
	d, ok := later.sub(earlier)
	if !ok {
		return 0
	}
	q := d.quantile(0.99)
	if math.IsNaN(q) {
		return 0
	}
	return 1000 * q
}

func msOrDash(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}
