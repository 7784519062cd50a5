// Package memlimit sets the Go runtime's soft memory limit (GOMEMLIMIT)
// from the memory limit of the container the process runs in, so the
// collector works harder as the heap nears it instead of letting freed
// buffers pile up to twice the live heap (GOGC=100) and the kernel kill
// the process. The eighth hostile pass saw the daemon's RSS 110-236 MB
// above its request-bytes budget under many held bodies, the collector's
// headroom; a pod's limit (deploy/k8s: 512Mi) is what that headroom must
// stay under.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of the container's limit the soft limit takes: the
// rest is for what the Go runtime does not count (ONNX Runtime's own
// allocations, the model's mapped weights, thread stacks).
const Share = 0.9

// unlimited is the cgroup v1 value at and above which there is no limit
// (the kernel reports PAGE_COUNTER_MAX rounded to pages).
const unlimited = 1 << 62

// Cgroup is the memory limit, in bytes, of the cgroup the process runs
// in, read under root ("/" but in tests): cgroup v2's memory.max or v1's
// memory.limit_in_bytes of the process's own cgroup (/proc/self/cgroup),
// else of the hierarchy's root as a container sees it. 0 when none is
// set or none can be read.
func Cgroup(root string) int64 {
	own := map[string]string{} // controller ("" for v2) -> path
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// hierarchy-ID:controller-list:path
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			for _, c := range strings.Split(parts[1], ",") {
				own[c] = parts[2]
			}
		}
	}
	cg := filepath.Join(root, "sys/fs/cgroup")
	var tries []string
	if p, ok := own[""]; ok {
		tries = append(tries, filepath.Join(cg, p, "memory.max"))
	}
	tries = append(tries, filepath.Join(cg, "memory.max"))
	if p, ok := own["memory"]; ok {
		tries = append(tries, filepath.Join(cg, "memory", p, "memory.limit_in_bytes"))
	}
	tries = append(tries, filepath.Join(cg, "memory", "memory.limit_in_bytes"))
	for _, f := range tries {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= unlimited {
			return 0
		}
		return n
	}
	return 0
}

// Choose is the soft limit and where it comes from: the GOMEMLIMIT
// environment variable when set (the runtime has applied it; 0 here),
// else flag when above 0, else Share of the container's limit cgroup,
// else none. flag below 0 turns it off.
func Choose(flag int64, env string, cgroup int64) (limit int64, source string) {
	switch {
	case env != "":
		return 0, "GOMEMLIMIT=" + env
	case flag < 0:
		return 0, "off"
	case flag > 0:
		return flag, "--memory-limit"
	case cgroup > 0:
		return int64(math.Floor(Share * float64(cgroup))), fmt.Sprintf("%.0f%% of the container's %d bytes", 100*Share, cgroup)
	}
	return 0, "none: no container limit"
}

// Apply sets the soft limit Choose gives for flag, this process's
// GOMEMLIMIT and its container, and returns it (0: left as it was) and
// where it comes from.
func Apply(flag int64) (limit int64, source string) {
	limit, source = Choose(flag, os.Getenv("GOMEMLIMIT"), Cgroup("/"))
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit, source
}
