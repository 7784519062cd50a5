#!/usr/bin/env bash
# frames11b.sh: HTTP/2 frame abuse on the gRPC port (h2f11b -mode each of MODES) against a running start10b.sh daemon in DIR; per mode the daemon's CPU seconds, RSS, goroutines and bob's Route p50/p99 during it.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
DIR=${DIR:-$ROOT/var/h10b}; . "$DIR/env"
tok() { awk -v n="$1" '$1==n{print $3}' "$DIR/tokens"; }
cpu() { awk '{print ($14+$15)/100}' /proc/$PID/stat; }
m() { local x; x=$(curl -s "http://$METRICS/metrics")
  echo "  $1: cpu=$(cpu)s rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status)MB goroutines=$(echo "$x" | awk '/^go_goroutines/{print $2}') heap=$(echo "$x" | awk '/^go_memstats_heap_inuse_bytes/{print int($2/1048576)}')MB"; }
for mode in ${MODES:-cont settings winupd winover rst ping empty priority badorder tiny}; do
  echo "== $mode (conns ${CONNS:-4}, token ${TOKEN:-none}) load $(cat /proc/loadavg)"
  T=""; [ -n "${TOKEN:-}" ] && T=$(tok "$TOKEN")
  m before
  nice -n 10 /usr/bin/time -f "  client cpu %Us user %Ss sys" bin/h2f11b -addr "$GRPC" -mode "$mode" -conns "${CONNS:-4}" -hold "${HOLD:-10}s" -token "$T" ${ARGS:-} > /tmp/h2f11b.$$ 2>&1 &
  c=$!; sleep 3; m during; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 30 -gap 50ms | sed 's/^/  /'; m during
  wait $c || true; sed 's/^/  /' /tmp/h2f11b.$$; rm -f /tmp/h2f11b.$$; sleep 1; m after
done
