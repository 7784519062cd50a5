package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/classifierd/classifierd/gen/classifier/v1"
)

// replaceFile puts data at path the way a deploy should: write beside it,
// then rename over it.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestReloadUnderLoad is the reload load test: clients hammer Route over
// real gRPC while the index file is swapped (valid, garbage, truncated)
// and SIGHUPs arrive. Not one request may fail, refused indexes must not
// replace the served one, and the generation must advance with every
// accepted load. It logs the figures README's "Hot reload" quotes.
func TestReloadUnderLoad(t *testing.T) {
	mini, err := os.ReadFile(filepath.Join("testdata", "mini.json"))
	if err != nil {
		t.Fatal(err)
	}
	// b adds a calendar server to mini.
	bCat := filepath.Join(t.TempDir(), "b.json")
	extra := `{"id":"calendar","description":"Calendar events","tools":[{"name":"create_event","description":"Create a calendar event at a date and time"}]},`
	if err := os.WriteFile(bCat, []byte(strings.Replace(string(mini), `"servers":[`, `"servers":[`+extra, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	aIdx, err := os.ReadFile(genIndex(t, filepath.Join("testdata", "mini.json")))
	if err != nil {
		t.Fatal(err)
	}
	bIdx, err := os.ReadFile(genIndex(t, bCat))
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(t.TempDir(), "live.idx")
	replaceFile(t, live, aIdx)
	d, conn := startDaemon(t, live, "--reload-interval", "50ms")
	c := pb.NewClassifierServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// The load: workers call Route until stop, each request with its own
	// deadline; every error is counted.
	const workers = 4
	queries := []string{"Check my GitHub notifications", "read config.json", "schedule a meeting tomorrow at 10", "what can you do"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lat []time.Duration
	var failures []error
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var errs []error
			for i := w; ; i++ {
				select {
				case <-stop:
					mu.Lock()
					lat, failures = append(lat, mine...), append(failures, errs...)
					mu.Unlock()
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				t0 := time.Now()
				_, err := c.Route(rctx, &pb.RouteRequest{Query: queries[i%len(queries)]})
				rcancel()
				mine = append(mine, time.Since(t0))
				if err != nil {
					errs = append(errs, err)
				}
			}
		}()
	}

	load := func() *pb.IndexLoad { return getInfo(ctx, t, c).GetLoad() }
	waitGen := func(want uint64, what string) *pb.IndexLoad {
		t.Helper()
		var l *pb.IndexLoad
		pollUntil(t, 30*time.Second, what, func() bool { l = load(); return l.GetGeneration() >= want })
		if l.GetGeneration() != want {
			t.Fatalf("%s: generation %d, want %d", what, l.GetGeneration(), want)
		}
		return l
	}
	waitRefused := func(after time.Time, what string) {
		t.Helper()
		pollUntil(t, 30*time.Second, what, func() bool {
			l := load()
			return l.GetLastRefused() != "" && l.GetLastRefusedAt().AsTime().After(after)
		})
	}
	hup := func() {
		t.Helper()
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	reloads := 0

	// A new valid index by file: loaded, with its extra tool.
	replaceFile(t, live, bIdx)
	if l := waitGen(2, "the changed index file was not loaded"); l.GetReason() != "file changed" {
		t.Errorf("reason %q, want file changed", l.GetReason())
	}
	reloads++
	if !routeHasTool(ctx, t, c, "schedule a meeting tomorrow at 10", "create_event") {
		t.Error("after the reload Route does not offer the new index's create_event")
	}
	// SIGHUP reloads even an unchanged file.
	hup()
	if l := waitGen(3, "SIGHUP did not reload"); l.GetReason() != "sighup" {
		t.Errorf("reason %q, want sighup", l.GetReason())
	}
	reloads++
	// A garbage file and a truncated index are refused; generation 3 serves on.
	for _, bad := range []struct {
		name string
		data []byte
	}{{"garbage", []byte("this is not an index file")}, {"truncated", bIdx[:len(bIdx)/2]}} {
		before := time.Now()
		replaceFile(t, live, bad.data)
		waitRefused(before, "the "+bad.name+" index was not refused")
		before = time.Now()
		hup() // SIGHUP on a bad file is refused too
		waitRefused(before, "SIGHUP on the "+bad.name+" index was not refused")
		if g := load().GetGeneration(); g != 3 {
			t.Fatalf("after the %s index, generation %d, want 3 (the old index)", bad.name, g)
		}
		if !routeHasTool(ctx, t, c, "schedule a meeting tomorrow at 10", "create_event") {
			t.Fatalf("after the %s index was refused, Route lost the served index's create_event", bad.name)
		}
	}
	// Back to a valid index, then SIGHUPs back to back.
	replaceFile(t, live, aIdx)
	waitGen(4, "the valid index after refused ones was not loaded")
	reloads++
	// At least five, and the load runs for at least 3s.
	for i := 0; i < 5 || time.Since(start) < 3*time.Second; i++ {
		hup()
		reloads++
		waitGen(uint64(reloads+1), "a SIGHUP of the burst did not reload")
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed through reloads; first: %v", len(failures), len(lat), failures[0])
	}
	if len(lat) < 10 {
		t.Fatalf("only %d requests ran: the load did not load", len(lat))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	t.Logf("reload load test: %d Route calls from %d clients in %v (%.0f/s) through %d reloads and 4 refused loads: %d failed; latency p50 %v, p99 %v, max %v",
		len(lat), workers, elapsed.Round(time.Millisecond), float64(len(lat))/elapsed.Seconds(), reloads, len(failures),
		pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
}
