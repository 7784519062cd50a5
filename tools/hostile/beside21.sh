#!/usr/bin/env bash
# beside21.sh DIR ADDRVAR CONNS SECS -- honest cmd... (twenty-first pass): a WINDOW_UPDATE flood with no token
# (h2ctl20 -mode ctrl -ctrl wu -pace $PACE, default 200 a second per connection; PACE=0 unpaced) of CONNS
# connections on DIR/env's $ADDRVAR (HTTP, MCP, GRPC) for SECS s, and after DELAY s (default 5) the honest
# command beside it, timed; then the flood's line and the daemon's throttled reads. T: the probes' binaries
# (default /tmp/p21t: go build -o /tmp/p21t/h2ctl20 ./tools/hostile/h2ctl20).
D=$1; A=$2; N=$3; S=$4; shift 5
T=${T:-/tmp/p21t}
. "$D/env"
P=()
[ "${PACE:-200}" != 0 ] && P=(-pace "${PACE:-200}")
timeout $((S+20)) nice -n 5 "$T/h2ctl20" -addr "${!A}" -mode ctrl -ctrl wu "${P[@]}" -conns "$N" -secs "$S" -pid "$PID" > "$T/beside.out" 2>&1 & F=$!
sleep "${DELAY:-5}"
echo "honest start $(date +%T)"; s=$(date +%s.%N)
"$@"
echo "honest took $(echo "$(date +%s.%N) - $s" | bc) s"
wait $F; cat "$T/beside.out"
curl -s "http://$METRICS/metrics" | grep -E "^classifierd_(http2|proxy)_throttled_reads_total"
