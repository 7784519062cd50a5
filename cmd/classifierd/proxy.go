package main

import (
	"fmt"
	"os"
)

// proxyMain runs classifierd proxy and returns the exit code.
func proxyMain(args []string) int {
	fmt.Fprintln(os.Stderr, "classifierd proxy: not implemented yet", args)
	return 2
}
