// Command image holds the Go parts of `make image` and `make image-test`
// (docs/deploy.md), which build and run the OCI image without a Docker
// daemon:
//
//	image sbom --binary B --status-dir D --ort-lib L --model M [--out F]
//	    an SPDX 2.3 SBOM: the daemon's Go modules (from its build info),
//	    the Debian packages of the root file system (their control
//	    paragraphs), ONNX Runtime and the model, stamped with
//	    SOURCE_DATE_EPOCH so that the same inputs give the same bytes
//	image bundle --dir BUNDLE --netns PATH [-- DAEMON-FLAGS...]
//	    rewrites the runtime config umoci unpacked so runc runs the image
//	    here: no rlimits, read-only root, its non-root user, a
//	    loopback-only network namespace
//	image check --grpc ADDR --metrics ADDR
//	    waits for the running image's health to be SERVING, routes a
//	    query, and reads its metrics endpoint
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: image sbom|bundle|check [flags]")
	}
	switch args[0] {
	case "sbom":
		return runSBOM(args[1:], stdout)
	case "bundle":
		return runBundle(args[1:], stdout)
	case "check":
		return runCheck(args[1:], stdout)
	}
	return fmt.Errorf("unknown subcommand %q (want sbom, bundle or check)", args[0])
}
