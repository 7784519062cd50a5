#!/usr/bin/env bash
# win0many11b.sh: gRPC answers never read (H2=bin/h2md10b EXTRA_H2="-trickle 24000 -every 20s": read slowly), from K identities at once (m0..m{K-1}, default 50), each CONNS connections (default 4) × 64 Embed calls with window 0 held HOLD s (default 60), against start10b.sh's daemon (BIN, DIR); prints RSS, heap, goroutines at 10 s, 25 s and HOLD-10 s, and bob's Route p50/p99.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
go build -o bin/g10b ./tools/hostile/g10b && go build -o bin/h2md10b ./tools/hostile/h2md10b
DIR=${DIR:-$ROOT/var/h11w0}; export DIR; rm -rf "$DIR/state"
[ -f "$DIR/env" ] && { . "$DIR/env"; kill "$PID" 2>/dev/null || true; sleep 2; }
tools/hostile/start10b.sh >/dev/null; . "$DIR/env"
tok() { awk -v n="$1" '$1==n{print $3}' "$DIR/tokens"; }
m() { local x; x=$(curl -s "http://$METRICS/metrics")
  echo "$1: rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status) MB heap_inuse=$(echo "$x" | awk '/^go_memstats_heap_inuse_bytes/{print int($2/1048576)}') MB goroutines=$(echo "$x" | awk '/^go_goroutines/{print $2}') load=$(cut -d' ' -f1 /proc/loadavg)"; }
M=$(python3 -c "import sys; sys.stdout.write(''.join('\x0a\x0cembed hello%d' % (i%10) for i in range(64)))")
HOLD=${HOLD:-60}; K=${K:-50}
m before; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 20 -gap 50ms
for i in $(seq 0 $((K - 1))); do
  nice -n 19 ${H2:-bin/h2md10b} -addr "$GRPC" -path /classifier.v1.ClassifierService/Embed -token "$(tok m$i)" -msg "$M" -win0 ${EXTRA_H2:-} \
    -conns "${CONNS:-4}" -streams 64 -md 0 -hold "${HOLD}s" > "/tmp/win0many11b.$$.$i" 2>&1 &
done
sleep 10; m "at 10 s"; sleep 15; m "at 25 s"; bin/g10b -addr "$GRPC" -token "$(tok bob)" -n 20 -gap 50ms; sleep $((HOLD - 35)); m "at $((HOLD - 10)) s"
wait; m after; cat /tmp/win0many11b.$$.* | awk '{c[substr($0, index($0,$2))]+=$1} END {for (k in c) print c[k], k}' | sort -rn | head -6; rm -f /tmp/win0many11b.$$.*
echo "load: $(cat /proc/loadavg)"; kill "$PID"
