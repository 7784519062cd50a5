package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// The scenarios of issues 25 and 27 (--scenarios), each against one
// daemon with a token file, with the figures their targets name:
//
//   - closed8: 8 closed-loop clients, 5 s deadlines, --scenario-calls
//     Route calls: goodput, and no refusals;
//   - retry400: 400 clients that retry RESOURCE_EXHAUSTED with backoff
//     (20 ms doubling to 1 s, jitter) within 5 s deadlines, the same
//     calls: share OK (≥ 99.5 %), goodput ÷ closed8's (≥ 0.8);
//   - closed8+hog, retry400+hog: the same beside a CPU hog (a busy loop
//     pinned to core 0);
//   - short2000: 2,000 clients with 50 ms deadlines: refusals in ≤ 5 ms
//     p99, answered calls p99 ≤ 50 ms;
//   - mix: 8 closed-loop clients with 5 s deadlines beside 1,000 with
//     50 ms, each class's figures;
//   - fair: one token's small Routes alone (idle p50), then beside
//     another token's 16 concurrent 240 KB Routes (loaded p50): ratio
//     ≤ 2, no refusals.

// Tokens of the scenario daemon (loopback only, a temporary file).
const (
	loadToken  = "loadtest-load-0123456789abcdef"
	hogToken   = "loadtest-hog-0123456789abcdef"
	smallToken = "loadtest-small-0123456789abcdef"
)

// streamsPerConn is how many of the short-deadline scenarios' clients
// share one connection: below the daemon's --max-concurrent-streams (64
// by default, server.DefaultMaxConcurrentStreams). A connection's calls
// past that limit wait in the client for one of its streams, where the
// daemon cannot see, admit or refuse them: 2,000 clients on 8
// connections (512 streams) had 62 % of their attempts end in the client
// waiting for a stream, never sent (docs/loadtest.md, "Seventh pass").
// Clients that each open their own connection, as separate processes
// do, never queue there.
const streamsPerConn = 48

// connsFor is the connections the scenario's clients share.
func connsFor(clients int) int { return max(8, (clients+streamsPerConn-1)/streamsPerConn) }

// busyEnv makes this binary a CPU hog (busyLoop) instead of a load test.
const busyEnv = "LOADTEST_BUSY_LOOP"

// scenario is what one scenario measured.
type scenario struct {
	Name     string         `json:"name"`
	Clients  int            `json:"clients"`
	Deadline string         `json:"deadline"`
	Calls    int            `json:"calls"`
	OK       int            `json:"ok"`
	OKShare  float64        `json:"ok_share"`
	Refused  int            `json:"refused_attempts"`
	Attempts int            `json:"attempts"`
	Errors   map[string]int `json:"errors,omitempty"`
	Seconds  float64        `json:"seconds"`
	Goodput  float64        `json:"goodput_per_s"`
	P50ms    float64        `json:"p50_ms"`
	P99ms    float64        `json:"p99_ms"`
	// RefusedP99ms is the p99 of the time to a RESOURCE_EXHAUSTED answer.
	RefusedP99ms float64 `json:"refused_p99_ms,omitempty"`
	// Ratio is goodput ÷ closed8's (retry400) or loaded ÷ idle p50 (fair).
	Ratio   float64 `json:"ratio,omitempty"`
	IdleP50 float64 `json:"idle_p50_ms,omitempty"`
	Load    string  `json:"loadavg"`
	// The daemon's own view of the scenario (short2000, mix), from its
	// metrics: the p99 of its Route calls from its first interceptor to
	// its answer, refusals included, and of its admitted calls; and the
	// load generator's own lag on the same cores: the p99 of how late a
	// 1 ms sleep in it woke up. A client-side figure far above the
	// daemon's is time spent outside the daemon's handlers: in the
	// client's process, or before the daemon's runtime read the request.
	DaemonP99ms   float64 `json:"daemon_route_p99_ms,omitempty"`
	AdmittedP99ms float64 `json:"daemon_admitted_p99_ms,omitempty"`
	ClientLagP99  float64 `json:"client_lag_p99_ms,omitempty"`
	// The client's own figures (streamClock): the p99 of an attempt's
	// start to its headers out, the attempts never sent, the Route calls
	// that reached the daemon's interceptors (the tap's refusals do not),
	// and of refused attempts the p99 of their headers out to their answer
	// read and of their answer read to their caller running.
	ClientSendP99  float64 `json:"client_send_p99_ms,omitempty"`
	Unsent         int     `json:"attempts_never_sent,omitempty"`
	DaemonCalls    float64 `json:"daemon_route_calls,omitempty"`
	RefusedTripP99 float64 `json:"refused_trip_p99_ms,omitempty"`
	RefusedWakeP99 float64 `json:"refused_wake_p99_ms,omitempty"`
	// DaemonRefused is the Route calls the daemon's admission refused
	// (in its tap or its interceptor), whether or not the refusal reached
	// the client before its deadline.
	DaemonRefused float64 `json:"daemon_route_refused,omitempty"`
}

