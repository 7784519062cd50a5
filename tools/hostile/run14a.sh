#!/usr/bin/env bash
# run14a.sh SECS CMD...: the fourteenth pass (A): bob's idle baseline (victim13a.py,
# kept-alive HTTPS, and fresh14a.py, a new connection per call) for 6 s, then CMD
# (niced, for SECS s) with the same victims 2 s in; the daemon's CPU seconds,
# RSS and the reset counters before and after, and the load average.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
DIR=${DIR:-$ROOT/var/h14a}; . "$DIR/env"
SECS=$1; shift
cpu() { awk '{print ($14+$15)/100}' /proc/$PID/stat; }
m() { local x; x=$(curl -s "http://$METRICS/metrics")
  echo "  $1: cpu=$(cpu)s rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status)MB gor=$(echo "$x" | awk '/^go_goroutines/{print $2}') grpcCloses=$(echo "$x" | awk '/^classifierd_grpc_early_reset_closes_total/{print $2}') httpCloses=$(echo "$x" | awk '/^classifierd_http_early_reset_closes_total/{print $2}') penalties=$(echo "$x" | awk '/^classifierd_grpc_reset_penalties_total/{print $2}') refused=$(echo "$x" | awk '/^classifierd_grpc_penalized_connections_refused_total/{print $2}') load=$(cut -d' ' -f1 /proc/loadavg)"; }
if [ "${BASE:-1}" = 1 ]; then
  echo "== baseline"; python3 tools/hostile/victim13a.py "$DIR" 6 & python3 tools/hostile/fresh14a.py "$DIR" 6; wait
fi
echo "== attack ($SECS s): $*"
m before; c0=$(cpu); t0=$(date +%s.%N)
nice -n 10 /usr/bin/time -f "  client cpu %Us user %Ss sys" timeout $((SECS+5)) "$@" > /tmp/run14a.$$ 2>&1 &
c=$!; sleep 2
python3 tools/hostile/victim13a.py "$DIR" $((SECS-3)) & python3 tools/hostile/fresh14a.py "$DIR" $((SECS-3)); wait %2 2>/dev/null
wait $c; c1=$(cpu); t1=$(date +%s.%N)
tail -8 /tmp/run14a.$$ | sed 's/^/  /'; rm -f /tmp/run14a.$$
echo "  daemon cpu: $(echo "$c1 $c0 $t1 $t0" | awk '{printf "%.1f s in %.1f s (%.2f cores)", $1-$2, $3-$4, ($1-$2)/($3-$4)}')"
m after
