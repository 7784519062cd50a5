#!/usr/bin/env bash
# rr13b.sh: one rapid-reset evasion run (thirteenth pass, B) against a running
# start10b.sh daemon in DIR: bin/h2f13b ATTACK args (niced) for HOLD s, and 3 s
# in, bob's Routes from VSRC (default 127.0.0.254, a peer of its own; VSRC= for a Unix socket) on a new
# connection; the daemon's CPU seconds, RSS, goroutines and the reset
# counters before, during and after, with the load average.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
DIR=${DIR:-$ROOT/var/h13b}; . "$DIR/env"
tok() { awk -v n="$1" '$1==n{print $3}' "$DIR/tokens"; }
cpu() { awk '{print ($14+$15)/100}' /proc/$PID/stat; }
m() { local x; x=$(curl -s "http://$METRICS/metrics")
  echo "  $1: cpu=$(cpu)s rss=$(awk '/VmRSS/{print int($2/1024)}' /proc/$PID/status)MB goroutines=$(echo "$x" | awk '/^go_goroutines/{print $2}') closes=$(echo "$x" | awk '/^classifierd_grpc_early_reset_closes_total/{print $2}') penalties=$(echo "$x" | awk '/^classifierd_grpc_reset_penalties_total/{print $2}') refused=$(echo "$x" | awk '/^classifierd_grpc_penalized_connections_refused_total/{print $2}') load=$(cut -d' ' -f1 /proc/loadavg)"; }
HOLD=${HOLD:-15}
echo "== h2f13b $ATTACK (hold $HOLD s) load $(cat /proc/loadavg)"
m before; c0=$(cpu); t0=$(date +%s.%N)
nice -n 10 /usr/bin/time -f "  client cpu %Us user %Ss sys" bin/h2f13b -addr "$GRPC" -hold "${HOLD}s" $ATTACK > /tmp/h2f13b.$$ 2>&1 &
c=$!; sleep 3; m during
bin/g13b -addr "$GRPC" -token "$(tok bob)" -src "${VSRC-127.0.0.254}" -n "${VN:-30}" -gap 50ms | sed 's/^/  /'
[ -n "${VSRC2:-}" ] && bin/g13b -addr "$GRPC" -token "$(tok bob)" -src "$VSRC2" -n 10 -gap 50ms | sed 's/^/  /'
m during
wait $c || true; c1=$(cpu); t1=$(date +%s.%N)
sed 's/^/  /' /tmp/h2f13b.$$; rm -f /tmp/h2f13b.$$
echo "  daemon cpu during the attack: $(echo "$c1 $c0 $t1 $t0" | awk '{printf "%.1f s in %.1f s (%.2f cores)", $1-$2, $3-$4, ($1-$2)/($3-$4)}')"
sleep 1; m after