// routeHist is the daemon's histogram of its Route calls' time.
const routeHist = `classifierd_rpc_duration_seconds{method="/classifier.v1.ClassifierService/Route"`

// routeRefused is the daemon's count of its admission's Route refusals.
const routeRefused = `classifierd_admission_rejected_total{method="/classifier.v1.ClassifierService/Route"}`

// view is the daemon's and the client's own figures over one scenario.
type view struct {
	daemonP99, admittedP99, lagP99 float64
	daemonCalls                    float64 // Route calls the daemon's interceptors saw
	daemonRefused                  float64 // Route calls its admission refused
	clock                          clockView
}

func (v view) String() string {
	return fmt.Sprintf("the daemon's own Route p99 %.2f ms (refusals included), its admitted calls' p99 %.2f ms; the load generator's lag p99 %.2f ms; "+
		"the client's send p99 %.2f ms (start to headers out, waiting for a stream included), %d of %d attempts never sent, %.0f Route calls reached the daemon's interceptors, %.0f refused by its admission; "+
		"refused attempts: headers out to answer read p99 %.2f ms, answer read to caller running p99 %.2f ms",
		v.daemonP99, v.admittedP99, v.lagP99, v.clock.sendP99ms, v.clock.unsent, v.clock.attempts, v.daemonCalls, v.daemonRefused, v.clock.refTripP99ms, v.clock.refWakeP99ms)
}

// observe runs f while it measures the load generator's lag (a 1 ms sleep
// woken late) and reads the daemon's histograms before and after (none
// when metricsAddr is empty).
func observe(ctx context.Context, metricsAddr string, clock *streamClock, f func()) view {
	clock.reset()
	var before map[string]histogram
	var refusedBefore map[string]float64
	if metricsAddr != "" {
		before, _ = scrapeHistograms(ctx, metricsAddr, routeHist, admittedHist)
		refusedBefore, _ = scrapeValues(ctx, metricsAddr, routeRefused)
	}
	stop := make(chan struct{})
	var lags []time.Duration
	var probe sync.WaitGroup
	probe.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t := time.Now()
			time.Sleep(time.Millisecond)
			lags = append(lags, time.Since(t)-time.Millisecond)
		}
	})
	f()
	close(stop)
	probe.Wait()
	v := view{lagP99: ms(quantile(lags, 0.99)), clock: clock.view()}
	if metricsAddr != "" && before != nil {
		if after, err := scrapeHistograms(ctx, metricsAddr, routeHist, admittedHist); err == nil {
			v.daemonP99 = histP99ms(after[routeHist], before[routeHist])
			v.admittedP99 = histP99ms(after[admittedHist], before[admittedHist])
			if d, ok := after[routeHist].sub(before[routeHist]); ok && len(d.cum) > 0 {
				v.daemonCalls = d.cum[len(d.cum)-1]
			}
			if r, err := scrapeValues(ctx, metricsAddr, routeRefused); err == nil && refusedBefore != nil {
				v.daemonRefused = r[routeRefused] - refusedBefore[routeRefused]
			}
		}
	}
	return v
}

