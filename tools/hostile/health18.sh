#!/usr/bin/env bash
# health18.sh BIN PORTBASE [SECS]: the seventeenth pass's two open health
# findings against the daemon BIN (start17a.sh, TLS=1, in a fresh DIR under
# /tmp), run back to back on an old and a new binary:
#   hgrpc   a health-check flood (g17a -mode health, 16 loops on 4
#           connections, no token) from SRC while a kubelet-like probe
#           from the same address opens a connection every 500 ms to Check
#           (1 s timeout); the probe alone first. Prints both lines, the
#           daemon's CPU in the window and the metrics of closes/penalties.
#   hwatch  (first) 16 addresses of one /24 (127.0.0.2-17) each open 64 health
#           Watches; then 16 /24s (127.0.N.2) each 64; after each, a
#           balancer's Watch from another /24 (127.0.200.1).
#   hlong   (the nineteenth pass) the same flood beside a long-lived
#           balancer from the same address: one connection, a burst of
#           BURST (default 12) Checks every EVERY (default 5s), past its
#           own 10 when the flood holds the peer's rate: its codes and how
#           often its connection was closed for refusals.
#   hpack   hpack16a's health Checks of 12 KB of header values in 4 bytes
#           (-refs 3), 2 connections reconnecting, from SRC: the daemon's
#           CPU against the client's.
# PHASES (default "hwatch hgrpc") picks them, in that order.
# With NS=name, everything runs in that network namespace (made by the
# caller, as root: ip netns add h18; ip netns exec h18 ip link set lo up;
# ip netns exec h18 ip addr add 192.0.2.1/32 dev lo; the same for
# 192.0.2.2; ip netns del h18 after), the daemon on
# 0.0.0.0, the flood and the probe from SRC=192.0.2.2 to 192.0.2.1: a peer
# that is not loopback (on loopback every address is one peer, whose new
# connections a penalty holds 200 ms at most). Default: SRC 127.0.0.2 to
# 127.0.0.1.
# Needs /tmp/h18-g17a and /tmp/h18-hpack16a (go build -o /tmp/h18-g17a
# ./tools/hostile/g17a; the same for hpack16a), or G17A_BIN= and
# HPACK_BIN= to name them.
set -u
BIN=$1; B=$2; T=${3:-15}
H=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d /tmp/h18-run.XXXXXX)
X=""; HOST=127.0.0.1; S=127.0.0.2; TO=127.0.0.1
[ -n "${NS:-}" ] && { X="ip netns exec $NS"; HOST=0.0.0.0; S=192.0.2.2; TO=192.0.2.1; }
SRC=${SRC:-$S}
G="$X ${G17A_BIN:-/tmp/h18-g17a}"
DIR=$D BIN=$BIN PORTBASE=$B TLS=1 LOGLEVEL=warn HOST=$HOST $X "$H/start17a.sh" >/dev/null
. "$D/env"
GRPC=127.0.0.1:$B; METRICS=127.0.0.1:$((B + 3))
cpu() { awk '{print ($14+$15)/100}' "/proc/$PID/stat"; }
metric() { $X curl -s "http://$METRICS/metrics" | grep -E "^classifierd_grpc_(health_flood_closes|reset_penalties|early_reset_closes|penalized_connections_held)_total" | tr '\n' ' '; echo; }
echo "== $BIN"
for P in ${PHASES:-hwatch hgrpc}; do case $P in
hwatch)
for i in $(seq 2 17); do $G -addr "$GRPC" -mode hwatch -src 127.0.0.$i -conc 64 -conns 4 -hold 12s -label "hwatch 127.0.0.$i " >"$D/w$i" & done
sleep 6
$G -addr "$GRPC" -mode hwatch -src 127.0.200.1 -conc 1 -hold 2s -label "balancer (16 addresses of a /24 hold theirs) "
wait; for i in $(seq 2 17); do cat "$D/w$i"; done | grep -oE 'map\[[A-Za-z]+:[0-9]+( [A-Za-z]+:[0-9]+)*\]' | sort | uniq -c | sed 's/^/  addresses: /'
sleep 2
for i in $(seq 2 17); do $G -addr "$GRPC" -mode hwatch -src 127.0.$i.2 -conc 64 -conns 4 -hold 12s -label "hwatch 127.0.$i.2 " >"$D/w$i" & done
sleep 6
$G -addr "$GRPC" -mode hwatch -src 127.0.200.1 -conc 1 -hold 2s -label "balancer (16 /24s hold theirs) "
wait; for i in $(seq 2 17); do cat "$D/w$i"; done | grep -oE 'map\[[A-Za-z]+:[0-9]+( [A-Za-z]+:[0-9]+)*\]' | sort | uniq -c | sed 's/^/  addresses: /'
;;
hgrpc)
$G -addr "$TO:$B" -mode hprobe -src "$SRC" -every 500ms -deadline 1s -hold 5s -label "probe alone "
c0=$(cpu)
nice -n 10 $G -addr "$TO:$B" -mode health -src "$SRC" -conc 16 -conns 4 -hold "${T}s" -label "flood " &
sleep 1
$G -addr "$TO:$B" -mode hprobe -src "$SRC" -every 500ms -deadline 1s -hold "$((T - 2))s" -label "probe beside the flood "
wait
echo "daemon CPU in the flood's window: $(echo "$(cpu) $c0" | awk '{printf "%.2f", $1-$2}') s"
metric
;;
hlong)
nice -n 10 $G -addr "$TO:$B" -mode health -src "$SRC" -conc 16 -conns 4 -hold "${T}s" -label "flood " &
sleep 1
$G -addr "$TO:$B" -mode hlong -src "$SRC" -conc "${BURST:-12}" -every "${EVERY:-5s}" -hold "$((T - 2))s" -label "balancer beside the flood "
wait
metric
;;
hpack)
c0=$(cpu)
$X /usr/bin/time -f "hpack16a client CPU %U+%S s" nice -n 10 "${HPACK_BIN:-/tmp/h18-hpack16a}" -addr "$TO:$B" -src "$SRC" -conns 2 -refs 3 -hold "${T}s" 2>&1 | tail -8
echo "daemon CPU in the window: $(echo "$(cpu) $c0" | awk '{printf "%.2f", $1-$2}') s"
metric
;;
esac; sleep 2; done
kill "$PID"; while kill -0 "$PID" 2>/dev/null; do sleep 0.2; done
grep -c . "$D/daemon.log" | sed 's/^/daemon log lines: /'; grep -E '"level":"(ERROR|WARN)"|level=(ERROR|WARN)' "$D/daemon.log" | cut -c1-200 | sort | uniq -c | head -5
rm -rf "$D"
