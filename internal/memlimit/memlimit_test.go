package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeRoot writes files (path relative to the root -> content) under a
// temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2 own cgroup", map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "536870912\n",
			"sys/fs/cgroup/memory.max":                  "max\n",
		}, 536870912},
		{"v2 namespaced root", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, 268435456},
		{"v2 no limit", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v1 own cgroup", map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
		}, 1073741824},
		{"v1 unlimited (this sandbox)", map[string]string{
			"proc/self/cgroup":                           "4:memory:/process_api/f8\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"nothing readable", map[string]string{}, 0},
		{"garbage", map[string]string{"sys/fs/cgroup/memory.max": "lots\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Cgroup(fakeRoot(t, tc.files)); got != tc.want {
				t.Errorf("Cgroup = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		flag   int64
		env    string
		cgroup int64
		want   int64
	}{
		{0, "", 500 << 20, 450 << 20},
		{300 << 20, "", 512 << 20, 300 << 20},
		{-1, "", 512 << 20, 0},
		{0, "400MiB", 512 << 20, 0}, // the runtime applied GOMEMLIMIT
		{300 << 20, "400MiB", 0, 0},
		{0, "", 0, 0},
	} {
		if got, src := Choose(tc.flag, tc.env, tc.cgroup); got != tc.want || src == "" {
			t.Errorf("Choose(%d, %q, %d) = %d (%q), want %d", tc.flag, tc.env, tc.cgroup, got, src, tc.want)
		}
	}
}