func (s *scenario) setView(v view) {
	s.DaemonP99ms, s.AdmittedP99ms, s.ClientLagP99 = v.daemonP99, v.admittedP99, v.lagP99
	s.ClientSendP99, s.Unsent, s.DaemonCalls = v.clock.sendP99ms, v.clock.unsent, v.daemonCalls
	s.RefusedTripP99, s.RefusedWakeP99, s.DaemonRefused = v.clock.refTripP99ms, v.clock.refWakeP99ms, v.daemonRefused
	s.Load += "; " + v.String()
}

func (s scenario) line() string {
	errs := make([]string, 0, len(s.Errors))
	for k, v := range s.Errors {
		errs = append(errs, fmt.Sprintf("%s:%d", k, v))
	}
	slices.Sort(errs)
	out := fmt.Sprintf("%-14s %7d %6s %7d %7.2f%% %8d %9.0f %8.2f %8.2f %8s  %s", s.Name, s.Clients, s.Deadline, s.Calls, 100*s.OKShare,
		s.Refused, s.Goodput, s.P50ms, s.P99ms, msOrDash(s.RefusedP99ms), strings.Join(errs, " "))
	if s.Ratio > 0 {
		out += fmt.Sprintf("  ratio %.2f", s.Ratio)
	}
	return out + "  load " + s.Load
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// tally collects attempts' outcomes from many clients.
type tally struct {
	mu       sync.Mutex
	ok       []time.Duration // of calls that ended OK (retries included)
	refusedT []time.Duration // of attempts answered RESOURCE_EXHAUSTED
	errs     map[string]int  // calls that ended otherwise
	attempts int
}

func (t *tally) result(name string, clients int, deadline time.Duration, calls int, took time.Duration) scenario {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := scenario{Name: name, Clients: clients, Deadline: deadline.String(), Calls: calls, OK: len(t.ok), Refused: len(t.refusedT),
		Attempts: t.attempts, Errors: t.errs, Seconds: took.Seconds(), Load: loadavg()}
	if calls > 0 {
		s.OKShare = float64(s.OK) / float64(calls)
	}
	s.Goodput = float64(s.OK) / took.Seconds()
	if len(t.ok) > 0 {
		slices.Sort(t.ok)
		s.P50ms, s.P99ms = ms(t.ok[len(t.ok)/2]), ms(t.ok[min(len(t.ok)-1, len(t.ok)*99/100)])
	}
	if len(t.refusedT) > 0 {
		slices.Sort(t.refusedT)
		s.RefusedP99ms = ms(t.refusedT[min(len(t.refusedT)-1, len(t.refusedT)*99/100)])
	}
	if len(s.Errors) == 0 {
		s.Errors = nil
	}
	return s
}

// call makes one Route call within deadline, retrying RESOURCE_EXHAUSTED
// with backoff (20 ms doubling to 1 s, uniform jitter in [b/2, 3b/2]) and
// marking each retry with grpc-previous-rpc-attempts as gRPC's retry
// policy does, if retry; else one attempt.
func call(ctx context.Context, cl pb.ClassifierServiceClient, req *pb.RouteRequest, deadline time.Duration, retry bool, rng *rand.Rand, t *tally) {
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		actx := cctx
		if attempt > 0 {
			actx = metadata.AppendToOutgoingContext(cctx, "grpc-previous-rpc-attempts", strconv.Itoa(attempt))
		}
		began := time.Now()
		_, err := cl.Route(actx, req)
		code := status.Code(err)
		t.mu.Lock()
		t.attempts++
		switch code {
		case codes.OK:
			t.ok = append(t.ok, time.Since(start))
		case codes.ResourceExhausted:
			t.refusedT = append(t.refusedT, time.Since(began))
		}
		t.mu.Unlock()
		if code == codes.ResourceExhausted && retry && ctx.Err() == nil {
			pause := backoff/2 + time.Duration(rng.Int64N(int64(backoff)+1))
			backoff = min(2*backoff, time.Second)
			select {
			case <-time.After(pause):
				continue
			case <-cctx.Done():
				code = codes.DeadlineExceeded
			}
		}
		if code != codes.OK && ctx.Err() == nil {
			t.mu.Lock()
			if t.errs == nil {
				t.errs = map[string]int{}
			}
			t.errs[code.String()]++
			t.mu.Unlock()
		}
		return
	}
}

