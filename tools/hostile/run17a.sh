#!/usr/bin/env bash
# run17a.sh DIR SCENARIO [SECS]: one scenario of the seventeenth pass (A)
# against the start13a.sh daemon of DIR (TLS=1), with bob's small Route
# over --http-listen every 50 ms (victim16a.py) beside it; the attacker's
# line, then bob's. Needs the g17a binary at $G17A (default /tmp/g17a: go build -o /tmp/g17a ./tools/hostile/g17a).
# Scenarios:
#   idle      bob alone
#   hhttp     health Checks over --http-listen, no token, 4 connections (held:
#             health is not served there, 405 from the explain page)
#             pipelining 64 (hflood17a.py)
#   hgrpc     health Checks over gRPC, no token, 16 loops on 4 connections,
#             while a probe opens a connection every 500 ms to Check
#   watch     WatchExposure of a session that does not exist, as alice,
#             32 loops on 4 connections (gRPC)
#   refl      reflection streams, 1,000 requests each, as carol, 4 loops on
#             2 connections (gRPC)
#   report    ReportUse by 100 KB queries as rep, 4 connections (HTTP/1.1)
#   route     the same queries as Routes (the comparison)
#   mcprep    report_use by 100 KB queries as rep over --mcp-listen, 4
#             sessions (mcprep17a.py): outside admission
#   mcproute  the same queries to the route tool (admitted: the comparison)
#   idx       GetIndexInfo as carol, 4 connections pipelining 64 (idx17a.py)
#   deadline  carol's 8 loops of 262 KB Routes (gRPC) while bob, instead
#             of victim16a.py, routes every 20 ms with a 50 ms deadline on
#             one gRPC connection (g17a -mode victim) and over HTTP/1.1
#             with X-Server-Timeout 0.05 (victim17a.py, 4 connections)
#   many      20 identities (m0..m19), each 2 loops of 262 KB Routes without
#             a deadline (within their shares they wait, whatever
#             --max-waiting-time); RSS and queue depth sampled
#   cheap     carol's hog while bob calls GetIndexInfo over HTTP/1.1 (no
#             model; AdmitCPU holds a core while the cores are shared),
#             VT threads (default 1) every VE ms (default 50), with
#             X-Server-Timeout DL ms when DL is set (victim17a.py)
#   cheapidle the same without the hog
#   shared    carol's hog while one gRPC connection carries alice's Routes
#             with 5 ms deadlines and bob's without (g17a -mode shared)
set -u
D=$1; S=$2; T=${3:-15}
H=$(cd "$(dirname "$0")" && pwd)
. "$D/env"
G17A=${G17A:-/tmp/g17a}
tok() { awk -v n="$1" '$1==n{print $3}' "$D/tokens"; }
N="nice -n 10"
victim() { python3 "$H/victim16a.py" "$D" "$T" bob; }
case $S in
idle) victim ;;
hhttp) $N python3 "$H/hflood17a.py" "$D" - 4 "$T" 64 & victim; wait ;;
hgrpc) $N "$G17A" -addr "$GRPC" -mode health -conc 16 -conns 4 -hold "${T}s" -label "flood " &
  "$G17A" -addr "$GRPC" -mode hprobe -every 500ms -deadline 1s -hold "${T}s" -label "probe " & victim; wait ;;
watch) $N "$G17A" -addr "$GRPC" -mode watch -token "$(tok alice)" -conc 32 -conns 4 -hold "${T}s" & victim; wait ;;
refl) $N "$G17A" -addr "$GRPC" -mode refl -token "$(tok carol)" -conc 4 -conns 2 -hold "${T}s" & victim; wait ;;
report) $N python3 "$H/rep17a.py" "$D" rep 4 "$T" 100000 & victim; wait ;;
route) $N python3 "$H/rep17a.py" "$D" rep 4 "$T" 100000 Route & victim; wait ;;
mcprep) $N python3 "$H/mcprep17a.py" "$D" rep 4 "$T" 100000 & victim; wait ;;
mcproute) $N python3 "$H/mcprep17a.py" "$D" rep 4 "$T" 100000 route & victim; wait ;;
idx) $N python3 "$H/idx17a.py" "$D" carol 4 "$T" 64 & victim; wait ;;
deadline) $N "$G17A" -addr "$GRPC" -mode hog -token "$(tok carol)" -conc 8 -size 262000 -hold "$((T + 4))s" -label "carol " &
  sleep 2
  "$G17A" -addr "$GRPC" -mode victim -token "$(tok bob)" -every 20ms -conc 8 -deadline "${DL:-50}ms" -hold "${T}s" -label "bob-grpc " &
  python3 "$H/victim17a.py" "$D" bob "$T" 4 80 "$(echo "${DL:-50}" | awk '{print $1/1000}')"; wait ;;
cheap|cheapidle) [ "$S" = cheap ] && { $N "$G17A" -addr "$GRPC" -mode hog -token "$(tok carol)" -conc 8 -size 262000 -hold "$((T + 4))s" -label "carol " & sleep 2; }
  python3 "$H/victim17a.py" "$D" bob "$T" "${VT:-1}" "${VE:-50}" "$(echo "${DL:-0}" | awk '{print $1/1000}')" classifier.v1.ClassifierService/GetIndexInfo '{}'; wait ;;
shared) $N "$G17A" -addr "$GRPC" -mode hog -token "$(tok carol)" -conc 8 -size 262000 -hold "$((T + 4))s" -label "carol " &
  sleep 2
  "$G17A" -addr "$GRPC" -mode shared -token "$(tok bob)" -token2 "$(tok alice)" -every 50ms -conc 8 -deadline "${ADL:-30}ms" -hold "${T}s"; wait ;;
many) for i in $(seq 0 19); do $N "$G17A" -addr "$GRPC" -mode hog -token "$(tok m$i)" -conc 2 -size 262000 -hold "${T}s" -label "m$i " > "$D/many.m$i" & done
  ( for k in $(seq 1 $((T / 3))); do sleep 3; echo "t+$((k * 3))s RSS $(awk '/VmRSS/{print $2/1024 " MB"}' /proc/$PID/status) $(curl -s "http://$METRICS/metrics" | grep -E '^classifierd_admission_(queue_depth|in_flight|callers) ' | tr '\n' ' ')"; done ) &
  victim; wait; cat "$D"/many.m* | awk '{print}' | cut -c1-200 ;;
*) echo "unknown scenario $S"; exit 2 ;;
esac
echo "metrics: $(curl -s "http://$METRICS/metrics" | grep -E '^classifierd_(admission_refused_past_rate_total|grpc_reset_penalties_total|grpc_early_reset_closes_total|http_early_reset_closes_total|grpc_penalized_connections_(held|refused)_total)' | tr '\n' ' ')"
