#!/usr/bin/env bash
# heldcalls10b.sh: the tenth pass's (B) held-calls finding, one command.
# Starts start10b.sh's daemon afresh, then a client with no token (health
# Checks, PATH default) or with carol's route token (TOKEN=carol,
# PATH_=/classifier.v1.ClassifierService/GetIndexInfo) opens CONNS (default
# 1000) gRPC connections of 64 calls each that send their headers and no
# message (h2md10b -md 0), held 9 s (under --recv-timeout);
# prints the daemon's RSS, goroutines, heap, stacks and the body budget's
# gauge before and during, and another identity's (bob's) Route p50/p99.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
go build -o bin/g10b ./tools/hostile/g10b && go build -o bin/h2md10b ./tools/hostile/h2md10b
[ -f var/h10b/env ] && { . var/h10b/env; kill "$PID" 2>/dev/null || true; sleep 2; }
tools/hostile/start10b.sh >/dev/null; . var/h10b/env
tok() { awk -v n="$1" '$1==n{print $3}' var/h10b/tokens; }
m() { local x; x=$(curl -s "http://$METRICS/metrics")
  echo "$1: rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status) MB goroutines=$(echo "$x" | awk '/^go_goroutines/{print $2}') heap=$(echo "$x" | awk '/^go_memstats_heap_inuse_bytes/{print int($2/1048576)}') MB stacks=$(echo "$x" | awk '/^go_memstats_stack_inuse_bytes/{print int($2/1048576)}') MB bytes_in_flight=$(echo "$x" | awk '/^classifierd_request_bytes_in_flight/{print $2}')"; }
bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 40 -gap 20ms >/dev/null
m before; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 40 -gap 50ms
T=""; [ -n "${TOKEN:-}" ] && T=$(tok "$TOKEN")
nice -n 19 bin/h2md10b -addr "$GRPC" -path "${PATH_:-/grpc.health.v1.Health/Check}" -token "$T" -conns "${CONNS:-1000}" -streams 64 -md 0 -hold 9s &
sleep 6; m during; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 40 -gap 50ms; m during; wait; m after
echo "load: $(cat /proc/loadavg)"
kill "$PID"