// byCount runs n calls from clients closed-loop clients.
func byCount(ctx context.Context, cls []pb.ClassifierServiceClient, queries []string, clients, n int, deadline time.Duration, retry bool, t *tally) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(clients)))
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				call(ctx, cls[w%len(cls)], &pb.RouteRequest{Query: queries[i%len(queries)]}, deadline, retry, rng, t)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// byTime runs clients closed-loop clients for d, one attempt per call:
// a refused client backs off before its next call.
func byTime(ctx context.Context, cls []pb.ClassifierServiceClient, queries []string, clients int, d, deadline time.Duration, t *tally) (int, time.Duration) {
	var calls atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			backoff := 20 * time.Millisecond
			for i := w; time.Now().Before(end) && ctx.Err() == nil; i += clients {
				calls.Add(1)
				t.mu.Lock()
				refused := len(t.refusedT)
				t.mu.Unlock()
				call(ctx, cls[w%len(cls)], &pb.RouteRequest{Query: queries[i%len(queries)]}, deadline, false, rng, t)
				t.mu.Lock()
				wasRefused := len(t.refusedT) > refused
				t.mu.Unlock()
				if !wasRefused {
					backoff = 20 * time.Millisecond
					continue
				}
				pause := backoff/2 + time.Duration(rng.Int64N(int64(backoff)+1))
				backoff = min(2*backoff, time.Second)
				select {
				case <-time.After(pause):
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
	return int(calls.Load()), time.Since(start)
}

// startHog starts a CPU hog: this binary again, spinning on core 0.
func startHog() (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), busyEnv+"=1")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }, nil
}

// busyLoop spins on core 0 for at most ten minutes (the parent kills it
// sooner).
func busyLoop() {
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(0)
	_ = unix.SchedSetaffinity(0, &set)
	end := time.Now().Add(10 * time.Minute)
	for x := 0; time.Now().Before(end); x++ {
		for range 1_000_000 {
			x ^= x << 1
		}
	}
}

// bigQuery is a 240 KB prompt, as the hog of issue 27 sent.
func bigQuery() string {
	words := strings.Fields("please read the deploy log below and tell me which service failed then open an issue with the stack trace and post a summary to the deploys channel the database migration timed out while connecting to postgres")
	var b strings.Builder
	for i := 0; b.Len() < 240<<10; i++ {
		b.WriteString(words[(i*7)%len(words)])
		b.WriteByte(' ')
	}
	return b.String()[:240<<10]
}

// smallSequence makes n small Routes one after another with token and
// returns the answered calls' latencies and the refusals.
func smallSequence(ctx context.Context, cl pb.ClassifierServiceClient, token string, queries []string, from, n int, errs map[string]int) ([]time.Duration, int) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	var d []time.Duration
	refused := 0
	for i := from; i < from+n; i++ {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cl.Route(cctx, &pb.RouteRequest{Query: queries[i%len(queries)]})
		cancel()
		switch status.Code(err) {
		case codes.OK:
			d = append(d, time.Since(start))
		case codes.ResourceExhausted:
			refused++
		default:
			errs[status.Code(err).String()]++
		}
	}
	return d, refused
}

