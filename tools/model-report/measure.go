package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// genIndex runs the gen-index binary with args (plus --ort-lib when set),
// its output going to logPath, and returns its wall time: model load,
// embedding and calibration, what a user waits for.
func (c *config) genIndex(ctx context.Context, logPath string, args ...string) (time.Duration, error) {
	if c.ortLib != "" {
		args = append(args, "--ort-lib", c.ortLib)
	}
	var err error
	for attempt := 1; attempt <= 2; attempt++ {
		var took time.Duration
		if took, err = c.runLogged(ctx, logPath, c.genIndexBin, args...); err == nil || ctx.Err() != nil {
			return took, err
		}
		// Once more: on a shared machine a step can die of something
		// else's doing (a signal, memory); a real fault fails twice.
		c.log.Warn("gen-index failed; running it again", "err", err, "attempt", attempt)
	}
	return 0, err
}

// runLogged runs a program, its output going to logPath, and returns its
// wall time.
func (c *config) runLogged(ctx context.Context, logPath, bin string, args ...string) (time.Duration, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s %s: %w: %s (log %s)", filepath.Base(bin), args[0], err, logSummary(logPath), logPath)
	}
	return time.Since(start), nil
}

// logSummary is the line of a log that says what went wrong: a panic's
// first line, else the last line.
func logSummary(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic:") {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// settle waits for a quiet machine before a timing (see waitQuiet), out
// of what is left of the run's --max-wait, and says so when it stays busy.
func (c *config) settle(ctx context.Context, what string) {
	share, waited, err := waitQuiet(ctx, c.waitLeft)
	c.waitLeft -= waited
	switch {
	case err != nil:
		c.log.Warn("cannot read CPU use", "err", err)
	case share >= quietShare:
		c.log.Warn("machine still busy; timing anyway", "what", what, "others_cpu", fmt.Sprintf("%.0f%%", 100*share),
			"wait_left", c.waitLeft.Round(time.Second))
	}
}

// measureAccuracy runs gen-index eval on Banking77 and on MetaTool, with
// the description-only and the 5-shot catalogs, and keeps the figures.
func measureAccuracy(ctx context.Context, c *config, d *dataset, r *modelResult, dir string) {
	evals := []struct {
		name, catalog, queries string
		take                   func(evalReport) (map[string]float64, error)
	}{
		{"banking77", d.Banking77Catalog, d.Banking77Test, banking77Metrics},
		{"metatool-desc", d.MetaDescCatalog, d.MetaTest, func(e evalReport) (map[string]float64, error) { return metatoolMetrics(e, true) }},
		{"metatool-ex5", d.MetaEx5Catalog, d.MetaTest, func(e evalReport) (map[string]float64, error) { return metatoolMetrics(e, false) }},
		{"hass-intents", d.HassCatalog, d.HassTest, multilingualMetrics},
	}
	for _, s := range d.DevSets {
		evals = append(evals, struct {
			name, catalog, queries string
			take                   func(evalReport) (map[string]float64, error)
		}{s.name, s.catalog, s.queries, s.take})
	}
	for _, e := range evals {
		if e.catalog == "" {
			continue // not measured in this run
		}
		c.log.Info("eval", "model", r.Name, "set", e.name)
		out := filepath.Join(dir, e.name+".json")
		_, err := c.genIndex(ctx, filepath.Join(dir, e.name+".log"), "eval", "--model", r.Dir, "--name", e.name,
			"--catalog", e.catalog, "--queries", e.queries, "--json", out, "--quiet")
		var m map[string]float64
		if err == nil {
			var b []byte
			if b, err = os.ReadFile(out); err == nil {
				var rep evalReport
				if rep, err = parseEval(b); err == nil {
					m, err = e.take(rep)
				}
			}
		}
		if err != nil {
			r.fail(e.name, err)
			continue
		}
		for k, v := range m {
			r.set(k, v)
		}
	}
}

// buildIndexes builds the default catalog's and the large catalog's
// indexes for r, timing both.
func buildIndexes(ctx context.Context, c *config, d *dataset, r *modelResult, dir string) (defIdx, largeIdx string) {
	for _, b := range []struct {
		name, catalog, key string
		out                *string
	}{
		{"default", d.DefaultCatalog, mGenIndex, &defIdx},
		{"large", d.LargeCatalog, mGenIndexL, &largeIdx},
	} {
		c.settle(ctx, "gen-index "+b.name)
		c.log.Info("gen-index", "model", r.Name, "catalog", b.catalog)
		idx := filepath.Join(dir, b.name+".idx")
		took, err := c.genIndex(ctx, filepath.Join(dir, "gen-index-"+b.name+".log"),
			"--catalog", b.catalog, "--model", r.Dir, "--out", idx, "--quiet")
		if err != nil {
			r.fail("gen-index "+b.name, err)
			continue
		}
		r.set(b.key, took.Seconds())
		*b.out = idx
	}
	return defIdx, largeIdx
}

// timing is one kind of call timed on a daemon: n calls, whose p50 and
// p99 go to the two metric keys.
type timing struct {
	p50, p99 string
	n        int
	call     func(context.Context, int) error
}

// measureSpeed times Route and Embed through a real daemon, alone on the
// machine as far as this program can make it: one daemon on the default
// catalog's index (short queries, then the two Embed texts), then one on
// the large catalog's (long queries, and Embed of the same queries, which
// splits Route's time into the model's and the rest). Each reports its
// peak RSS.
func measureSpeed(ctx context.Context, c *config, d *dataset, r *modelResult, dir, defIdx, largeIdx string) {
	var others []float64
	daemons := []struct {
		name, idx, rssKey string
		timings           func(*daemon) []timing
	}{
		{"default", defIdx, mRSSDefault, func(dm *daemon) []timing {
			return []timing{
				{mRouteP50, mRouteP99, c.routeN, func(ctx context.Context, i int) error {
					_, err := dm.cl.Route(ctx, &pb.RouteRequest{Query: d.ShortQueries[i%len(d.ShortQueries)]})
					return err
				}},
				{mEmbedShort, mEmbedShort99, c.embedN, func(ctx context.Context, i int) error {
					_, err := dm.cl.Embed(ctx, &pb.EmbedRequest{Texts: []string{shortText}})
					return err
				}},
				{mEmbedLong, mEmbedLong99, c.embedN, func(ctx context.Context, i int) error {
					_, err := dm.cl.Embed(ctx, &pb.EmbedRequest{Texts: []string{longText}})
					return err
				}},
			}
		}},
		{"large", largeIdx, mRSSLarge, func(dm *daemon) []timing {
			return []timing{
				{mLargeP50, mLargeP99, c.largeRouteN, func(ctx context.Context, i int) error {
					_, err := dm.cl.Route(ctx, &pb.RouteRequest{Query: d.LongQueries[i%len(d.LongQueries)]})
					return err
				}},
				{mLargeEmbed, mLargeEmbed99, c.largeRouteN, func(ctx context.Context, i int) error {
					_, err := dm.cl.Embed(ctx, &pb.EmbedRequest{Texts: []string{d.LongQueries[i%len(d.LongQueries)]}})
					return err
				}},
			}
		}},
	}
	for _, dd := range daemons {
		if dd.idx == "" {
			continue // its index failed to build
		}
		err := withDaemon(ctx, c, r, dd.idx, filepath.Join(dir, "daemon-"+dd.name+".log"), func(dm *daemon) error {
			figures, share, attempts, err := quietest(ctx, c, dm.pid, r.Name+" on the "+dd.name+" catalog", dd.timings(dm))
			if err != nil {
				return err
			}
			for k, v := range figures {
				r.set(k, v)
			}
			others = append(others, share)
			r.set("timing_attempts_"+dd.name, float64(attempts))
			mem, err := readMemory(dm.pid)
			if err != nil {
				return err
			}
			r.set(dd.rssKey, float64(mem.hwmKB)/1024)
			if dd.name == "default" {
				r.set(mRSSNow, float64(mem.rssKB)/1024)
			}
			return nil
		})
		if err != nil {
			r.fail("latency ("+dd.name+" catalog)", err)
		}
	}
	if len(others) > 0 {
		r.set(mOtherCPU, slices.Max(others))
	}
}

// quietest runs the timings up to c.attempts times, each time once the
// machine is quiet (settle), and keeps the figures of the attempt during
// which other programs used the least CPU; an attempt in which they used
// under quietShare ends it, and so does a spent --max-wait. It returns
// that share and the attempts made.
func quietest(ctx context.Context, c *config, pid int, what string, ts []timing) (map[string]float64, float64, int, error) {
	var best map[string]float64
	bestShare := math.Inf(1)
	attempt := 0
	for attempt < c.attempts {
		attempt++
		c.settle(ctx, what)
		c.log.Info("timing", "what", what, "attempt", attempt)
		before, errBefore := sampleCPU(pid)
		figures := map[string]float64{}
		for _, t := range ts {
			lat, err := timeCalls(ctx, t.n, t.call)
			if err != nil {
				return nil, 0, attempt, fmt.Errorf("%s: %w", t.p50, err)
			}
			s := summarize(lat)
			figures[t.p50], figures[t.p99] = ms(s.p50), ms(s.p99)
		}
		after, errAfter := sampleCPU(pid)
		share := 0.0
		if errBefore == nil && errAfter == nil {
			share = othersShare(before, after)
		}
		if share < bestShare {
			best, bestShare = figures, share
		}
		if share < quietShare || c.waitLeft <= 0 {
			break // quiet, or no time left to wait for quiet
		}
		c.log.Warn("other programs were busy while timing", "what", what, "attempt", attempt,
			"others_cpu", fmt.Sprintf("%.0f%%", 100*share))
	}
	return best, bestShare, attempt, nil
}

// warmUp is how many calls of each kind run untimed first.
const warmUp = 10

// timeCalls makes warmUp untimed calls, then n timed ones, one at a time.
func timeCalls(ctx context.Context, n int, call func(context.Context, int) error) ([]time.Duration, error) {
	do := func(i int) (time.Duration, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		err := call(cctx, i)
		return time.Since(start), err
	}
	for i := 0; i < warmUp; i++ {
		if _, err := do(i); err != nil {
			return nil, err
		}
	}
	out := make([]time.Duration, n)
	for i := range out {
		d, err := do(i)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

type latency struct{ p50, p99 time.Duration }

// summarize gives the 50th and 99th percentiles (nearest rank, the way
// tools/loadtest computes them). d is sorted in place.
func summarize(d []time.Duration) latency {
	if len(d) == 0 {
		return latency{}
	}
	slices.Sort(d)
	return latency{p50: d[len(d)/2], p99: d[len(d)*99/100]}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// daemon is a running classifierd and a client connected to it.
type daemon struct {
	pid  int
	conn *grpc.ClientConn
	cl   pb.ClassifierServiceClient
	stop func() error // SIGTERM, then wait (kill after 20 s)
}

// Close disconnects and stops the daemon.
func (d *daemon) Close() error { return errors.Join(d.conn.Close(), d.stop()) }

// withDaemon starts classifierd on idx with its default serving settings,
// waits until it is healthy, runs f and stops it.
func withDaemon(ctx context.Context, c *config, r *modelResult, idx, logPath string, f func(*daemon) error) (err error) {
	dm, err := startDaemon(ctx, c, r.Dir, idx, logPath)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dm.Close()) }()
	return f(dm)
}

// startDaemon starts classifierd on idx, connects to it and waits until
// it reports SERVING.
func startDaemon(ctx context.Context, c *config, model, idx, logPath string) (*daemon, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--index", idx, "--model", model, "--listen", addr, "--log-level", "warn"}
	if c.ortLib != "" {
		args = append(args, "--ort-lib", c.ortLib)
	}
	cmd := exec.CommandContext(ctx, c.daemonBin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(err, log.Close())
	}
	dm := &daemon{pid: cmd.Process.Pid}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = log.Close() }()
	dm.stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		return nil
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, errors.Join(err, dm.stop())
	}
	dm.conn, dm.cl = conn, pb.NewClassifierServiceClient(conn)
	hc := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			return nil, errors.Join(fmt.Errorf("daemon exited before serving: %v: %s (log %s)", err, logSummary(logPath), logPath), conn.Close())
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && h.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return dm, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, errors.Join(fmt.Errorf("daemon not serving after 120s (log %s)", logPath), dm.Close())
		}
	}
}
