package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// bundleOptions say how the image's unpacked bundle is to run.
type bundleOptions struct {
	netns string   // path of the network namespace to join (loopback only)
	args  []string // appended to the image's entrypoint
}

func runBundle(args []string, _ io.Writer) error {
	fs := flag.NewFlagSet("bundle", flag.ContinueOnError)
	dir := fs.String("dir", "", "the OCI bundle umoci unpacked (its config.json is rewritten)")
	netns := fs.String("netns", "", "the network namespace to run in (/var/run/netns/NAME)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *netns == "" {
		return errors.New("bundle: --dir and --netns are required")
	}
	path := filepath.Join(*dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := runtimeConfig(data, bundleOptions{netns: *netns, args: fs.Args()})
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// runtimeConfig rewrites the OCI runtime config umoci made from the image
// so that runc runs it here, as a cluster would:
//   - no rlimits: this sandbox refuses setrlimit (podman and crun fail on
//     RLIMIT_NOFILE), and the image sets none of its own;
//   - the root file system read-only, /tmp a small tmpfs;
//   - the image's user (never root), no new privileges, no terminal;
//   - the given network namespace, which has only loopback;
//   - extra daemon flags after the image's entrypoint.
//
// Fields it does not know are kept as they are.
func runtimeConfig(data []byte, o bundleOptions) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("bundle: config.json: %w", err)
	}
	proc, ok := cfg["process"].(map[string]any)
	if !ok {
		return nil, errors.New("bundle: config.json has no process")
	}
	delete(proc, "rlimits")
	proc["terminal"] = false
	proc["noNewPrivileges"] = true
	user, _ := proc["user"].(map[string]any)
	if uid, _ := user["uid"].(float64); uid == 0 {
		return nil, errors.New("bundle: the image runs as root; it must name a non-root user")
	}
	argv, _ := proc["args"].([]any)
	if len(argv) == 0 {
		return nil, errors.New("bundle: the image has no entrypoint")
	}
	for _, a := range o.args {
		argv = append(argv, any(a))
	}
	proc["args"] = argv

	root, ok := cfg["root"].(map[string]any)
	if !ok {
		return nil, errors.New("bundle: config.json has no root")
	}
	root["readonly"] = true
	mounts, _ := cfg["mounts"].([]any)
	mounts = append(mounts, map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
		"options": []any{"nosuid", "nodev", "noexec", "mode=1777", "size=64m"}})
	cfg["mounts"] = mounts

	linux, ok := cfg["linux"].(map[string]any)
	if !ok {
		return nil, errors.New("bundle: config.json has no linux section")
	}
	nss, _ := linux["namespaces"].([]any)
	found := false
	for _, n := range nss {
		if m, ok := n.(map[string]any); ok && m["type"] == "network" {
			m["path"] = o.netns
			found = true
		}
	}
	if !found {
		nss = append(nss, map[string]any{"type": "network", "path": o.netns})
	}
	linux["namespaces"] = nss
	return json.MarshalIndent(cfg, "", "  ")
}