// quantile is the q quantile of d, sorted in place (0 when empty).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*q))]
}

// runScenarios starts a daemon with a token file and runs the named
// scenarios (all when names is "all").
func runScenarios(ctx context.Context, c config, names []string, calls int, queries []string, out io.Writer) ([]scenario, error) {
	want := func(n string) bool { return slices.Contains(names, "all") || slices.Contains(names, n) }
	dir, err := os.MkdirTemp("", "loadtest-tokens-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("load route "+loadToken+"\nhog route "+hogToken+"\nsmall route "+smallToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	// The hog of fair and +hog sends 16 Routes of 240 KB at once, some
	// 60 MiB a second, past the per-caller rate of request bytes
	// (--body-bytes-per-second, 16 MiB): held to it, it is refused at
	// its headers and its connection closed, and it no longer tests the
	// admission's share of the cores, which is what those scenarios
	// measure. The rate is turned off before the operator's own
	// arguments (LOADTEST_DAEMON_ARGS), which may turn it on again.
	c.daemonArgs = append([]string{"--body-bytes-per-second", "0"}, c.daemonArgs...)
	c.daemonArgs = append(c.daemonArgs, "--auth-token-file", tokens)
	if c.metricsAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	addr, _, stopDaemon, err := startDaemon(ctx, c)
	if err != nil {
		return nil, err
	}
	defer stopDaemon()
	clock := &streamClock{}
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	// dial opens n connections for clients to share.
	dial := func(n int) ([]pb.ClassifierServiceClient, error) {
		cls := make([]pb.ClassifierServiceClient, n)
		for i := range cls {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithReadBufferSize(64<<10),
				grpc.WithStatsHandler(clock))
			if err != nil {
				return nil, err
			}
			conns = append(conns, conn)
			cls[i] = pb.NewClassifierServiceClient(conn)
		}
		return cls, nil
	}
	cls, err := dial(8)
	if err != nil {
		return nil, err
	}
	lctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+loadToken)
	// Warm the daemon (its cost estimate, the word cache) before measuring.
	var warm tally
	byCount(lctx, cls, queries, 8, 500, 5*time.Second, true, &warm)

	fmt.Fprintf(out, "\nscenarios (issues 25 and 27): daemon %s, the machine's load average before each\n", c.daemon)
	fmt.Fprintf(out, "%-14s %7s %6s %7s %8s %8s %9s %8s %8s %8s  %s\n", "scenario", "clients", "dl", "calls", "ok", "refused", "goodput/s", "p50 ms", "p99 ms", "ref p99", "errors")
	var res []scenario
	emit := func(s scenario) {
		res = append(res, s)
		fmt.Fprintln(out, s.line())
	}
	retryPair := func(suffix string) {
		var g8 float64
		if want("closed8") || want("retry400") {
			var t tally
			load := loadavg()
			took := byCount(lctx, cls, queries, 8, calls, 5*time.Second, true, &t)
			s := t.result("closed8"+suffix, 8, 5*time.Second, calls, took)
			s.Load = load
			g8 = s.Goodput
			emit(s)
		}
		if want("retry400") {
			var t tally
			load := loadavg()
			took := byCount(lctx, cls, queries, 400, calls, 5*time.Second, true, &t)
			s := t.result("retry400"+suffix, 400, 5*time.Second, calls, took)
			s.Load = load
			if g8 > 0 {
				s.Ratio = s.Goodput / g8
			}
			emit(s)
		}
	}
	retryPair("")
	if want("hog") {
		stop, err := startHog()
		if err != nil {
			return res, fmt.Errorf("cpu hog: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
		retryPair("+hog")
		stop()
	}
	if want("short2000") {
		var t tally
		load := loadavg()
		var n int
		var took time.Duration
		wide, err := dial(connsFor(2000))
		if err != nil {
			return res, err
		}
		v := observe(ctx, c.metricsAddr, clock, func() { n, took = byTime(lctx, wide, queries, 2000, 5*time.Second, 50*time.Millisecond, &t) })
		s := t.result("short2000", 2000, 50*time.Millisecond, n, took)
		s.Load = load
		s.setView(v)
		emit(s)
	}
	if want("mix") {
		var long, short tally
		load := loadavg()
		var wg sync.WaitGroup
		end := time.Now().Add(5 * time.Second)
		mctx, cancel := context.WithDeadline(lctx, end.Add(5*time.Second))
		var longCalls atomic.Int64
		wide, err := dial(connsFor(1000))
		if err != nil {
			cancel()
			return res, err
		}
		var n int
		var took time.Duration
		v := observe(ctx, c.metricsAddr, clock, func() {
			wg.Go(func() {
				var next atomic.Int64
				var inner sync.WaitGroup
				for w := range 8 {
					inner.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(w), 99))
						for time.Now().Before(end) {
							i := int(next.Add(1))
							longCalls.Add(1)
							call(mctx, cls[w], &pb.RouteRequest{Query: queries[i%len(queries)]}, 5*time.Second, true, rng, &long)
						}
					})
				}
				inner.Wait()
			})
			n, took = byTime(mctx, wide, queries, 1000, 5*time.Second, 50*time.Millisecond, &short)
			wg.Wait()
		})
		cancel()
		sl := long.result("mix:long", 8, 5*time.Second, int(longCalls.Load()), took)
		ss := short.result("mix:short", 1000, 50*time.Millisecond, n, took)
		sl.Load, ss.Load = load, load
		ss.setView(v)
		emit(sl)
		emit(ss)
	}
	if want("fair") {
		s, err := fairScenario(ctx, cls, queries)
		if err != nil {
			return res, err
		}
		emit(s)
	}
	return res, nil
}

