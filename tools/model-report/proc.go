package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Readings from /proc (Linux): a process's memory, and CPU time, to tell
// how much of the machine other programs used while latency was timed.

// memory is a process's resident set now and at its peak, in KiB.
type memory struct{ rssKB, hwmKB int64 }

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	return parseStatus(string(b))
}

// parseStatus reads VmRSS and VmHWM from a /proc/PID/status text.
func parseStatus(text string) (memory, error) {
	var m memory
	var seen int
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("proc status: %q", line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("proc status: %q: %w", line, err)
		}
		if k == "VmRSS" {
			m.rssKB = n
		} else {
			m.hwmKB = n
		}
		seen++
	}
	if seen != 2 {
		return m, fmt.Errorf("proc status: no VmRSS and VmHWM")
	}
	return m, nil
}

// cpuSample is CPU time in clock ticks: the machine's total and busy
// time over all cores (/proc/stat), this process's and the daemon's.
type cpuSample struct{ total, busy, self, daemon int64 }

// sampleCPU reads the counters; daemonPID 0 means no daemon.
func sampleCPU(daemonPID int) (cpuSample, error) {
	var s cpuSample
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	if s.total, s.busy, err = parseProcStat(string(b)); err != nil {
		return s, err
	}
	for _, p := range []struct {
		path string
		out  *int64
	}{{"/proc/self/stat", &s.self}, {fmt.Sprintf("/proc/%d/stat", daemonPID), &s.daemon}} {
		if p.out == &s.daemon && daemonPID == 0 {
			continue // no daemon running
		}
		b, err := os.ReadFile(p.path)
		if err != nil {
			return s, err
		}
		if *p.out, err = parsePIDStat(string(b)); err != nil {
			return s, err
		}
	}
	return s, nil
}

// parseProcStat sums the aggregate "cpu" line of /proc/stat: total time
// (user, nice, system, idle, iowait, irq, softirq, steal; guest time is
// already in user) and busy time (all but idle and iowait).
func parseProcStat(text string) (total, busy int64, err error) {
	line, _, _ := strings.Cut(text, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("proc stat: %q", line)
	}
	for i, x := range f[1:9] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc stat: %q: %w", line, err)
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return total, busy, nil
}

// parsePIDStat returns utime+stime of a /proc/PID/stat text (its threads
// included). The command name may hold spaces, so fields are counted
// after its closing parenthesis.
func parsePIDStat(text string) (int64, error) {
	i := strings.LastIndexByte(text, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid stat: no command name")
	}
	f := strings.Fields(text[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("pid stat: %d fields", len(f))
	}
	var sum int64
	for _, x := range f[11:13] { // fields 14 and 15: utime, stime
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pid stat: %w", err)
		}
		sum += n
	}
	return sum, nil
}

// othersShare is the share of the machine's CPU time between a and b that
// went neither to this process nor to the daemon.
func othersShare(a, b cpuSample) float64 {
	total := b.total - a.total
	if total <= 0 {
		return 0
	}
	other := (b.busy - a.busy) - (b.self - a.self) - (b.daemon - a.daemon)
	return max(0, float64(other)/float64(total))
}

// quietShare is the share of the machine's CPU other programs may use
// while a timing starts: half a core of two.
const quietShare = 0.25

// waitQuiet waits, up to maxWait, until other programs use less than
// quietShare of the machine's CPU over a 2-second sample. It returns the
// last share seen (so a busy machine is reported, not hidden) and how
// long it waited.
func waitQuiet(ctx context.Context, maxWait time.Duration) (float64, time.Duration, error) {
	start := time.Now()
	for {
		a, err := sampleCPU(0)
		if err != nil {
			return 0, time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return 0, time.Since(start), ctx.Err()
		case <-time.After(2 * time.Second):
		}
		b, err := sampleCPU(0)
		if err != nil {
			return 0, time.Since(start), err
		}
		share := othersShare(a, b)
		if share < quietShare || time.Since(start) >= maxWait {
			return share, time.Since(start), nil
		}
	}
}
