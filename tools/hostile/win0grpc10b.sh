#!/usr/bin/env bash
# win0grpc10b.sh: gRPC answers a client never reads (the tenth pass, B).
# Starts start10b.sh's daemon afresh; carol (route only) opens CONNS
# (default 100) connections announcing SETTINGS_INITIAL_WINDOW_SIZE 0, each
# with 64 Embed calls of 64 short texts, and holds them HOLD seconds
# (default 150, past --idle-timeout); prints the daemon's RSS, Go heap and
# goroutines at 10 s and HOLD-20 s, another identity's Route p50, and after.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
go build -o bin/g10b ./tools/hostile/g10b && go build -o bin/h2md10b ./tools/hostile/h2md10b
[ -f var/h10b/env ] && { . var/h10b/env; kill "$PID" 2>/dev/null || true; sleep 2; }
rm -rf var/h10b/state; tools/hostile/start10b.sh >/dev/null; . var/h10b/env
tok() { awk -v n="$1" '$1==n{print $3}' var/h10b/tokens; }
m() { local x; x=$(curl -s "http://$METRICS/metrics")
  echo "$1: rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status) MB heap_alloc=$(echo "$x" | awk '/^go_memstats_heap_alloc_bytes/{print int($2/1048576)}') MB goroutines=$(echo "$x" | awk '/^go_goroutines/{print $2}')"; }
M=$(python3 -c "import sys; sys.stdout.write(''.join('\x0a\x0cembed hello%d' % (i%10) for i in range(64)))")
HOLD=${HOLD:-150}
m before; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 30 -gap 50ms
nice -n 19 bin/h2md10b -addr "$GRPC" -path /classifier.v1.ClassifierService/Embed -token "$(tok carol)" -msg "$M" -win0 \
  -conns "${CONNS:-100}" -streams 64 -md 0 -hold "${HOLD}s" > /tmp/win0grpc10b.out 2>&1 &
sleep 10; m "at 10 s"; sleep $((HOLD - 30)); m "at $((HOLD - 20)) s"; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 30 -gap 50ms
wait; m after; sort -rn /tmp/win0grpc10b.out | head -4; rm -f /tmp/win0grpc10b.out
echo "load: $(cat /proc/loadavg)"; kill "$PID"