// fairScenario measures one token's small Routes alone and beside
// another token's 16 concurrent 240 KB Routes, in fairRounds alternating
// rounds of fairCalls ÷ fairRounds calls each, so that the machine's other
// load, which drifts over seconds on a shared machine, weighs on both
// figures alike.
func fairScenario(ctx context.Context, cls []pb.ClassifierServiceClient, queries []string) (scenario, error) {
	const (
		fairCalls  = 300
		fairRounds = 3
		per        = fairCalls / fairRounds
	)
	load := loadavg()
	big := bigQuery()
	var idle, loaded []time.Duration
	var hog tally
	refused := 0
	errs := map[string]int{}
	var took time.Duration
	for r := range fairRounds {
		d, ref := smallSequence(ctx, cls[0], smallToken, queries, 2*r*per, per, map[string]int{})
		if ref > 0 || len(d) < per {
			return scenario{}, errors.New("fair: small Routes refused or failed with nothing else running")
		}
		idle = append(idle, d...)
		hctx, stop := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+hogToken))
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(16+r)))
				for hctx.Err() == nil {
					call(hctx, cls[1+w%(len(cls)-1)], &pb.RouteRequest{Query: big}, 5*time.Second, true, rng, &hog)
				}
			})
		}
		time.Sleep(time.Second) // the hog takes the places and fills the queue
		start := time.Now()
		d, ref = smallSequence(ctx, cls[0], smallToken, queries, (2*r+1)*per, per, errs)
		took += time.Since(start)
		loaded = append(loaded, d...)
		refused += ref
		stop()
		wg.Wait()
		time.Sleep(500 * time.Millisecond) // the hog's calls end and it stops being active
	}
	loaded99 := quantile(loaded, 0.99)
	idle50, loaded50 := quantile(idle, 0.5), quantile(loaded, 0.5)
	s := scenario{Name: "fair", Clients: 1, Deadline: "5s", Calls: fairCalls, OK: len(loaded), Refused: refused, Seconds: took.Seconds(),
		P50ms: ms(loaded50), P99ms: ms(loaded99), IdleP50: ms(idle50), Errors: errs}
	s.OKShare = float64(s.OK) / fairCalls
	s.Goodput = float64(s.OK) / took.Seconds()
	if idle50 > 0 {
		s.Ratio = float64(loaded50) / float64(idle50)
	}
	if len(s.Errors) == 0 {
		s.Errors = nil
	}
	hr := hog.result("hog", 16, 5*time.Second, 0, took)
	s.Load = fmt.Sprintf("%s; idle p50 %.2f ms, beside the hog %.2f ms, %d rounds alternating (hog: %d answered = %.1f/s, %d refused attempts)",
		load, ms(idle50), ms(loaded50), fairRounds, hr.OK, hr.Goodput, hr.Refused)
	return s, nil
}

// curveDoneWhen checks the curve against issue 17's targets: Route/s at
// 8 clients ≥ 800, p99 of admitted calls at 2,000 clients ≤ 50 ms (for
// clients that do not tell the daemon a long deadline).
func curveDoneWhen(steps []step, sentDeadline bool) []string {
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	var out []string
	for _, s := range steps {
		switch s.Clients {
		case 8:
			out = append(out, fmt.Sprintf("curve 8 clients: %.0f Route/s (target >= 800): %s", s.RPS, mark(s.RPS >= 800)))
		case 2000:
			line := fmt.Sprintf("curve 2000 clients: admitted p99 %.2f ms (target <= 50; the daemon's own %s ms, its wait p99 %s ms): %s",
				s.P99ms, msOrDash(s.SrvP99ms), msOrDash(s.WaitP99ms), mark(s.P99ms <= 50))
			if sentDeadline {
				line += " (calls told the daemon their 5 s deadline: the target does not apply, see docs/loadtest.md)"
			}
			out = append(out, line)
		}
	}
	return out
}

// doneWhen checks the scenarios against the targets of issues 25 and 27.
func doneWhen(scens []scenario) []string {
	var out []string
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	for _, s := range scens {
		switch {
		case strings.HasPrefix(s.Name, "closed8"):
			out = append(out, fmt.Sprintf("%s: %d refused attempts (target 0): %s", s.Name, s.Refused, mark(s.Refused == 0)))
		case strings.HasPrefix(s.Name, "retry400"):
			out = append(out, fmt.Sprintf("%s: %.2f%% OK (target >= 99.5%%), goodput %.0f/s = %.2f x closed8's (target >= 0.8): %s",
				s.Name, 100*s.OKShare, s.Goodput, s.Ratio, mark(s.OKShare >= 0.995 && s.Ratio >= 0.8)))
		case s.Name == "short2000":
			out = append(out, fmt.Sprintf("%s: refusals p99 %.2f ms (target <= 5), answered p99 %.2f ms (target <= 50): %s (the daemon's own Route p99 %.2f ms, admitted p99 %.2f ms; the load generator's lag p99 %.2f ms; "+
				"refused attempts in the client: headers out to answer read p99 %.2f ms, answer read to caller running p99 %.2f ms; %d attempts never sent)",
				s.Name, s.RefusedP99ms, s.P99ms, mark(s.RefusedP99ms <= 5 && s.P99ms <= 50), s.DaemonP99ms, s.AdmittedP99ms, s.ClientLagP99,
				s.RefusedTripP99, s.RefusedWakeP99, s.Unsent))
		case s.Name == "fair":
			out = append(out, fmt.Sprintf("%s: small Route p50 %.2f ms beside the hog, %.2f ms idle = %.2f x (target <= 2), %d refused (target 0): %s",
				s.Name, s.P50ms, s.IdleP50, s.Ratio, s.Refused, mark(s.Ratio <= 2 && s.Refused == 0)))
		}
	}
	return out
}
